import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.optimization import AdamWeightDecay, WarmupLinearDecay, create_optimizer


def original_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """The original create_optimizer's schedule, from its formula."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)
    if num_warmup_steps and step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return decayed


@pytest.mark.parametrize("warmup", [0, 3])
def test_schedule_is_the_originals(warmup):
    schedule = WarmupLinearDecay(2e-5, 10, warmup)
    for step in range(13):
        expected = original_learning_rate(step, 2e-5, 10, warmup)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def numpy_original_adam(params, grads_per_step, lrs, decay_names, bias_correction=False, wd=0.01):
    """The original AdamWeightDecayOptimizer after global-norm clipping at 1.0, written out in NumPy."""
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v_ = {k: np.zeros_like(v) for k, v in params.items()}
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values()))
        scale = min(1.0, 1.0 / norm)
        for k in params:
            g = grads[k] * scale
            m[k] = 0.9 * m[k] + 0.1 * g
            v_[k] = 0.999 * v_[k] + 0.001 * g * g
            mh, vh = (m[k] / (1 - 0.9 ** t), v_[k] / (1 - 0.999 ** t)) if bias_correction else (m[k], v_[k])
            update = mh / (np.sqrt(vh) + 1e-6)
            if k in decay_names:
                update += wd * params[k]
            params[k] -= lr * update
    return params


@pytest.mark.parametrize("bias_correction", [False, True])
def test_update_matches_the_original_optimizer(bias_correction):
    import keras
    rng = np.random.RandomState(0)
    layer = keras.layers.Dense(3, name="dense")
    norm = keras.layers.LayerNormalization(name="LayerNorm")
    model = keras.Sequential([keras.Input((4,)), layer, norm])
    variables = {v.path: v for v in model.trainable_variables}
    start = {k: v.numpy() for k, v in variables.items()}
    optimizer = create_optimizer(0.1, num_train_steps=5, num_warmup_steps=2, bias_correction=bias_correction)
    steps = [{k: rng.normal(0, 3, v.shape).astype(np.float32) for k, v in start.items()} for _ in range(4)]
    for grads in steps:
        optimizer.apply_gradients([(tf.constant(grads[k]), variables[k]) for k in variables])
    lrs = [original_learning_rate(t, 0.1, 5, 2) for t in range(4)]
    decayed = {k for k in variables if optimizer.decays(k)}
    assert decayed == {k for k in variables if k.endswith("dense/kernel")}  # not LayerNorm, not bias
    expected = numpy_original_adam(start, steps, lrs, decayed, bias_correction)
    for k, v in variables.items():
        np.testing.assert_allclose(v.numpy(), expected[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_weight_decay_exclusions_follow_the_original_names():
    optimizer = AdamWeightDecay()
    assert optimizer.decays("bert/encoder/layer_0/attention/self/query/kernel")
    assert optimizer.decays("embeddings/word_embeddings")
    for name in ("layer_0/attention/LayerNorm/gamma", "embeddings/LayerNorm/beta", "pooler/dense/bias",
                 "predictions/output_bias", "classifier/projection/output_bias"):
        assert not optimizer.decays(name), name
    assert not AdamWeightDecay(weight_decay_rate=0.0).decays("dense/kernel")


def test_bad_schedule():
    with pytest.raises(ValueError, match="num_train_steps must be positive"):
        WarmupLinearDecay(1e-4, 0)
