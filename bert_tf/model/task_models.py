"""Task models: the shared `BertModel` encoder (`.bert`) plus named heads, one thin Keras model per
task, and what the Keras model cannot say itself (`TaskSpec`, by task name in `REGISTRY`: the
built-in tasks are registered below their models). A task model names its heads' original variables
in `heads` (what `bert_tf.checkpoints` maps) and has no other variable.

Shapes: B batch, S sequence, H hidden, L labels, C choices, P masked positions, V vocabulary.
"""
import dataclasses

import keras
from keras import ops

from bert_tf.model.encoder import BertModel, serializable
from bert_tf.model.heads import (
    ClassifierHead,
    FlattenChoices,
    MaskedLMHead,
    OutputProjection,
    SentencePooling,
    SpanHead,
)
from bert_tf.text.packing import INPUT_NAMES

NUM_CHOICES = 4  # SWAG's endings per example
DEFAULT_THRESHOLD = 0.5  # a multi-label classifier's decision threshold of each label, unless tuned


def _projection(scope=""):
    """A projection head's variable rows: `<scope>output_weights` [K, H], `<scope>output_bias` [K]."""
    return tuple((f"{scope}output_{part}", f"projection.output_{part}") for part in ("weights", "bias"))


class TaskModel(keras.Model):
    """A functional task model on a shared `BertModel` (`.bert`); a subclass calls `init_task`, then adds its heads and
    outputs. Serializes as its BertConfig plus `task_kwargs`.

    `heads`: head attribute -> rows (original variable name, attribute path inside the head).
    """
    task_kwargs = ()
    heads = {}

    def __init__(self, inputs, outputs, dtype, **kwargs):
        """The functional model under the encoder's dtype policy `dtype`. ValueError for a variable outside the encoder
        and `heads` (a checkpoint would leave it random)."""
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = dtype
        parts = [self.bert, *(getattr(self, head) for head in self.heads if hasattr(self, head))]
        owned = {id(weight) for part in parts for weight in part.weights}
        stray = [weight.path for weight in self.weights if id(weight) not in owned]
        if stray:
            raise ValueError(f"{type(self).__name__} has variables outside its encoder and its heads "
                             f"{tuple(self.heads)}: {stray}; name each head's original variables in its `heads`.")

    def init_task(self, config, kwargs):
        """Pops the encoder, dtype and `restored` from kwargs; returns (bert, policy name, inputs)."""
        restored = kwargs.pop("restored", False)
        bert = kwargs.pop("bert", None) or BertModel(config, restored=restored, dtype=kwargs.pop("dtype", None))
        self.bert = bert
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        return bert, bert.dtype_policy.name, inputs

    def get_config(self):
        return {"config": self.bert.config.to_dict(), "name": self.name,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                **{key: getattr(self, key) for key in self.task_kwargs}}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@serializable
class BertClassifier(TaskModel):
    """run_classifier.py's model: pooled output -> dropout -> `output_weights`/`output_bias`.

    Outputs (float32): logits, probabilities [B, L]; `regression`: logits [B, 1], predictions [B]; `multi_label`:
    sigmoid probabilities, a label predicted where its probability >= its threshold.
    """
    task_kwargs = ("num_labels", "regression", "multi_label", "thresholds")
    heads = {"classifier": _projection()}

    def __init__(self, config, num_labels, regression=False, multi_label=False, thresholds=None, **kwargs):
        if regression and num_labels != 1:
            raise ValueError(f"A regression task has one output, got num_labels={num_labels}.")
        if regression and multi_label:
            raise ValueError("A regression task is not multi-label.")
        kwargs.setdefault("name", "bert_classifier")
        bert, policy, inputs = self.init_task(config, kwargs)
        self.classifier = ClassifierHead(num_labels, bert.config.hidden_dropout_prob,
                                         bert.config.initializer_range, name="classifier", dtype=policy)
        logits = self.classifier(bert(inputs)["pooled_output"])
        outputs = {"logits": logits}
        if regression:
            outputs["predictions"] = ops.squeeze(logits, -1)
        else:
            outputs["probabilities"] = ops.sigmoid(logits) if multi_label else ops.softmax(logits, axis=-1)
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, **kwargs)
        self.num_labels, self.regression, self.multi_label = num_labels, regression, multi_label
        self.thresholds = thresholds

    @property
    def thresholds(self):
        """A multi-label model's decision thresholds, one per label (None otherwise)."""
        return self._thresholds

    @thresholds.setter
    def thresholds(self, values):
        """Sets them (None: DEFAULT_THRESHOLD each); ValueError unless there is one in [0, 1] per label."""
        if not self.multi_label:
            if values is not None:
                raise ValueError("thresholds apply to a multi-label classifier (multi_label=True).")
            self._thresholds = None
            return
        values = (DEFAULT_THRESHOLD,) * self.num_labels if values is None else tuple(float(t) for t in values)
        if len(values) != self.num_labels or not all(0.0 <= t <= 1.0 for t in values):
            raise ValueError(f"A multi-label classifier needs one threshold in [0, 1] per label ({self.num_labels}), "
                             f"got {list(values)}.")
        self._thresholds = values


@serializable
class BertSpanLabeler(TaskModel):
    """run_squad.py's model: sequence_output -> `cls/squad/output_weights` -> start_logits, end_logits [B, S]."""
    heads = {"span": _projection("cls/squad/")}

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_span_labeler")
        bert, policy, inputs = self.init_task(config, kwargs)
        self.span = SpanHead(bert.config.initializer_range, name="span", dtype=policy)
        start_logits, end_logits = self.span(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         dtype=policy, **kwargs)


@serializable
class BertTokenClassifier(TaskModel):
    """A tagging model (NER): dropout + `cls/ner/output_weights` per token -> logits [B, S, L]."""
    task_kwargs = ("num_labels",)
    heads = {"tagger": _projection("cls/ner/")}

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_token_classifier")
        bert, policy, inputs = self.init_task(config, kwargs)
        self.tagger = ClassifierHead(num_labels, bert.config.hidden_dropout_prob, bert.config.initializer_range,
                                     name="tagger", dtype=policy)
        logits = self.tagger(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"logits": logits,
                                                 "probabilities": ops.softmax(logits, axis=-1)},
                         dtype=policy, **kwargs)
        self.num_labels = num_labels


@serializable
class BertMultipleChoice(TaskModel):
    """The paper's SWAG setup: each choice packed as a pair, scored from its [CLS] vector.

    Inputs [B, C, S] int32. Outputs: logits, probabilities [B, C] (float32).
    """
    task_kwargs = ("num_choices",)
    heads = {"choice": _projection("cls/swag/")}

    def __init__(self, config, num_choices=NUM_CHOICES, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        bert, policy, _ = self.init_task(config, kwargs)
        inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
                  for name in INPUT_NAMES}
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
    """Sentence embeddings: the last layer pooled by `heads.SentencePooling` -> embedding [B, H] float32 (mean of real
    tokens or [CLS], L2-normalized when `normalize_embeddings`). No weights of its own."""
    task_kwargs = ("pooling", "normalize_embeddings")

    def __init__(self, config, pooling="mean", normalize_embeddings=True, **kwargs):
        kwargs.setdefault("name", "bert_sentence_encoder")
        bert, policy, inputs = self.init_task(config, kwargs)
        self.sentence_pooling = SentencePooling(pooling, normalize_embeddings, name="pooling")
        embedding = self.sentence_pooling(bert(inputs)["sequence_output"], inputs["input_mask"])
        super().__init__(inputs=inputs, outputs={"embedding": embedding}, dtype=policy, **kwargs)
        self.pooling, self.normalize_embeddings = pooling, normalize_embeddings


@serializable
class BertPretrainer(TaskModel):
    """The original run_pretraining.py model: BERT with the pretraining heads.

    Inputs add masked_lm_positions [B, P]. Outputs: masked_lm_logits [B, P, V], next_sentence_logits [B, 2] (float32),
    sequence_output, pooled_output. `with_next_sentence=False` ("No NSP"): no `.next_sentence` head.
    """
    task_kwargs = ("with_next_sentence",)
    heads = {"masked_lm": (("cls/predictions/transform/dense/kernel", "transform.kernel"),
                           ("cls/predictions/transform/dense/bias", "transform.bias"),
                           ("cls/predictions/transform/LayerNorm/gamma", "layer_norm.gamma"),
                           ("cls/predictions/transform/LayerNorm/beta", "layer_norm.beta"),
                           ("cls/predictions/output_bias", "output_bias")),
             "next_sentence": (("cls/seq_relationship/output_weights", "output_weights"),
                               ("cls/seq_relationship/output_bias", "output_bias"))}

    def __init__(self, config, with_next_sentence=True, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        bert, policy, inputs = self.init_task(config, kwargs)
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
    """What one task's model is beyond the Keras model, read by the tasks, the checkpoints and the export. `model` is
    built as `model(config, **kwargs, num_labels=..., restored=..., **options)`."""
    name: str  # the `REGISTRY` key, the export's --task
    model: type
    heads: tuple | None = None  # the head attributes its model has (None: every one of its class's `heads`)
    label_output: str | None = None  # labelled: the export's prediction: label names [B] or [B, S], or 0/1 [B, L]
    keeps_max_seq_length: bool = False  # outputs read at every position (SQuAD's n-best): its export packs text to S
    kwargs: dict = dataclasses.field(default_factory=dict)  # fixed keyword arguments of `model`
    options: tuple = ()  # keyword options of `model` a caller may give (the embedding's pooling)

    @property
    def head_names(self):
        """The attributes of its model's heads (what a checkpoint must hold to predict)."""
        return tuple(getattr(self.model, "heads", ())) if self.heads is None else self.heads

    @property
    def labelled(self):
        """Whether its head has labels (needs num_labels)."""
        return self.label_output is not None

    def describes(self, model):
        """Whether `model` is this task's model (its class and fixed keyword arguments)."""
        return isinstance(model, self.model) and all(getattr(model, key, None) == value
                                                     for key, value in self.kwargs.items())

    def build(self, config, num_labels=None, restored=False, **options):
        """The Keras model for `config`; `restored`: the caller restores it next; `options`: None ones left at their
        defaults. ValueError for a missing num_labels or an unknown option."""
        if self.labelled and (not num_labels or num_labels < 1):
            raise ValueError(f"The {self.name} task needs num_labels >= 1 (--num_labels or --label_list).")
        options = {name: value for name, value in options.items() if value is not None}
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"The {self.name} task takes no option {', '.join(unknown)}"
                             f"{' (its options: ' + ', '.join(self.options) + ')' if self.options else ''}.")
        labels = {"num_labels": num_labels} if self.labelled else {}
        return self.model(config, **self.kwargs, **labels, restored=restored, **options)


REGISTRY = {}  # task name -> TaskSpec (`register`)


def register(spec):
    """Adds `spec` to REGISTRY (README, "Add a task") and returns it; ValueError for a name taken."""
    if spec.name in REGISTRY:
        raise ValueError(f"A task named {spec.name!r} is registered already.")
    REGISTRY[spec.name] = spec
    return spec


register(TaskSpec("encoder", BertModel))
register(TaskSpec("classifier", BertClassifier, label_output="predicted_label",
                  kwargs={"regression": False, "multi_label": False}))
register(TaskSpec("regression", BertClassifier, kwargs={"num_labels": 1, "regression": True}))
register(TaskSpec("multi_label", BertClassifier, label_output="predicted_labels",
                  kwargs={"regression": False, "multi_label": True}, options=("thresholds",)))
register(TaskSpec("squad", BertSpanLabeler, keeps_max_seq_length=True))
register(TaskSpec("ner", BertTokenClassifier, label_output="predicted_labels"))
register(TaskSpec("swag", BertMultipleChoice))
register(TaskSpec("pretraining", BertPretrainer, kwargs={"with_next_sentence": True}))
register(TaskSpec("masked_lm", BertPretrainer, ("masked_lm",), kwargs={"with_next_sentence": False}))
register(TaskSpec("embedding", BertSentenceEncoder, options=("pooling", "normalize_embeddings")))
# The heads of the built-in task models (those `bert_tf.checkpoints.restore.checkpoint_heads` looks for).
BUILT_IN_HEADS = {**BertPretrainer.heads, **BertClassifier.heads, **BertSpanLabeler.heads,
                  **BertTokenClassifier.heads, **BertMultipleChoice.heads}


def build_task_model(task, config, num_labels=None, restored=False, **options):
    if task not in REGISTRY:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(REGISTRY)}.")
    return REGISTRY[task].build(config, num_labels, restored, **options)


METADATA_FILE = "model_metadata.json"  # `metadata` of what a training run trained, in its output_dir


def metadata(task, model, labels, do_lower_case, max_seq_length):
    """What a reader needs to rebuild `model` (None: no weights) and feed it text: task, casing, max_seq_length, labels,
    bert_config and options. Written to an export's assets.extra/export_metadata.json and a run's output_dir
    (METADATA_FILE, by bert_tf.tasks.run_record.record_model); read by bert_tf.load."""
    meta = {"task": task, "do_lower_case": bool(do_lower_case), "max_seq_length": int(max_seq_length),
            "labels": labels}
    if model is not None:
        meta.update(bert_config=encoder_of(model).config.to_dict(),
                    **{name: getattr(model, name) for name in REGISTRY[task].options})
    return meta


def encoder_of(model):
    """The encoder (BertModel) of a task model: its `.bert`, or the model itself (the encoder task's)."""
    return model if isinstance(model, BertModel) else model.bert


def output_names(model):
    """The names of a task model's outputs (what its export serves); the encoder's are sequence_output and
    pooled_output."""
    return ("sequence_output", "pooled_output") if isinstance(model, BertModel) else tuple(model.output)


def sequence_outputs(model):
    """The names of `model`'s outputs whose axis 1 is the sequence (squad's logits [B, S], not masked_lm_logits
    [B, P, V])."""
    short = model.compute_output_spec({
        name: keras.KerasTensor((*x.shape[:-1], 1) if name in INPUT_NAMES else x.shape, x.dtype)
        for name, x in model.input.items()})
    return tuple(name for name in output_names(model)
                 if len(short[name].shape) > 1 and model.output[name].shape[1] is None and short[name].shape[1] == 1)


def takes_text(model):
    """Whether text packs to `model`'s inputs: the encoder's three, [B, S] each."""
    return {name: len(x.shape) for name, x in model.input.items()} == dict.fromkeys(INPUT_NAMES, 2)
