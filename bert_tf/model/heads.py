"""Task heads on the BERT encoder: small Keras layers with the original scripts' weights and shapes, which
`bert_tf.model.task_models` puts on the encoder.

`output_weights` keep the original's [num_outputs, H] layout (a Keras Dense kernel's transpose): logits = x @
output_weights^T + output_bias.
"""
import tensorflow as tf
from keras import layers, ops

from bert_tf.model import activations
from bert_tf.model.encoder import SeededDropout, create_initializer, make_layer_norm, serializable


@serializable
class OutputProjection(layers.Layer):
    """x [..., H] -> logits [..., num_outputs], `output_weights` [num_outputs, H]."""

    def __init__(self, num_outputs, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.initializer_range = initializer_range

    def build(self, input_shape):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, input_shape[-1]),
            initializer=create_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,), initializer="zeros")

    def call(self, x):
        return ops.matmul(x, ops.transpose(self.output_weights)) + self.output_bias

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.num_outputs,)


def gather_indexes(sequence_tensor, positions):
    """sequence_tensor [B, S, H], positions [B, P] -> [B*P, H], the original's gather of rows."""
    batch, length, width = ops.shape(sequence_tensor)
    flat_positions = ops.cast(positions, "int32") + ops.arange(batch, dtype="int32")[:, None] * length
    return ops.take(ops.reshape(sequence_tensor, (-1, width)), ops.reshape(flat_positions, (-1,)), axis=0)


@serializable
class MaskedLMHead(layers.Layer):
    """The masked LM head: dense + hidden_act + LayerNorm, then logits against the tied word embeddings.

    sequence_output [B, S, H], masked_lm_positions [B, P] -> logits [B, P, V] (float32). `embedding_layer`: the
    encoder's BertEmbeddings, whose `word_embeddings` [V, H] the output shares.
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
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)

    def get_config(self):  # without `embedding_layer` (a layer): a config of its own
        return {**super().get_config(), "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range}

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        hidden_size = self.embedding_layer.hidden_size
        self.transform.build((None, hidden_size))
        self.layer_norm.build((None, hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.embedding_layer.vocab_size,), initializer="zeros")

    def call(self, sequence_output, masked_lm_positions):
        # On [B*P, H] as the original, with transpose_b: the tied table's gradient is one MatMul, no transpose of it.
        x = self.layer_norm(self.transform(gather_indexes(sequence_output, masked_lm_positions)))
        table = ops.cast(self.embedding_layer.word_embeddings, x.dtype)
        logits = ops.cast(tf.matmul(x, table, transpose_b=True), "float32") + ops.cast(self.output_bias, "float32")
        return ops.reshape(logits, (-1, ops.shape(masked_lm_positions)[1], self.embedding_layer.vocab_size))

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.embedding_layer.vocab_size,)


@serializable
class ClassifierHead(layers.Layer):
    """run_classifier.py's head: dropout, then `output_weights`/`output_bias`. [B, H] (or [B, S, H]) -> logits
    [B, num_labels] ([B, S, num_labels]), float32."""

    def __init__(self, num_labels, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)
        self.projection = OutputProjection(num_labels, initializer_range, name="projection",
                                           dtype=self.dtype_policy.name)

    def build(self, pooled_output_shape):
        self.projection.build(pooled_output_shape)

    def call(self, pooled_output, training=None):
        return ops.cast(self.projection(self.dropout(pooled_output, training=training)), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (*pooled_output_shape[:-1], self.num_labels)


@serializable
class SpanHead(layers.Layer):
    """run_squad.py's head: sequence_output [B, S, H] -> (start_logits [B, S], end_logits [B, S]), float32."""

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.projection = OutputProjection(2, initializer_range, name="projection",
                                           dtype=self.dtype_policy.name)

    def build(self, sequence_output_shape):
        self.projection.build(sequence_output_shape)

    def call(self, sequence_output):
        logits = ops.cast(self.projection(sequence_output), "float32")
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_output_shape):
        return tuple(sequence_output_shape[:2]), tuple(sequence_output_shape[:2])


@serializable
class FlattenChoices(layers.Layer):
    """[B, C, S] -> [B * C, S], with S known only when called."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


POOLINGS = ("mean", "cls")


@serializable
class SentencePooling(layers.Layer):
    """A sentence embedding as sentence-transformers computes it, in float32: `pooling` "mean" (over tokens with
    input_mask 1) or "cls"; `normalize_embeddings`: divided by its L2 norm. No weights. sequence_output [B, S, H],
    input_mask [B, S] -> embedding [B, H]."""

    def __init__(self, pooling="mean", normalize_embeddings=True, **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}.")
        self.pooling, self.normalize_embeddings = pooling, normalize_embeddings

    def call(self, sequence_output, input_mask):
        x = ops.cast(sequence_output, "float32")
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:
            mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)
            pooled = ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1e-9)
        if self.normalize_embeddings:
            pooled = pooled / ops.maximum(ops.sqrt(ops.sum(pooled * pooled, axis=-1, keepdims=True)), 1e-12)
        return pooled

    def compute_output_shape(self, sequence_output_shape, input_mask_shape):
        return (sequence_output_shape[0], sequence_output_shape[-1])
