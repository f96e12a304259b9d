"""The BERT encoder as Keras 3 layers, mirroring the original `modeling.py`: its variables, names and arithmetic.

Shapes: B = batch size, S = sequence length, H = hidden_size, N = num_attention_heads, D = H / N, I = intermediate_size,
V = vocab_size.

Under a `mixed_*` policy matmuls run in float16/bfloat16, softmax and LayerNorm in float32. Dense layers run on [B*S, H]
(`dense_2d`). Dropout masks are a function of seeds drawn once per training forward, the same with and without XLA, so
gradient checkpointing's recomputation replays them.

A layer here has Keras' automatic config (its constructor's arguments) unless it defines
`get_config`; Keras records only plain values, so our layers are given their dtype policy by name.
"""
import contextvars
import math

import keras
import tensorflow as tf
from keras import layers, ops

from bert_tf.model import activations
from bert_tf.model.config import BertConfig
from bert_tf.text.packing import INPUT_NAMES

LAYER_NORM_EPSILON = 1e-12  # The original's fixed LayerNorm epsilon.
_MASK_ADDER = -10000.0  # What the original adds to attention scores of masked positions.


def serializable(cls):
    """Registers a layer or model class for `.keras` saving under the package name "bert_tf"."""
    return keras.saving.register_keras_serializable(package="bert_tf")(cls)


# Set only inside the constructor of a BertModel made with `restored=True`, while it builds its layers.
_SKIP_INITIAL_VALUES = contextvars.ContextVar("bert_tf_skip_initial_values", default=False)


@serializable
class OriginalInitializer(keras.initializers.TruncatedNormal):
    """The original's truncated normal initializer (stddev `initializer_range`), but zeros while a BertModel made with
    `restored=True` builds. Its seed is drawn either way, so a task head's values stay the same."""

    def __call__(self, shape, dtype=None):
        if _SKIP_INITIAL_VALUES.get():
            return ops.zeros(shape, dtype)
        return super().__call__(shape, dtype)


def create_initializer(initializer_range=0.02):
    """The original's weight initializer (`OriginalInitializer`)."""
    return OriginalInitializer(stddev=initializer_range)


def make_layer_norm(name, dtype):
    """A LayerNormalization with the original's epsilon; float32 under mixed precision."""
    return layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=name, dtype=dtype)


def dense_2d(dense, x):
    """`dense(x)` for x [M, K] as MatMul + BiasAdd (+ activation), which grappler fuses into one kernel. Variables are
    cast explicitly: a backward-pass recomputation runs outside Keras' autocast. A quantized layer is simply called."""
    if dense.quantization_mode is not None:
        return dense(x)
    y = ops.matmul(x, ops.cast(dense.kernel, dense.compute_dtype))
    if dense.use_bias:
        y = tf.nn.bias_add(y, ops.cast(dense.bias, dense.compute_dtype))
    return dense.activation(y)


def dropout(x, rate, seed):
    """x with each value dropped with probability `rate`, the rest scaled by 1 / (1 - rate) in float32; the mask a
    function of `seed` ([2] int32) alone, the same under XLA (unlike Keras' Dropout): a value drops where its random
    bits (16 for 16-bit x) fall below round(rate * 2^bits)."""
    size = tf.size(x)
    if x.dtype.size < 4:
        bits = tf.reshape(tf.bitcast(random_bits((size + 1) // 2, seed), tf.uint16), [-1])[:size]
        threshold = tf.constant(min(round(rate * 2 ** 16), 2 ** 16 - 1), tf.uint16)
    else:
        bits = random_bits(size, seed)
        threshold = tf.constant(min(round(rate * 2 ** 32), 2 ** 32 - 1), tf.uint32)
    keep = tf.reshape(bits >= threshold, tf.shape(x))
    wide = tf.float32 if x.dtype.size < 4 else x.dtype
    kept = tf.cast(tf.cast(x, wide) * (1.0 / (1.0 - rate)), x.dtype)
    return tf.where(keep, kept, tf.zeros_like(x))


def random_bits(size, seed):
    """[size] uint32 Philox bits, key seed[0], counter (seed[1], position): the same in TensorFlow and XLA; consecutive
    seeds read disjoint counters."""
    key = tf.cast(seed[:1], tf.uint64)
    counter = tf.stack([tf.constant(0, tf.uint64), tf.cast(seed[1], tf.uint64)])  # [low, high] 64-bit words
    return tf.raw_ops.StatelessRandomUniformFullIntV2(shape=tf.reshape(size, [1]), key=key, counter=counter,
                                                      alg=tf.random.Algorithm.PHILOX.value, dtype=tf.uint32)


@serializable
class SeededDropout(layers.Dropout):
    """A Keras Dropout whose seed is drawn apart from its use (`draw_seed`: [2] int32, None for rate 0), so a
    recomputation replays the mask. Without a seed, inputs pass unchanged unless `training`."""

    def draw_seed(self):
        if self.rate == 0:
            return None
        state = self.seed_generator.next()  # [2] int64; the stateless ops take int32, cast as Keras casts it
        return tf.cast(tf.math.floormod(state, tf.int32.max - 1), tf.int32)

    def call(self, inputs, seed=None, training=None):
        if seed is None and training:
            seed = self.draw_seed()
        if seed is None:
            return inputs
        return dropout(inputs, self.rate, seed)


def attention_mask_adder(input_mask, dtype="float32"):
    """[B, S] 0/1 mask -> [B, 1, 1, S] additive mask: 0 where attended, -10000 where masked."""
    mask = ops.cast(input_mask, dtype)
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * _MASK_ADDER, 1), 1)


@serializable
class BertEmbeddings(layers.Layer):
    """Word + learned position + token type embeddings, then LayerNorm and dropout.

    input_ids, segment_ids [B, S] -> embedding_output [B, S, H]. Weights: word_embeddings [V, H], token_type_embeddings
    [type_vocab_size, H], position_embeddings [max_position_embeddings, H].
    """

    def __init__(self, vocab_size, hidden_size, type_vocab_size=16, max_position_embeddings=512,
                 initializer_range=0.02, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_ids_shape=None, segment_ids_shape=None):
        # One initializer object per variable: a seedless Keras 3 initializer repeats its values per object.
        for name, rows in (("word_embeddings", self.vocab_size), ("token_type_embeddings", self.type_vocab_size),
                           ("position_embeddings", self.max_position_embeddings)):
            setattr(self, name, self.add_weight(name=name, shape=(rows, self.hidden_size),
                                                initializer=create_initializer(self.initializer_range)))
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, input_ids, segment_ids, training=None):
        seq_length = ops.shape(input_ids)[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            raise ValueError(f"Sequence length {seq_length} exceeds max_position_embeddings "
                             f"({self.max_position_embeddings}) of this BERT config.")
        x = ops.take(self.word_embeddings, input_ids, axis=0)
        x = x + ops.take(self.token_type_embeddings, segment_ids, axis=0)
        x = x + ops.expand_dims(self.position_embeddings[:seq_length], 0)
        return self.dropout(self.layer_norm(x), training=training)

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None):
        return tuple(input_ids_shape) + (self.hidden_size,)


@serializable
class BertAttention(layers.Layer):
    """Multi-head self-attention, output projection, residual and LayerNorm (post-LN).

    x [B, S, H], mask_adder [B, 1, 1, S], seeds (`draw_seeds()`, None: no dropout) -> [B, S, H]. Sublayers keep the
    original's names (`attention/self/query`, ..., `attention/output/dense`).
    """

    def __init__(self, hidden_size, num_attention_heads, attention_dropout_rate=0.1, dropout_rate=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads

        def dense(name):  # a fresh initializer object each (see BertEmbeddings.build)
            return layers.Dense(hidden_size, name=name, kernel_initializer=create_initializer(initializer_range),
                                dtype=self.dtype_policy)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("dense")
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)
        self.attention_dropout = SeededDropout(attention_dropout_rate, dtype=self.dtype_policy)
        self.output_dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, x_shape, mask_adder_shape=None):
        for dense in (self.query, self.key, self.value, self.output_dense):
            dense.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))

    def _split_heads(self, x, batch, seq):
        """[B * S, H] -> [B, N, S, D]."""
        x = ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def draw_seeds(self):
        """The next seeds of the attention probabilities' and the output's dropouts."""
        return self.attention_dropout.draw_seed(), self.output_dropout.draw_seed()

    def call(self, x, mask_adder, seeds=None):
        attention_seed, output_seed = seeds or (None, None)
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        x_2d = ops.reshape(x, (-1, self.hidden_size))
        q = self._split_heads(dense_2d(self.query, x_2d), batch, seq)
        k = self._split_heads(dense_2d(self.key, x_2d), batch, seq)
        v = self._split_heads(dense_2d(self.value, x_2d), batch, seq)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(self.head_size))
        # Softmax in float32 whatever the compute dtype.
        probs = ops.softmax(ops.cast(scores, "float32") + ops.cast(mask_adder, "float32"), axis=-1)
        probs = self.attention_dropout(ops.cast(probs, self.compute_dtype), attention_seed)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))  # [B, S, N, D]
        context = ops.reshape(context, (-1, self.hidden_size))  # [B * S, H]
        attention_output = self.output_dropout(dense_2d(self.output_dense, context), output_seed)
        return ops.reshape(self.layer_norm(attention_output + x_2d), ops.shape(x))

    def compute_output_shape(self, x_shape, mask_adder_shape=None, seeds_shape=None):
        return x_shape


@serializable
class TransformerBlock(layers.Layer):
    """One encoder layer (`bert/encoder/layer_N`): attention, then the feed-forward net (dense [H, I] with `hidden_act`,
    dense [I, H]), each post-LN. x [B, S, H] -> [B, S, H].

    `gradient_checkpointing` (read when traced): training recomputes the activations in the backward pass, keeping
    [B, S, H] instead of [B, N, S, S] + [B, S, I].
    """

    def __init__(self, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
                 attention_dropout_rate=0.1, dropout_rate=0.1, initializer_range=0.02, gradient_checkpointing=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.attention_dropout_rate = attention_dropout_rate
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.gradient_checkpointing = gradient_checkpointing
        self.attention = BertAttention(hidden_size, num_attention_heads, attention_dropout_rate,
                                       dropout_rate, initializer_range, name="attention",
                                       dtype=self.dtype_policy.name)
        self.intermediate = layers.Dense(intermediate_size, activation=activations.get(hidden_act),
                                         name="intermediate", dtype=self.dtype_policy,
                                         kernel_initializer=create_initializer(initializer_range))
        self.output_dense = layers.Dense(hidden_size, name="output", dtype=self.dtype_policy,
                                         kernel_initializer=create_initializer(initializer_range))
        self.output_dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)

    def get_config(self):  # gradient_checkpointing as now (BertModel.set_gradient_checkpointing)
        keys = ("hidden_size", "num_attention_heads", "intermediate_size", "hidden_act",
                "attention_dropout_rate", "dropout_rate", "initializer_range",
                "gradient_checkpointing")
        return {**super().get_config(), **{key: getattr(self, key) for key in keys}}

    def build(self, x_shape, mask_adder_shape=None):
        self.attention.build(x_shape)
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))

    def draw_seeds(self):
        """The next dropout seeds (attention probabilities, attention output, feed-forward output), each [2] int32 or
        None for rate 0."""
        return (*self.attention.draw_seeds(), self.output_dropout.draw_seed())

    def call(self, x, mask_adder, training=None):
        if not training:
            return self._forward(x, mask_adder, None)
        seeds = self.draw_seeds()  # once per forward: a recomputation reads these, not the next ones

        def forward(x):
            return self._forward(x, mask_adder, seeds)

        return tf.recompute_grad(forward)(x) if self.gradient_checkpointing else forward(x)

    def _forward(self, x, mask_adder, seeds):
        """The block on x [B, S, H] with dropout `seeds` (None: no dropout) -> [B, S, H]."""
        attention_seeds, output_seed = (seeds[:2], seeds[2]) if seeds else (None, None)
        attention_output = self.attention(x, mask_adder, attention_seeds)
        attention_2d = ops.reshape(attention_output, (-1, self.hidden_size))  # [B * S, H], see `dense_2d`
        layer_output = dense_2d(self.output_dense, dense_2d(self.intermediate, attention_2d))
        layer_output = self.output_dropout(layer_output, output_seed)
        return ops.reshape(self.layer_norm(layer_output + attention_2d), ops.shape(x))

    def compute_output_shape(self, x_shape, mask_adder_shape=None):
        return x_shape


@serializable
class BertPooler(layers.Layer):
    """The first token's final hidden state through a tanh dense layer: [B, S, H] -> pooled_output [B, H]."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.dense = layers.Dense(hidden_size, activation="tanh", name="dense",
                                  kernel_initializer=create_initializer(initializer_range), dtype=self.dtype_policy)

    def build(self, sequence_output_shape):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.hidden_size)


@serializable
class BertModel(keras.Model):
    """The BERT encoder (the original's `BertModel`) as a functional Keras model.

    Inputs (dict): input_ids, input_mask (1 = real token), segment_ids, each [B, S] int32; S <= max_position_embeddings.
    Outputs (dict), named after the original's accessors:
      sequence_output  [B, S, H]   get_sequence_output()
      pooled_output    [B, H]      get_pooled_output()
      encoder_outputs  list of num_hidden_layers x [B, S, H]   get_all_encoder_layers()
      embedding_output [B, S, H]   get_embedding_output()

    `restored=True`: every variable is restored next, so kernels start at zeros, not random.
    `gradient_checkpointing=True`: the same gradients, less memory, more time.
    """

    def __init__(self, config, restored=False, gradient_checkpointing=False, **kwargs):
        token = _SKIP_INITIAL_VALUES.set(bool(restored))
        try:
            self._build_encoder(config, gradient_checkpointing, **kwargs)
        finally:
            _SKIP_INITIAL_VALUES.reset(token)

    def _build_encoder(self, config, gradient_checkpointing, **kwargs):
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        kwargs.setdefault("name", "bert")
        dtype = kwargs.pop("dtype", None)
        policy = keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()
        common = dict(initializer_range=config.initializer_range, dtype=policy.name)
        self.embeddings = BertEmbeddings(
            config.vocab_size, config.hidden_size, config.type_vocab_size, config.max_position_embeddings,
            dropout_rate=config.hidden_dropout_prob, name="embeddings", **common)
        self.encoder_layers = [
            TransformerBlock(config.hidden_size, config.num_attention_heads, config.intermediate_size,
                             config.hidden_act, config.attention_probs_dropout_prob, config.hidden_dropout_prob,
                             gradient_checkpointing=gradient_checkpointing, name=f"layer_{i}", **common)
            for i in range(config.num_hidden_layers)]
        self.pooler = BertPooler(config.hidden_size, name="pooler", **common)

        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        embedding_output = self.embeddings(inputs["input_ids"], inputs["segment_ids"])
        mask_adder = attention_mask_adder(inputs["input_mask"])
        x, encoder_outputs = embedding_output, []
        for layer in self.encoder_layers:
            x = layer(x, mask_adder)
            encoder_outputs.append(x)
        outputs = {"sequence_output": x, "pooled_output": self.pooler(x), "encoder_outputs": encoder_outputs,
                   "embedding_output": embedding_output}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = policy  # the functional constructor ignores `dtype` (it would keep the global policy)
        self.config = config
        self.gradient_checkpointing = gradient_checkpointing

    def set_gradient_checkpointing(self, enabled):
        """Whether training recomputes each block's activations; a function traced before keeps what it traced."""
        self.gradient_checkpointing = enabled
        for layer in self.encoder_layers:
            layer.gradient_checkpointing = enabled

    def get_embedding_table(self):
        """The word embedding variable [V, H] (tied to the masked LM output layer)."""
        return self.embeddings.word_embeddings

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                "gradient_checkpointing": self.gradient_checkpointing}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

