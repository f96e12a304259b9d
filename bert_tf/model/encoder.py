"""The BERT encoder as Keras 3 layers, mirroring the original `modeling.py`.

Shapes: B = batch size, S = sequence length, H = hidden_size, N = num_attention_heads, D = H / N,
I = intermediate_size, V = vocab_size. Every layer has `get_config`; `BertModel` saves to `.keras` and to
TF checkpoints (`tf.train.Checkpoint(model=...)`); `bert_tf.checkpoints` reads and writes the original's names.

Mixed precision: under a `mixed_*` Keras policy the matmuls run in float16/bfloat16 while attention softmax and
LayerNorm compute in float32.

Dropout in the transformer blocks (`TransformerBlock`): each block draws the seeds of its three dropouts once per
training forward, before its computation (`SeededDropout.draw_seed`: each dropout layer's Keras SeedGenerator,
advanced as a Keras Dropout call advances it, so the seed state is the same checkpointed variables), and masks with
bert-tf's own bits of those seeds (`dropout`: Philox bits, `random_bits`, the same in TensorFlow's kernels and in
XLA), in the original's distribution (keep with probability 1 - rate, scaled by 1 / (1 - rate)). The masks are not
Keras' Dropout's (bert-tf's before 2026-11, which XLA drew otherwise). With gradient checkpointing
(`BertModel(gradient_checkpointing=True)`, `BertModel.set_gradient_checkpointing`) each block's activations are
recomputed in the backward pass (`tf.recompute_grad`) from the same seeds: the same masks, hence the same gradients.

Speed (TensorFlow backend): inside the encoder the dense layers run on [B*S, H] as MatMul + BiasAdd (+ activation),
see `dense_2d`, which TensorFlow's graph optimizer fuses into one oneDNN kernel on CPU. The variables, their names
and the arithmetic are the original's; only float32 rounding differs (benchmarks/encoder_benchmark.py).
"""
import contextvars
import math

import keras
import tensorflow as tf
from keras import layers, ops

from bert_tf.model import activations
from bert_tf.model.config import BertConfig

LAYER_NORM_EPSILON = 1e-12  # The original's fixed LayerNorm epsilon.
_MASK_ADDER = -10000.0  # What the original adds to attention scores of masked positions.


def serializable(cls):
    """Registers a layer or model class for `.keras` saving under the package name "bert_tf"."""
    return keras.saving.register_keras_serializable(package="bert_tf")(cls)


# Set only inside the constructor of a BertModel made with `restored=True`, while it builds its layers.
_SKIP_INITIAL_VALUES = contextvars.ContextVar("bert_tf_skip_initial_values", default=False)


@serializable
class OriginalInitializer(keras.initializers.TruncatedNormal):
    """The original's weight initializer: truncated normal with stddev `initializer_range`, but zeros (the values
    are not computed) while a BertModel made with `restored=True` builds its layers. Its seed is drawn when
    it is created either way, so every other random value (a task head's) stays the same."""

    def __call__(self, shape, dtype=None):
        if _SKIP_INITIAL_VALUES.get():
            return ops.zeros(shape, dtype)
        return super().__call__(shape, dtype)


def create_initializer(initializer_range=0.02):
    """The original's weight initializer: truncated normal with stddev `initializer_range` (`OriginalInitializer`)."""
    return OriginalInitializer(stddev=initializer_range)


def make_layer_norm(name, dtype):
    """A Keras LayerNormalization with the original's epsilon (1e-12); float32 under mixed precision."""
    return layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=name, dtype=dtype)


def dense_2d(dense, x):
    """`dense(x)` for a built `keras.layers.Dense` and a 2-D input x [M, K]: x @ kernel + bias, then the activation.

    Same arithmetic as calling the layer, written as MatMul + BiasAdd (+ activation) on a 2-D tensor: the form that
    TensorFlow's grappler remapper fuses into one oneDNN `_FusedMatMul` kernel (BiasAdd, and GELU/ReLU/... as
    post-ops) when traced in `tf.function`. Keras' `Dense.call` on [B, S, H] goes through tensordot's reshapes and
    adds the bias with AddV2, which leaves the bias add and the activation as separate passes over the output. The
    layer's own variables are used, cast to its compute dtype as `Dense` casts them under mixed precision (here
    explicitly: a recomputation in the backward pass runs outside the Keras call that sets the autocast scope); a
    quantized layer is simply called.
    """
    if dense.quantization_mode is not None:
        return dense(x)
    y = ops.matmul(x, ops.cast(dense.kernel, dense.compute_dtype))
    if dense.use_bias:
        y = tf.nn.bias_add(y, ops.cast(dense.bias, dense.compute_dtype))
    return dense.activation(y)


def dropout(x, rate, seed):
    """x [any shape] with each value dropped with probability `rate` and the others scaled by 1 / (1 - rate), the
    mask a function of `seed` ([2] int32) alone: the same masks compiled by XLA (--use_xla) or not.

    Each value is dropped where its random bits fall below round(rate * 2^bits): 32 bits for float32 (rate 0.1:
    0.1 + 9e-11), 16 bits for 16-bit x under mixed precision (half a 32-bit draw per value; rate 0.1: 0.100006,
    where a uniform number in bfloat16 would drop 10.16%: 13 of its 128 steps below 0.1). The kept values are
    scaled in float32 (or x's wider dtype) before they are rounded to x's dtype (bfloat16's 1 / 0.9 = 1.109375
    would lower the mean by 0.3%).

    The bits are Philox's (Salmon et al. 2011) with `seed` as its key and counter (`random_bits`). TensorFlow's
    stateless ops, which Keras' Dropout runs, scramble the seed into a key and a counter and turn bits into uniform
    numbers one way in their kernels and another in XLA, so that --use_xla dropped other values than the same run
    without it (the masks of bert-tf before 2026-11, which were Keras' Dropout's in float32).
    """
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
    """[size] uint32 random bits of `seed` ([2] int32, as a Keras SeedGenerator gives them): Philox with key seed[0]
    and counter (seed[1], element position), so that consecutive seeds of a generator ([s, n], [s, n + 1]) read
    disjoint counters. The same bits in TensorFlow's kernels and in XLA."""
    key = tf.cast(seed[:1], tf.uint64)
    counter = tf.stack([tf.constant(0, tf.uint64), tf.cast(seed[1], tf.uint64)])  # [low, high] 64-bit words
    return tf.raw_ops.StatelessRandomUniformFullIntV2(shape=tf.reshape(size, [1]), key=key, counter=counter,
                                                      alg=tf.random.Algorithm.PHILOX.value, dtype=tf.uint32)


@serializable
class SeededDropout(layers.Dropout):
    """A Keras Dropout layer (its rate, its SeedGenerator) whose seed is drawn apart from its use, so that a
    recomputation replays the same mask, and whose mask is bert-tf's `dropout` of that seed.

    `draw_seed()`: the next seed, [2] int32 (advances the layer's SeedGenerator as one Keras Dropout call does), or
    None when rate is 0. Call: inputs [any shape], seed -> `dropout(inputs, rate, seed)`, a function of `seed` alone
    (one mask for the whole input, no `noise_shape`); inputs unchanged when `seed` is None, unless `training`, which
    draws the next seed (a Keras Dropout's call).
    """

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
    """[B, S] 0/1 mask -> [B, 1, 1, S] additive mask: 0 where attended, -10000 where masked (the original's)."""
    mask = ops.cast(input_mask, dtype)
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * _MASK_ADDER, 1), 1)


@serializable
class BertEmbeddings(layers.Layer):
    """Word + learned position + token type embeddings, then LayerNorm and dropout.

    Call: input_ids [B, S] int, segment_ids [B, S] int -> embedding_output [B, S, H].
    Weights: word_embeddings [V, H], token_type_embeddings [type_vocab_size, H],
    position_embeddings [max_position_embeddings, H], LayerNorm gamma/beta [H].
    """

    def __init__(self, vocab_size, hidden_size, type_vocab_size=16, max_position_embeddings=512,
                 initializer_range=0.02, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_ids_shape=None, segment_ids_shape=None):
        # One initializer object per variable: a Keras 3 initializer without a seed returns the same values each
        # time the same object is called, which would make the tables (and Q/K/V below) start out identical.
        def init():
            return create_initializer(self.initializer_range)

        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size), initializer=init())
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size), initializer=init())
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size), initializer=init())
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

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

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
                "type_vocab_size": self.type_vocab_size, "max_position_embeddings": self.max_position_embeddings,
                "initializer_range": self.initializer_range, "dropout_rate": self.dropout_rate}


@serializable
class BertAttention(layers.Layer):
    """Multi-head self-attention with its output projection, residual connection and LayerNorm (post-LN).

    Call: x [B, S, H], mask_adder [B, 1, 1, S] (from `attention_mask_adder`), seeds -> [B, S, H]. `seeds`: the
    dropout seeds `draw_seeds()` gives (attention probabilities, output), or None: no dropout (not training).
    Sublayers keep the original's names: query, key, value (`attention/self/...`), dense and LayerNorm
    (`attention/output/...`).
    """

    def __init__(self, hidden_size, num_attention_heads, attention_dropout_rate=0.1, dropout_rate=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

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
        self.built = True

    def _split_heads(self, x, batch, seq):
        """[B * S, H] -> [B, N, S, D]."""
        x = ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def draw_seeds(self):
        """The next seeds of the attention probabilities' and the output's dropouts (`SeededDropout.draw_seed`)."""
        return self.attention_dropout.draw_seed(), self.output_dropout.draw_seed()

    def call(self, x, mask_adder, seeds=None):
        attention_seed, output_seed = seeds or (None, None)
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        # The dense layers run on [B * S, H] (a free reshape): plain 2-D matmuls that fuse with their bias add.
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

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_attention_heads": self.num_attention_heads,
                "attention_dropout_rate": self.attention_dropout_rate, "dropout_rate": self.dropout_rate,
                "initializer_range": self.initializer_range}


@serializable
class TransformerBlock(layers.Layer):
    """One encoder layer (`bert/encoder/layer_N`): attention, then the feed-forward net, each post-LN.

    Call: x [B, S, H], mask_adder [B, 1, 1, S] -> [B, S, H]. Feed-forward: intermediate dense [H, I] with
    `hidden_act`, output dense [I, H], dropout, residual, LayerNorm.

    Training draws the seeds of the block's three dropouts first (`draw_seeds`), then computes the block from them.
    `gradient_checkpointing`: in training, the block's activations are not kept for the backward pass but
    recomputed there (`tf.recompute_grad`) from the block's input and the same seeds (the same dropout masks);
    the activation memory of a block is then its [B, S, H] input instead of its intermediate tensors (the
    [B, N, S, S] attention probabilities, the [B, S, I] feed-forward). The attribute is read when the call is
    traced. Inference never recomputes.
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
        self.attention = BertAttention(hidden_size, num_attention_heads, attention_dropout_rate, dropout_rate,
                                       initializer_range, name="attention", dtype=self.dtype_policy)
        self.intermediate = layers.Dense(intermediate_size, activation=activations.get(hidden_act),
                                         name="intermediate", dtype=self.dtype_policy,
                                         kernel_initializer=create_initializer(initializer_range))
        self.output_dense = layers.Dense(hidden_size, name="output", dtype=self.dtype_policy,
                                         kernel_initializer=create_initializer(initializer_range))
        self.output_dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)
        self.layer_norm = make_layer_norm("LayerNorm", self.dtype_policy)

    def build(self, x_shape, mask_adder_shape=None):
        self.attention.build(x_shape)
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def draw_seeds(self):
        """The next seeds of the block's dropouts: (attention probabilities, attention output, feed-forward output),
        each [2] int32 or None for a rate of 0 (`SeededDropout.draw_seed`)."""
        return (*self.attention.draw_seeds(), self.output_dropout.draw_seed())

    def call(self, x, mask_adder, training=None):
        if not training:
            return self._forward(x, mask_adder, None)
        seeds = self.draw_seeds()  # once per forward: a recomputation reads these, not the next ones

        def forward(x):
            return self._forward(x, mask_adder, seeds)

        return tf.recompute_grad(forward)(x) if self.gradient_checkpointing else forward(x)

    def _forward(self, x, mask_adder, seeds):
        """The block on x [B, S, H] with the dropout seeds `seeds` (`draw_seeds`; None: no dropout) -> [B, S, H]."""
        attention_seeds, output_seed = (seeds[:2], seeds[2]) if seeds else (None, None)
        attention_output = self.attention(x, mask_adder, attention_seeds)
        attention_2d = ops.reshape(attention_output, (-1, self.hidden_size))  # [B * S, H], see `dense_2d`
        layer_output = dense_2d(self.output_dense, dense_2d(self.intermediate, attention_2d))
        layer_output = self.output_dropout(layer_output, output_seed)
        return ops.reshape(self.layer_norm(layer_output + attention_2d), ops.shape(x))

    def compute_output_shape(self, x_shape, mask_adder_shape=None):
        return x_shape

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_attention_heads": self.num_attention_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "attention_dropout_rate": self.attention_dropout_rate,
                "dropout_rate": self.dropout_rate, "initializer_range": self.initializer_range,
                "gradient_checkpointing": self.gradient_checkpointing}


@serializable
class BertPooler(layers.Layer):
    """The first token's final hidden state through a tanh dense layer: [B, S, H] -> pooled_output [B, H]."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = layers.Dense(hidden_size, activation="tanh", name="dense",
                                  kernel_initializer=create_initializer(initializer_range), dtype=self.dtype_policy)

    def build(self, sequence_output_shape):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.hidden_size)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}


@serializable
class BertModel(keras.Model):
    """The BERT encoder (the original's `BertModel`) as a functional Keras model.

    Inputs (dict): input_ids [B, S] int32, input_mask [B, S] int32 (1 = real token), segment_ids [B, S] int32.
    Outputs (dict), named after the original's accessors:
      sequence_output  [B, S, H]   get_sequence_output()
      pooled_output    [B, H]      get_pooled_output()
      encoder_outputs  list of num_hidden_layers x [B, S, H]   get_all_encoder_layers()
      embedding_output [B, S, H]   get_embedding_output()
    `get_embedding_table()` returns the word embedding variable [V, H]. S may be at most max_position_embeddings.

    `restored=True`: the caller restores every variable from a checkpoint next (`bert_tf.checkpoints.restore`
    refuses a checkpoint that lacks any encoder variable, so all of them are overwritten, as the original's
    `init_from_checkpoint` replaced their initializers): the embedding tables and kernels are left at zeros instead
    of computing random initial values. Building MiniLM-L6-H384's classifier took 0.30 s instead of 0.81 s
    (benchmarks/log/finetune.md); the saving grows with the model. Task heads get their random values as always.

    `gradient_checkpointing=True`: in training each transformer block's activations are recomputed in the backward
    pass instead of being kept (`TransformerBlock`; `set_gradient_checkpointing` turns it on or off on a built
    model): the same gradients, less memory, more time (BENCHMARKS.md, "Gradient checkpointing").
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
        common = dict(initializer_range=config.initializer_range, dtype=policy)
        self.embeddings = BertEmbeddings(
            config.vocab_size, config.hidden_size, config.type_vocab_size, config.max_position_embeddings,
            dropout_rate=config.hidden_dropout_prob, name="embeddings", **common)
        self.encoder_layers = [
            TransformerBlock(config.hidden_size, config.num_attention_heads, config.intermediate_size,
                             config.hidden_act, config.attention_probs_dropout_prob, config.hidden_dropout_prob,
                             gradient_checkpointing=gradient_checkpointing, name=f"layer_{i}", **common)
            for i in range(config.num_hidden_layers)]
        self.pooler = BertPooler(config.hidden_size, name="pooler", **common)

        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ("input_ids", "input_mask", "segment_ids")}
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
        """Whether training recomputes each transformer block's activations in the backward pass (see the class
        docstring); a function traced before keeps what it traced."""
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

