"""Gradient checkpointing (BertModel(gradient_checkpointing=True)): the recomputed blocks replay the dropout masks of
their forward, so the gradients are those without it, eager, in tf.function and under XLA, in float32 and mixed
precision; the model keeps its variables and saves as before."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertModel, SeededDropout, TransformerBlock, dropout

CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                    max_position_embeddings=16, type_vocab_size=2, hidden_dropout_prob=0.3,
                    attention_probs_dropout_prob=0.3)
_rng = np.random.RandomState(0)
IDS = _rng.randint(0, 50, (3, 8)).astype(np.int32)
FEATURES = {"input_ids": IDS, "input_mask": np.ones_like(IDS), "segment_ids": np.zeros_like(IDS)}
WEIGHTS = _rng.randn(32, 5).astype(np.float32)
LABELS = np.array([0, 3, 4], np.int32)
# Float32 rounding: with the oneDNN graph rewrites on, TensorFlow fuses the recomputed ops differently from the
# kept ones, and XLA too (measured: 7e-9 and 9e-8 of the largest gradient; eager: 0). Masks drawn again change the
# gradients by a third of the largest or more.
RELATIVE_TOLERANCE = 1e-6


def _model(dtype=None, mode=None):
    """The L=2 model of CONFIG; under XLA (`mode` "xla") an L=1 one, whose gradients compile in half the time."""
    keras.utils.set_random_seed(1)
    config = BertConfig.from_dict({**CONFIG.to_dict(), "num_hidden_layers": 1}) if mode == "xla" else CONFIG
    return BertModel(config, dtype=dtype)


def _gradients_fn(model, mode):
    """gradients() -> the model's gradients (None dropped) of a cross-entropy on its outputs, with dropout, run
    `mode`: "eager", "function" (tf.function) or "xla" (jit_compile)."""
    def gradients():
        with tf.GradientTape() as tape:
            outputs = model(FEATURES, training=True)
            sequence = tf.cast(outputs["sequence_output"], tf.float32)
            pooled = tf.cast(outputs["pooled_output"], tf.float32)
            logits = pooled @ WEIGHTS + tf.reduce_mean(sequence, axis=1) @ WEIGHTS
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(LABELS, logits))
        return [g for g in tape.gradient(loss, model.trainable_variables) if g is not None]
    return gradients if mode == "eager" else tf.function(gradients, jit_compile=mode == "xla")


def _random_states(model):
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _rewind(model):
    """Sets every dropout's SeedGenerator back to its first draw."""
    for state in _random_states(model):
        state.assign(state.numpy() * [1, 0])


def _numpy(gradients):
    return [tf.convert_to_tensor(g).numpy() for g in gradients]


def _gradients(model, mode, checkpointing):
    """The model's gradients from its dropouts' first draws, with or without checkpointing; and the function that
    computed them (traced with that setting)."""
    model.set_gradient_checkpointing(checkpointing)
    _rewind(model)
    gradients_fn = _gradients_fn(model, mode)
    return _numpy(gradients_fn()), gradients_fn


def _assert_close(got, expected, relative):
    scale = max(np.abs(g).max() for g in expected)
    difference = max(np.abs(a - b).max() for a, b in zip(got, expected))
    assert difference <= relative * scale, f"{difference} > {relative} x {scale}"


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_checkpointing_gives_the_same_gradients(mode):
    model = _model(mode=mode)
    without, without_fn = _gradients(model, mode, False)
    with_checkpointing, _ = _gradients(model, mode, True)
    _assert_close(with_checkpointing, without, RELATIVE_TOLERANCE)
    model.set_gradient_checkpointing(False)
    others = _numpy(without_fn())  # the next draws: other masks, other gradients (dropout is on)
    with pytest.raises(AssertionError):
        _assert_close(others, without, 0.01)


# Float16 in tf.function: on a CPU with native float16 kernels (AVX512_FP16, AMX: an Intel Xeon of the Sapphire
# Rapids kind) oneDNN fuses the recomputed ops differently from the kept ones and their roundings move a gradient by
# one float16 step (measured: 0.0078 of a largest gradient of 44, 2^-12.5 of it); elsewhere measured equal. Within
# float16's 10 bits of mantissa; masks drawn again move the gradients by a third of the largest.
FLOAT16_TOLERANCE = {"function": 2 ** -10, "xla": RELATIVE_TOLERANCE}


@pytest.mark.parametrize("mode", ["function", "xla"])
def test_checkpointing_gives_the_same_gradients_in_float16(mode):
    """The recomputed blocks compute in float16 as their forward (the dense kernels are cast outside Keras' autocast
    scope too): in tf.function within one float16 step of the largest gradient (FLOAT16_TOLERANCE), under XLA
    2e-9 of it apart."""
    model = _model("mixed_float16", mode)
    _assert_close(_gradients(model, mode, True)[0], _gradients(model, mode, False)[0], FLOAT16_TOLERANCE[mode])


def test_checkpointing_in_bfloat16_replays_the_masks():
    """bfloat16 keeps 8 bits of mantissa: in tf.function the oneDNN rewrites fuse the recomputation differently and
    its roundings move the gradients by 9e-4 of the largest (measured; other masks move them by about its size),
    within one step of those 8 bits; eager runs the same kernels and gives the same gradients."""
    model = _model("mixed_bfloat16")
    _assert_close(_gradients(model, "eager", True)[0], _gradients(model, "eager", False)[0], RELATIVE_TOLERANCE)
    _assert_close(_gradients(model, "function", True)[0], _gradients(model, "function", False)[0], 2 ** -7)


def _op_types(model, training):
    """Op type -> count in the graph of the gradients of the model's output (training or not)."""
    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(FEATURES, training=training)["pooled_output"])
        return tape.gradient(loss, model.trainable_variables)
    graph = tf.function(gradients).get_concrete_function().graph
    counts = {}
    for op in graph.get_operations():
        counts[op.type] = counts.get(op.type, 0) + 1
    return counts


def test_training_recomputes_each_block_and_inference_does_not():
    """In training the backward pass recomputes each block: its three dropout masks are made twice (from the seeds
    drawn once); the embeddings' dropout is not recomputed. Without training nothing is recomputed."""
    model = _model()
    blocks = CONFIG.num_hidden_layers
    without = _op_types(model, training=True)
    model.set_gradient_checkpointing(True)
    with_checkpointing = _op_types(model, training=True)
    assert without["StatelessRandomUniformFullIntV2"] == 1 + 3 * blocks
    assert with_checkpointing["StatelessRandomUniformFullIntV2"] == 1 + 3 * blocks * 2
    assert with_checkpointing.get("AssignVariableOp", 0) == without.get("AssignVariableOp", 0) == 1 + 3 * blocks
    assert _op_types(model, training=False) == _op_types(_model(), training=False)


def test_seeded_dropout_draws_the_seeds_of_keras_dropout():
    """A SeededDropout's seeds are those a Keras Dropout of the same seed draws, call after call (its seed
    generator's state, cast to int32 as Keras casts it); each masks as `encoder.dropout` of that seed, values kept
    with probability 1 - rate scaled by 1 / (1 - rate)."""
    seed = 2 ** 33 + 7  # beyond int32
    seeded, generator = SeededDropout(0.4, seed=seed), keras.random.SeedGenerator(seed)
    x = tf.ones([64, 32])
    for _ in range(2):
        drawn = seeded.draw_seed()
        np.testing.assert_array_equal(drawn.numpy(), np.mod(generator.next().numpy(), 2 ** 31 - 2))
        got = seeded(x, drawn).numpy()
        np.testing.assert_array_equal(got, dropout(x, 0.4, drawn).numpy())
        assert set(np.unique(got)) == {0.0, np.float32(1 / 0.6)} and 0.3 < (got == 0).mean() < 0.5
    np.testing.assert_array_equal(seeded(x).numpy(), x.numpy())  # no seed: not training
    assert SeededDropout(0.0).draw_seed() is None


def test_the_flag_is_in_the_config_and_changes_no_variable(tmp_path):
    model = BertModel(CONFIG, gradient_checkpointing=True)
    assert all(layer.gradient_checkpointing for layer in model.encoder_layers)
    assert BertModel.from_config(model.get_config()).gradient_checkpointing
    block = TransformerBlock(32, 4, 37, gradient_checkpointing=True)
    assert TransformerBlock.from_config(block.get_config()).gradient_checkpointing
    loaded = keras.saving.load_model(model.save(str(tmp_path / "model.keras")) or str(tmp_path / "model.keras"))
    assert loaded.gradient_checkpointing and loaded.encoder_layers[1].gradient_checkpointing
    loaded.set_gradient_checkpointing(False)  # a block's config says the flag as set since
    assert not loaded.get_config()["gradient_checkpointing"]
    assert not loaded.encoder_layers[1].get_config()["gradient_checkpointing"]
    plain = _model()
    assert [v.path for v in model.weights] == [v.path for v in plain.weights]
    assert len(model.variables) == len(plain.variables)  # the weights and the dropouts' seed states
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=plain).restore(path).assert_existing_objects_matched()
    for output in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(plain(FEATURES)[output], model(FEATURES)[output])
