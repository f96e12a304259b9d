"""Task models: the shared `BertModel` encoder (`.bert`) plus named heads, one thin Keras model per task.

| task model          | heads (attribute: original variables)                               | script              |
|---------------------|---------------------------------------------------------------------|---------------------|
| BertPretrainer      | `.masked_lm`: cls/predictions/..., `.next_sentence`: cls/seq_relationship/...   | pretraining |
| BertClassifier      | `.classifier`: output_weights [L,H], output_bias [L]                | run_classifier.py   |
| BertSpanLabeler     | `.span`: cls/squad/output_weights [2,H], output_bias [2]            | run_squad.py        |
| BertTokenClassifier | `.tagger`: cls/ner/output_weights [L,H], output_bias [L] (new)      | run_ner.py          |
| BertMultipleChoice  | `.choice`: cls/swag/output_weights [1,H], output_bias [1] (new)     | run_swag.py         |
| BertSentenceEncoder | none (`.sentence_pooling`: mean or [CLS], L2-normalized; no weights) | sentence embeddings |

`bert_tf.checkpoints` maps these attributes to the original variable names.
"""
import dataclasses
import typing

import keras
from keras import ops

from bert_tf.model import heads
from bert_tf.model.encoder import BertModel, serializable
from bert_tf.model.heads import ClassifierHead, FlattenChoices, MaskedLMHead, OutputProjection, SpanHead


class TaskModel(keras.Model):
    """A functional task model on a shared `BertModel` (`.bert`); subclasses add their heads and outputs.

    Serializes as its BertConfig plus the task's own keyword arguments (`_task_kwargs`).
    """
    _task_kwargs = ()

    def __init__(self, inputs, outputs, dtype, **kwargs):
        """The functional model inputs -> outputs under the encoder's dtype policy `dtype`, which the functional
        constructor would ignore (keeping the global policy)."""
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = dtype

    def _init_task(self, config, kwargs):
        """Pops the encoder, dtype and restored_encoder (BertModel's `restored`: the caller restores the encoder
        next, so its random initial values are not computed) from kwargs; returns (bert, policy, encoder input
        dict)."""
        restored = kwargs.pop("restored_encoder", False)
        bert = kwargs.pop("bert", None) or BertModel(config, restored=restored, dtype=kwargs.pop("dtype", None))
        self.bert = bert
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        return bert, bert.dtype_policy, inputs

    def get_config(self):
        return {"config": self.bert.config.to_dict(), "name": self.name,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                **{key: getattr(self, key) for key in self._task_kwargs}}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@serializable
class BertClassifier(TaskModel):
    """run_classifier.py's model: [CLS] pooled output -> dropout -> `output_weights`/`output_bias`.

    Inputs: input_ids, input_mask, segment_ids [B, S] int32. Outputs (float32): logits [B, L] and
    probabilities [B, L] (softmax), or with `regression=True` (STS-B) logits [B, 1] and predictions [B].
    """
    _task_kwargs = ("num_labels", "regression")

    def __init__(self, config, num_labels, regression=False, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        bert, policy, inputs = self._init_task(config, kwargs)
        if regression and num_labels != 1:
            raise ValueError(f"A regression task has one output, got num_labels={num_labels}.")
        self.classifier = ClassifierHead(num_labels, bert.config.hidden_dropout_prob,
                                         bert.config.initializer_range, name="classifier", dtype=policy)
        logits = self.classifier(bert(inputs)["pooled_output"])
        outputs = {"logits": logits}
        if regression:
            outputs["predictions"] = ops.squeeze(logits, -1)
        else:
            outputs["probabilities"] = ops.softmax(logits, axis=-1)
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, **kwargs)
        self.num_labels, self.regression = num_labels, regression


@serializable
class BertSpanLabeler(TaskModel):
    """run_squad.py's model: sequence_output -> `cls/squad/output_weights` -> start_logits, end_logits [B, S]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_span_labeler")
        bert, policy, inputs = self._init_task(config, kwargs)
        self.span = SpanHead(bert.config.initializer_range, name="span", dtype=policy)
        start_logits, end_logits = self.span(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         dtype=policy, **kwargs)


@serializable
class BertTokenClassifier(TaskModel):
    """A tagging model (NER): dropout + `cls/ner/output_weights` on every token -> logits [B, S, L] (float32)."""
    _task_kwargs = ("num_labels",)

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_token_classifier")
        bert, policy, inputs = self._init_task(config, kwargs)
        self.tagger = ClassifierHead(num_labels, bert.config.hidden_dropout_prob, bert.config.initializer_range,
                                     name="tagger", dtype=policy)
        logits = self.tagger(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"logits": logits,
                                                 "probabilities": ops.softmax(logits, axis=-1)},
                         dtype=policy, **kwargs)
        self.num_labels = num_labels


@serializable
class BertMultipleChoice(TaskModel):
    """The paper's SWAG setup: each choice packed as a pair, one score from its [CLS] vector, softmax over choices.

    Inputs: input_ids, input_mask, segment_ids [B, C, S] int32. Outputs: logits, probabilities [B, C] (float32).
    Head variables: `cls/swag/output_weights` [1, H], `cls/swag/output_bias` [1].
    """
    _task_kwargs = ("num_choices",)

    def __init__(self, config, num_choices=4, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        bert, policy, _ = self._init_task(config, kwargs)
        inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        self.choice = ClassifierHead(1, bert.config.hidden_dropout_prob, bert.config.initializer_range,
                                     name="choice", dtype=policy)
        flatten = FlattenChoices(name="flatten_choices")
        flat = {name: flatten(x) for name, x in inputs.items()}
        scores = self.choice(bert(flat)["pooled_output"])  # [B * C, 1]
        logits = ops.reshape(scores, (-1, num_choices))
        super().__init__(inputs=inputs, outputs={"logits": logits, "probabilities": ops.softmax(logits, axis=-1)},
                         dtype=policy, **kwargs)
        self.num_choices = num_choices


@serializable
class BertSentenceEncoder(TaskModel):
    """Sentence embeddings (e.g. all-MiniLM-L6-v2's): the encoder's last layer pooled by `heads.SentencePooling`.

    Inputs: input_ids, input_mask, segment_ids [B, S] int32. Output: embedding [B, H] float32, the mean of the
    real tokens' vectors (`pooling="mean"`) or the [CLS] vector (`"cls"`), divided by its L2 norm when
    `normalize`. No weights beyond the encoder's.
    """
    _task_kwargs = ("pooling", "normalize")

    def __init__(self, config, pooling="mean", normalize=True, **kwargs):
        kwargs.setdefault("name", "bert_sentence_encoder")
        bert, policy, inputs = self._init_task(config, kwargs)
        self.sentence_pooling = heads.SentencePooling(pooling, normalize, name="pooling")
        embedding = self.sentence_pooling(bert(inputs)["sequence_output"], inputs["input_mask"])
        super().__init__(inputs=inputs, outputs={"embedding": embedding}, dtype=policy, **kwargs)
        self.pooling, self.normalize = pooling, normalize


@serializable
class BertPretrainer(TaskModel):
    """BERT with the pretraining heads (the original run_pretraining.py model).

    Inputs (dict): input_ids, input_mask, segment_ids [B, S] int32, masked_lm_positions [B, P] int32.
    Outputs (dict): masked_lm_logits [B, P, V], next_sentence_logits [B, 2] (float32), plus the encoder's
    sequence_output and pooled_output. `with_next_sentence=False` (the paper's "No NSP" ablation): no
    `cls/seq_relationship` head (`.next_sentence`) and no next_sentence_logits.
    """
    _task_kwargs = ("with_next_sentence",)

    def __init__(self, config, with_next_sentence=True, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        bert, policy, inputs = self._init_task(config, kwargs)
        config = bert.config
        self.masked_lm = MaskedLMHead(bert.embeddings, config.hidden_act, config.initializer_range,
                                      name="predictions", dtype=policy)
        encoder = bert(inputs)
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        outputs = {
            "masked_lm_logits": self.masked_lm(encoder["sequence_output"], inputs["masked_lm_positions"]),
            "sequence_output": encoder["sequence_output"],
            "pooled_output": encoder["pooled_output"],
        }
        if with_next_sentence:
            self.next_sentence = OutputProjection(2, config.initializer_range, name="seq_relationship",
                                                  dtype=policy)
            outputs["next_sentence_logits"] = ops.cast(self.next_sentence(encoder["pooled_output"]), "float32")
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, **kwargs)
        self.with_next_sentence = with_next_sentence

@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What one task's model is (`REGISTRY`): how to make it, the heads a trained one holds (attributes, keys of
    `bert_tf.checkpoints.TASK_HEADS`), its outputs and those with a sequence axis (the second)."""
    make: typing.Callable  # make(config, num_labels, restored, **options) -> the Keras model (`restored`: see
    # BertModel)
    heads: tuple
    outputs: tuple
    sequence_outputs: tuple = ()
    labelled: bool = False  # whether it needs num_labels
    options: tuple = ()  # the keyword options `make` takes (e.g. the embedding's pooling)


# The task models by task name: the export (bert_tf.export.saved_model) and the tasks (bert_tf.tasks) read them here.
REGISTRY = {
    "encoder": TaskSpec(lambda config, _, restored: BertModel(config, restored=restored), (),
                        ("sequence_output", "pooled_output"), ("sequence_output",)),
    "classifier": TaskSpec(lambda config, labels, restored: BertClassifier(config, labels, restored_encoder=restored),
                           ("classifier",), ("logits", "probabilities"), labelled=True),
    "squad": TaskSpec(lambda config, _, restored: BertSpanLabeler(config, restored_encoder=restored), ("span",),
                      ("start_logits", "end_logits"), ("start_logits", "end_logits")),
    "ner": TaskSpec(lambda config, labels, restored: BertTokenClassifier(config, labels, restored_encoder=restored),
                    ("tagger",), ("logits", "probabilities"), ("logits", "probabilities"), labelled=True),
    "swag": TaskSpec(lambda config, _, restored: BertMultipleChoice(config, restored_encoder=restored), ("choice",),
                     ("logits", "probabilities")),
    "pretraining": TaskSpec(lambda config, _, restored: BertPretrainer(config, restored_encoder=restored),
                            ("masked_lm", "next_sentence"),
                            ("masked_lm_logits", "next_sentence_logits", "sequence_output", "pooled_output"),
                            ("sequence_output",)),
    "masked_lm": TaskSpec(
        lambda config, _, restored: BertPretrainer(config, with_next_sentence=False, restored_encoder=restored),
        ("masked_lm",), ("masked_lm_logits", "sequence_output", "pooled_output"), ("sequence_output",)),
    "embedding": TaskSpec(
        lambda config, _, restored, **options: BertSentenceEncoder(config, restored_encoder=restored, **options),
        (), ("embedding",), options=("pooling", "normalize")),
}


def build_task_model(task, config, num_labels=None, restored=False, **options):
    """The Keras model of `task` (a key of REGISTRY); `num_labels` for the labelled ones (classifier, ner);
    `restored`: the caller restores its encoder next (see BertModel); `options`: those of the task's spec (e.g.
    the embedding's pooling="cls"), None ones left at their defaults."""
    if task not in REGISTRY:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(REGISTRY)}.")
    spec = REGISTRY[task]
    if spec.labelled and (not num_labels or num_labels < 1):
        raise ValueError(f"The {task} task needs num_labels >= 1 (--num_labels or --label_list).")
    options = {name: value for name, value in options.items() if value is not None}
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise ValueError(f"The {task} task takes no option {', '.join(unknown)}"
                         f"{' (its options: ' + ', '.join(spec.options) + ')' if spec.options else ''}.")
    return spec.make(config, num_labels, restored, **options)
