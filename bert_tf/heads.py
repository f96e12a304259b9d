"""Task heads on the BERT encoder, with the original scripts' weights and shapes.

| layer             | original variables                                              | input -> output                   |
|-------------------|-----------------------------------------------------------------|-----------------------------------|
| MaskedLMHead      | cls/predictions/transform/{dense,LayerNorm}, cls/predictions/output_bias | [B,S,H], positions [B,P] -> [B,P,V] |
| NextSentenceHead  | cls/seq_relationship/output_weights [2,H], output_bias [2]      | pooled [B,H] -> [B,2]             |
| ClassifierHead    | output_weights [L,H], output_bias [L] (run_classifier.py)       | pooled [B,H] -> [B,L]             |
| SpanHead          | cls/squad/output_weights [2,H], output_bias [2] (run_squad.py)  | [B,S,H] -> start, end [B,S]       |

Task models (a `.bert` BertModel plus named heads, the convention `bert_tf.checkpoints` maps by name):
BertPretrainer (`.masked_lm`, `.next_sentence`), BertClassifier (`.classifier`), BertSpanLabeler (`.span`),
BertTokenClassifier (`.tagger`: `cls/ner/output_weights` [L,H], new) and BertMultipleChoice
(`.choice`: `cls/swag/output_weights` [1,H], new).

The `output_weights` of the original are stored [num_outputs, H] (transposed relative to a Keras Dense kernel), so
these heads keep that layout: logits = x @ output_weights^T + output_bias.
"""
import keras
from keras import layers, ops

from bert_tf import activations
from bert_tf.modeling import BertModel, _layer_norm, _serializable, create_initializer


@_serializable
class OutputProjection(layers.Layer):
    """x [..., H] -> logits [..., num_outputs] with the original's `output_weights` [num_outputs, H] layout."""

    def __init__(self, num_outputs, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.initializer_range = initializer_range

    def build(self, input_shape):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, input_shape[-1]),
            initializer=create_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,), initializer="zeros")
        self.built = True

    def call(self, x):
        return ops.matmul(x, ops.transpose(self.output_weights)) + self.output_bias

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.num_outputs,)

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "initializer_range": self.initializer_range}


def gather_indexes(sequence_tensor, positions):
    """sequence_tensor [B, S, H], positions [B, P] int -> the vectors at those positions [B, P, H]."""
    return ops.take_along_axis(sequence_tensor, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)


@_serializable
class MaskedLMHead(layers.Layer):
    """The masked LM head: dense + hidden_act + LayerNorm, then logits against the tied word embeddings.

    Call: sequence_output [B, S, H], masked_lm_positions [B, P] -> logits [B, P, V] (float32).
    `embedding_layer` is the encoder's BertEmbeddings whose `word_embeddings` [V, H] the output shares.
    """

    def __init__(self, embedding_layer, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.embedding_layer = embedding_layer
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        hidden_size = embedding_layer.hidden_size
        self.transform = layers.Dense(hidden_size, activation=activations.get(hidden_act), name="dense",
                                      kernel_initializer=create_initializer(initializer_range),
                                      dtype=self.dtype_policy)
        self.layer_norm = _layer_norm("LayerNorm", self.dtype_policy)

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        hidden_size = self.embedding_layer.hidden_size
        self.transform.build((None, hidden_size))
        self.layer_norm.build((None, hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.embedding_layer.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = self.layer_norm(self.transform(gather_indexes(sequence_output, masked_lm_positions)))
        table = ops.cast(self.embedding_layer.word_embeddings, x.dtype)
        logits = ops.einsum("bph,vh->bpv", x, table)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.embedding_layer.vocab_size,)

    def get_config(self):
        # The tied embedding layer is not serialized: BertPretrainer rebuilds the tie.
        config = {**super().get_config(), "hidden_act": self.hidden_act,
                  "initializer_range": self.initializer_range}
        return config


@_serializable
class ClassifierHead(layers.Layer):
    """run_classifier.py's head: dropout on pooled_output, then `output_weights`/`output_bias`.

    Call: pooled_output [B, H] -> logits [B, num_labels] (float32).
    """

    def __init__(self, num_labels, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.projection = OutputProjection(num_labels, initializer_range, name="projection",
                                           dtype=self.dtype_policy)

    def build(self, pooled_output_shape):
        self.projection.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        return ops.cast(self.projection(self.dropout(pooled_output, training=training)), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], self.num_labels)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels, "dropout_rate": self.dropout_rate,
                "initializer_range": self.initializer_range}


@_serializable
class SpanHead(layers.Layer):
    """run_squad.py's head: sequence_output [B, S, H] -> (start_logits [B, S], end_logits [B, S]), float32."""

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.projection = OutputProjection(2, initializer_range, name="projection", dtype=self.dtype_policy)

    def build(self, sequence_output_shape):
        self.projection.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output):
        logits = ops.cast(self.projection(sequence_output), "float32")
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_output_shape):
        return tuple(sequence_output_shape[:2]), tuple(sequence_output_shape[:2])

    def get_config(self):
        return {**super().get_config(), "initializer_range": self.initializer_range}


@_serializable
class FlattenChoices(layers.Layer):
    """[B, C, S] -> [B * C, S], with S known only when called."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


class _TaskModel(keras.Model):
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
        """Pops the encoder and dtype from kwargs; returns (bert, policy, encoder input dict)."""
        bert = kwargs.pop("bert", None) or BertModel(config, dtype=kwargs.pop("dtype", None))
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


@_serializable
class BertClassifier(_TaskModel):
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


@_serializable
class BertSpanLabeler(_TaskModel):
    """run_squad.py's model: sequence_output -> `cls/squad/output_weights` -> start_logits, end_logits [B, S]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_span_labeler")
        bert, policy, inputs = self._init_task(config, kwargs)
        self.span = SpanHead(bert.config.initializer_range, name="span", dtype=policy)
        start_logits, end_logits = self.span(bert(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         dtype=policy, **kwargs)


@_serializable
class BertTokenClassifier(_TaskModel):
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


@_serializable
class BertMultipleChoice(_TaskModel):
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


@_serializable
class BertPretrainer(_TaskModel):
    """BERT with the pretraining heads (the original run_pretraining.py model).

    Inputs (dict): input_ids, input_mask, segment_ids [B, S] int32, masked_lm_positions [B, P] int32.
    Outputs (dict): masked_lm_logits [B, P, V], next_sentence_logits [B, 2] (float32), plus the encoder's outputs.
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        bert, policy, inputs = self._init_task(config, kwargs)
        config = bert.config
        self.masked_lm = MaskedLMHead(bert.embeddings, config.hidden_act, config.initializer_range,
                                      name="predictions", dtype=policy)
        self.next_sentence = OutputProjection(2, config.initializer_range, name="seq_relationship", dtype=policy)
        encoder = bert(inputs)
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        outputs = {
            "masked_lm_logits": self.masked_lm(encoder["sequence_output"], inputs["masked_lm_positions"]),
            "next_sentence_logits": ops.cast(self.next_sentence(encoder["pooled_output"]), "float32"),
            "sequence_output": encoder["sequence_output"],
            "pooled_output": encoder["pooled_output"],
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, **kwargs)
