"""Task models: the shared `BertModel` encoder (`.bert`) plus named heads, one thin Keras model per task, and what
each task's model is (`TaskSpec`, by task name in `REGISTRY`; its heads' original variable names in `HEADS`).

| task model          | heads (attributes)                     | tasks (REGISTRY)       | script              |
|---------------------|----------------------------------------|------------------------|---------------------|
| BertModel           | none                                   | encoder                | (the encoder alone) |
| BertPretrainer      | `.masked_lm`, `.next_sentence`         | pretraining, masked_lm | run_pretraining.py  |
| BertClassifier      | `.classifier`                          | classifier, regression | run_classifier.py   |
| BertSpanLabeler     | `.span`                                | squad                  | run_squad.py        |
| BertTokenClassifier | `.tagger` (new)                        | ner                    | run_ner.py          |
| BertMultipleChoice  | `.choice` (new)                        | swag                   | run_swag.py         |
| BertSentenceEncoder | none (`.sentence_pooling`, no weights) | embedding              | sentence embeddings |

The tasks (bert_tf.tasks) build their models through their spec, `bert_tf.checkpoints` maps heads to original
variable names by `HEADS`, and the export (bert_tf.export) reads inputs, outputs and labels from the spec.
"""
import dataclasses

import keras
from keras import ops

from bert_tf.model import heads
from bert_tf.model.encoder import BertModel, serializable
from bert_tf.model.heads import ClassifierHead, FlattenChoices, MaskedLMHead, OutputProjection, SpanHead


class TaskModel(keras.Model):
    """A functional task model on a shared `BertModel` (`.bert`); a subclass calls `init_task` first, then adds its
    heads (each an attribute, named with its variables' original names by a `Head` of its `TaskSpec`) and outputs.

    Serializes as its BertConfig plus the task's own keyword arguments (`task_kwargs`).
    """
    task_kwargs = ()

    def __init__(self, inputs, outputs, dtype, **kwargs):
        """The functional model inputs -> outputs under the encoder's dtype policy `dtype`, which the functional
        constructor would ignore (keeping the global policy)."""
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = dtype

    def init_task(self, config, kwargs):
        """Pops the encoder, dtype and restored_encoder (BertModel's `restored`: the caller restores the encoder
        next, so its random initial values are not computed) from kwargs; returns (bert, policy, encoder input
        dict: `ENCODER_INPUTS`)."""
        restored = kwargs.pop("restored_encoder", False)
        bert = kwargs.pop("bert", None) or BertModel(config, restored=restored, dtype=kwargs.pop("dtype", None))
        self.bert = bert
        inputs = {i.name: keras.Input(shape=i.shape[1:], dtype=i.dtype, name=i.name) for i in ENCODER_INPUTS}
        return bert, bert.dtype_policy, inputs

    def get_config(self):
        return {"config": self.bert.config.to_dict(), "name": self.name,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                **{key: getattr(self, key) for key in self.task_kwargs}}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@serializable
class BertClassifier(TaskModel):
    """run_classifier.py's model: [CLS] pooled output -> dropout -> `output_weights`/`output_bias`.

    Inputs: input_ids, input_mask, segment_ids [B, S] int32. Outputs (float32): logits [B, L] and
    probabilities [B, L] (softmax), or with `regression=True` (STS-B) logits [B, 1] and predictions [B].
    """
    task_kwargs = ("num_labels", "regression")

    def __init__(self, config, num_labels, regression=False, **kwargs):
        if regression and num_labels != 1:
            raise ValueError(f"A regression task has one output, got num_labels={num_labels}.")
        kwargs.setdefault("name", "bert_classifier")
        bert, policy, inputs = self.init_task(config, kwargs)
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
        bert, policy, inputs = self.init_task(config, kwargs)
        self.span = SpanHead(bert.config.initializer_range, name="span", dtype=policy)
        start_logits, end_logits = self.span(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         dtype=policy, **kwargs)


@serializable
class BertTokenClassifier(TaskModel):
    """A tagging model (NER): dropout + `cls/ner/output_weights` on every token -> logits [B, S, L] (float32)."""
    task_kwargs = ("num_labels",)

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
    """The paper's SWAG setup: each choice packed as a pair, one score from its [CLS] vector, softmax over choices.

    Inputs: input_ids, input_mask, segment_ids [B, C, S] int32. Outputs: logits, probabilities [B, C] (float32).
    Head variables: `cls/swag/output_weights` [1, H], `cls/swag/output_bias` [1].
    """
    task_kwargs = ("num_choices",)

    def __init__(self, config, num_choices=4, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        bert, policy, _ = self.init_task(config, kwargs)
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
    task_kwargs = ("pooling", "normalize")

    def __init__(self, config, pooling="mean", normalize=True, **kwargs):
        kwargs.setdefault("name", "bert_sentence_encoder")
        bert, policy, inputs = self.init_task(config, kwargs)
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
    task_kwargs = ("with_next_sentence",)

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


# --- what each task model is ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Head:
    """A head of a task model: its attribute on the model and its variables' original (TF1) names, as rows
    (original name, attribute path inside the head). `bert_tf.checkpoints` maps a model's variables by them."""
    attribute: str
    variables: tuple

    def __post_init__(self):
        if not (self.variables and all(isinstance(row, tuple) and len(row) == 2
                                       and all(isinstance(part, str) and part for part in row)
                                       for row in self.variables)):
            raise ValueError(f"Head .{self.attribute} needs its variables as (original name, attribute path) rows, "
                             f"got {self.variables!r}.")


def _projection(attribute, scope=""):
    """A head whose variables are a `ClassifierHead`'s or `SpanHead`'s projection: `<scope>output_weights` [K, H]
    and `<scope>output_bias` [K]."""
    return Head(attribute, tuple((f"{scope}output_{part}", f"projection.output_{part}")
                                 for part in ("weights", "bias")))


# The heads of the task models by attribute; heads the original never had (tagger, choice) under names in its style.
HEADS = {head.attribute: head for head in (
    Head("masked_lm", (("cls/predictions/transform/dense/kernel", "transform.kernel"),
                       ("cls/predictions/transform/dense/bias", "transform.bias"),
                       ("cls/predictions/transform/LayerNorm/gamma", "layer_norm.gamma"),
                       ("cls/predictions/transform/LayerNorm/beta", "layer_norm.beta"),
                       ("cls/predictions/output_bias", "output_bias"))),
    Head("next_sentence", (("cls/seq_relationship/output_weights", "output_weights"),
                           ("cls/seq_relationship/output_bias", "output_bias"))),
    _projection("classifier"),
    _projection("span", "cls/squad/"),
    _projection("tagger", "cls/ner/"),
    _projection("choice", "cls/swag/"),
)}


@dataclasses.dataclass(frozen=True)
class Input:
    """An input of a task model: its name, its axes (each "B" batch, "S" sequence or "P" masked positions, of any
    size, or an int: a fixed size, SWAG's choices) and its dtype."""
    name: str
    axes: tuple
    dtype: str = "int32"

    @property
    def shape(self):
        """The shape, None for each axis of any size (a tf.TensorSpec's or keras.Input's, batch included)."""
        return tuple(axis if isinstance(axis, int) else None for axis in self.axes)


ENCODER_INPUTS = tuple(Input(name, ("B", "S")) for name in ("input_ids", "input_mask", "segment_ids"))
PRETRAINING_INPUTS = (*ENCODER_INPUTS, Input("masked_lm_positions", ("B", "P")))
NUM_CHOICES = 4  # SWAG's endings per example


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What one task's model is: the one place the tasks (bert_tf.tasks), the checkpoints, the export and the
    tests read it.

    name: the task's name (`REGISTRY` key, the export's --task). model: its Keras class, built as
    `model(config, **kwargs, num_labels=... (labelled), restored_encoder=..., **options)` (BertModel:
    `restored=...`). heads: its `Head`s (attribute and original variable names). inputs: its `Input`s, by name.
    outputs: its outputs, those in `sequence_outputs` with the text's sequence axis second. label_output: where
    the head has labels (the model takes num_labels), the export's output of the predicted label names:
    `predicted_label` [B] or `predicted_labels` [B, S]. keeps_max_seq_length: its outputs are read at every
    position (SQuAD's n-best lists pick from padding too), so its export packs text to max_seq_length unless told
    to cut. options: keyword options of `model` a caller may give (the embedding's pooling). huggingface: the
    transformers class of its model (its config.json's `architectures`), where a Hugging Face BERT has one
    (`bert_tf.checkpoints.huggingface` writes and reads its heads by it). keras_hub: the KerasHub class of the same
    model (`keras_hub.models.<name>`), for the tasks a KerasHub preset holds (`bert_tf.checkpoints.keras_hub`).
    """
    name: str
    model: type
    heads: tuple = ()
    inputs: tuple = ENCODER_INPUTS
    outputs: tuple = ()
    sequence_outputs: tuple = ()
    label_output: str | None = None
    keeps_max_seq_length: bool = False
    kwargs: dict = dataclasses.field(default_factory=dict)
    options: tuple = ()
    huggingface: str | None = None
    keras_hub: str | None = None

    def __post_init__(self):
        for head in self.heads:
            if not isinstance(head, Head):
                raise ValueError(f"The {self.name} task's head {head!r} has no variable names: give a "
                                 f"task_models.Head(attribute, ((original name, attribute path), ...)).")
        if not set(self.sequence_outputs) <= set(self.outputs):
            raise ValueError(f"The {self.name} task's sequence outputs {self.sequence_outputs} are not among its "
                             f"outputs {self.outputs}.")

    @property
    def head_names(self):
        """The attributes of its heads (what a checkpoint must hold to predict)."""
        return tuple(head.attribute for head in self.heads)

    @property
    def labelled(self):
        """Whether its head has labels (needs num_labels)."""
        return self.label_output is not None

    @property
    def text(self):
        """Whether text applies (the export's text signatures): its inputs are the encoder's, which text packs to."""
        return self.inputs == ENCODER_INPUTS

    def describes(self, model):
        """Whether `model` is this task's model (its class, and its fixed keyword arguments, e.g. regression)."""
        return isinstance(model, self.model) and all(getattr(model, key, None) == value
                                                     for key, value in self.kwargs.items())

    def build(self, config, num_labels=None, restored=False, **options):
        """The Keras model for BertConfig `config`: `num_labels` for a labelled task; `restored`: the caller
        restores its encoder next (see BertModel); `options`: some of `self.options`, None ones left at their
        defaults. Raises ValueError for a missing num_labels, an unknown option, or a model that disagrees with
        this spec (inputs, or a variable outside its encoder and heads)."""
        if self.labelled and (not num_labels or num_labels < 1):
            raise ValueError(f"The {self.name} task needs num_labels >= 1 (--num_labels or --label_list).")
        options = {name: value for name, value in options.items() if value is not None}
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"The {self.name} task takes no option {', '.join(unknown)}"
                             f"{' (its options: ' + ', '.join(self.options) + ')' if self.options else ''}.")
        labels = {"num_labels": num_labels} if self.labelled else {}
        restored_kw = "restored_encoder" if issubclass(self.model, TaskModel) else "restored"
        model = self.model(config, **self.kwargs, **labels, **{restored_kw: restored}, **options)
        self._check(model)
        return model

    def _check(self, model):
        """Raises ValueError if the built `model`'s inputs are not `inputs`, or it holds a variable outside its
        encoder and heads (a head that has no original names: a checkpoint would leave it random)."""
        built = {name: (tuple(x.shape), x.dtype) for name, x in model.input.items()}
        if built != {i.name: (i.shape, i.dtype) for i in self.inputs}:
            raise ValueError(f"The {self.name} model's inputs {built} are not its spec's {self.inputs}.")
        parts = [encoder_of(model), *(getattr(model, head) for head in self.head_names)]
        owned = {id(weight) for part in parts for weight in part.weights}
        stray = [weight.path for weight in model.weights if id(weight) not in owned]
        if stray:
            raise ValueError(f"The {self.name} model has variables outside its encoder and its heads "
                             f"{self.head_names}: {stray}; each head of a task model needs a task_models.Head.")


REGISTRY = {}  # task name -> TaskSpec (`register`)


def encoder_of(model):
    """The encoder (BertModel) of a task model: its `.bert`, or the model itself (the encoder task's)."""
    return model if isinstance(model, BertModel) else model.bert


def register(spec):
    """Adds `spec` to REGISTRY and its heads to HEADS (where the checkpoints find them); returns it. A task of its
    own module registers its spec so (README, "Add a task"). ValueError for a name taken, or a head attribute
    known with other variables."""
    if spec.name in REGISTRY:
        raise ValueError(f"A task named {spec.name!r} is registered already.")
    for head in spec.heads:
        if HEADS.setdefault(head.attribute, head) != head:
            raise ValueError(f"The {spec.name} task's head .{head.attribute} has other variables than the "
                             f"registered one: {HEADS[head.attribute].variables}.")
    REGISTRY[spec.name] = spec
    return spec


register(TaskSpec("encoder", BertModel, outputs=("sequence_output", "pooled_output"),
                  sequence_outputs=("sequence_output",), huggingface="BertModel", keras_hub="BertBackbone"))
register(TaskSpec("classifier", BertClassifier, (HEADS["classifier"],), outputs=("logits", "probabilities"),
                  label_output="predicted_label", kwargs={"regression": False},
                  huggingface="BertForSequenceClassification", keras_hub="BertTextClassifier"))
register(TaskSpec("regression", BertClassifier, (HEADS["classifier"],), outputs=("logits", "predictions"),
                  kwargs={"num_labels": 1, "regression": True}, huggingface="BertForSequenceClassification",
                  keras_hub="BertTextClassifier"))
register(TaskSpec("squad", BertSpanLabeler, (HEADS["span"],), outputs=("start_logits", "end_logits"),
                  sequence_outputs=("start_logits", "end_logits"), keeps_max_seq_length=True,
                  huggingface="BertForQuestionAnswering"))
register(TaskSpec("ner", BertTokenClassifier, (HEADS["tagger"],), outputs=("logits", "probabilities"),
                  sequence_outputs=("logits", "probabilities"), label_output="predicted_labels",
                  huggingface="BertForTokenClassification"))
register(TaskSpec("swag", BertMultipleChoice, (HEADS["choice"],),
                  tuple(Input(i.name, ("B", NUM_CHOICES, "S")) for i in ENCODER_INPUTS), ("logits", "probabilities"),
                  kwargs={"num_choices": NUM_CHOICES}, huggingface="BertForMultipleChoice"))
register(TaskSpec("pretraining", BertPretrainer, (HEADS["masked_lm"], HEADS["next_sentence"]), PRETRAINING_INPUTS,
                  ("masked_lm_logits", "next_sentence_logits", "sequence_output", "pooled_output"),
                  ("sequence_output",), kwargs={"with_next_sentence": True}, huggingface="BertForPreTraining"))
register(TaskSpec("masked_lm", BertPretrainer, (HEADS["masked_lm"],), PRETRAINING_INPUTS,
                  ("masked_lm_logits", "sequence_output", "pooled_output"), ("sequence_output",),
                  kwargs={"with_next_sentence": False}, huggingface="BertForMaskedLM"))
register(TaskSpec("embedding", BertSentenceEncoder, outputs=("embedding",), options=("pooling", "normalize")))


def build_task_model(task, config, num_labels=None, restored=False, **options):
    """The Keras model of `task` (a key of REGISTRY): `REGISTRY[task].build(...)` (see TaskSpec.build)."""
    if task not in REGISTRY:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(REGISTRY)}.")
    return REGISTRY[task].build(config, num_labels, restored, **options)
