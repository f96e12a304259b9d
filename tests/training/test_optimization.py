import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.optimization import (
    AdamWeightDecay,
    Lamb,
    WarmupPolynomialDecay,
    clip_by_global_norm,
    create_optimizer,
    learning_rate_schedule,
)


def original_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """The original create_optimizer's schedule, from its formula."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)
    if num_warmup_steps and step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return decayed


def nvidia_lamb_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """NVIDIA's create_optimizer(optimizer_type="lamb") schedule: polynomial_decay with power 0.5, its warmup mix."""
    decayed = float(tf.compat.v1.train.polynomial_decay(init_lr, step, num_train_steps, end_learning_rate=0.0,
                                                        power=0.5, cycle=False)())
    is_warmup = float(num_warmup_steps > 0 and step < num_warmup_steps)
    warmup = init_lr * step / num_warmup_steps if num_warmup_steps else 0.0
    return (1.0 - is_warmup) * decayed + is_warmup * warmup


@pytest.mark.parametrize("warmup", [0, 3])
def test_schedule_is_the_originals(warmup):
    schedule = learning_rate_schedule(2e-5, 10, warmup)  # adamw's
    for step in range(13):
        expected = original_learning_rate(step, 2e-5, 10, warmup)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_power_one_is_the_linear_schedule_bit_for_bit():
    """The original's formula in float32 arithmetic, as the schedule computes it: equal to the last bit."""
    f32 = np.float32
    schedule = WarmupPolynomialDecay(3e-4, 7, 2)
    for step in range(9):
        decayed = f32(3e-4) * (f32(1.0) - min(f32(step), f32(7)) / f32(7))
        expected = f32(3e-4) * f32(step) / f32(2) if step < 2 else decayed
        assert np.float32(schedule(step)) == expected, step


@pytest.mark.parametrize("warmup", [0, 3])
def test_lamb_schedule_is_nvidias(warmup):
    schedule = learning_rate_schedule(1e-3, 10, warmup, optimizer="lamb")
    assert schedule.power == 0.5
    for step in range(13):
        expected = nvidia_lamb_learning_rate(step, 1e-3, 10, warmup)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12), step


# 1 - beta in float32, as TensorFlow's fused Adam kernel takes it (the original's float64 constants: 0.1, 0.001)
KERNEL_ONE_MINUS_BETAS = (float(1 - np.float32(0.9)), float(1 - np.float32(0.999)))


def numpy_reference(params, grads_per_step, lrs, decay_names, bias_correction=False, adapt_names=(), wd=0.01,
                    one_minus_betas=(0.1, 0.001)):
    """After global-norm clipping at 1.0, the original AdamWeightDecayOptimizer (no `adapt_names`) or NVIDIA's
    LAMBOptimizer (bias_correction=True; its trust ratio for `adapt_names`), written out in NumPy (with
    `one_minus_betas` for 1 - beta_1 and 1 - beta_2)."""
    c1, c2 = one_minus_betas
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v_ = {k: np.zeros_like(v) for k, v in params.items()}
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values()))
        scale = min(1.0, 1.0 / norm)
        for k in params:
            g = grads[k] * scale
            m[k] = 0.9 * m[k] + c1 * g
            v_[k] = 0.999 * v_[k] + c2 * g * g
            mh, vh = (m[k] / (1 - 0.9 ** t), v_[k] / (1 - 0.999 ** t)) if bias_correction else (m[k], v_[k])
            update = mh / (np.sqrt(vh) + 1e-6)
            if k in decay_names:
                update += wd * params[k]
            ratio = 1.0
            w_norm, u_norm = np.linalg.norm(params[k]), np.linalg.norm(update)
            if k in adapt_names and w_norm > 0 and u_norm > 0:
                ratio = w_norm / u_norm
            params[k] -= ratio * lr * update
    return params


def train_tiny_model(optimizer, num_steps, zero_gradient=()):
    """Applies `num_steps` random gradients (zeros for the paths in `zero_gradient`) to a model with a seeded random
    dense/kernel, zero biases, an all-zero zero/kernel and LayerNorm gamma/beta. Returns (start, steps, variables):
    the start values and the gradients by path, and the variables after training."""
    rng = np.random.RandomState(0)
    seeded = keras.initializers.GlorotUniform(seed=0)  # the same start on every run (the tolerance is float32's)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, kernel_initializer=seeded, name="dense"),
                              keras.layers.Dense(3, kernel_initializer="zeros", name="zero"),
                              keras.layers.LayerNormalization(name="LayerNorm")], name="model")
    variables = {v.path: v for v in model.trainable_variables}
    start = {k: v.numpy() for k, v in variables.items()}
    steps = [{k: np.zeros_like(v) if k in zero_gradient else rng.normal(0, 3, v.shape).astype(np.float32)
              for k, v in start.items()} for _ in range(num_steps)]
    for grads in steps:
        optimizer.apply_gradients([(tf.constant(grads[k]), variables[k]) for k in variables])
    return start, steps, variables


@pytest.mark.parametrize("bias_correction,fused", [(False, True), (False, False), (True, True)])
def test_update_matches_the_original_optimizer(bias_correction, fused):
    optimizer = create_optimizer(0.1, num_train_steps=5, num_warmup_steps=2, bias_correction=bias_correction,
                                 fused=fused)
    start, steps, variables = train_tiny_model(optimizer, 4)
    lrs = [original_learning_rate(t, 0.1, 5, 2) for t in range(4)]
    decayed = {k for k in variables if optimizer.decays(k)}
    assert decayed == {"model/dense/kernel", "model/zero/kernel"}  # not LayerNorm, not bias
    kernel = fused and not bias_correction
    expected = numpy_reference(start, steps, lrs, decayed, bias_correction,
                               one_minus_betas=KERNEL_ONE_MINUS_BETAS if kernel else (0.1, 0.001))
    for k, v in variables.items():
        np.testing.assert_allclose(v.numpy(), expected[k], rtol=1e-5, atol=1e-6, err_msg=k)


GOLDEN_UPDATES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "adam_weight_decay_updates.npz")


@pytest.mark.parametrize("fused,tolerance", [(False, 2e-7), (True, 2e-6)])
def test_updates_match_the_original_optimizers_golden(fused, tolerance):
    """The original AdamWeightDecayOptimizer itself (tests/fixtures/README.md): 6 updates of a kernel, a bias, a
    LayerNorm gamma and an embedding table, clipped to global norm 1.0 (large and small gradients alternating), on
    the original's warmup + linear decay. Measured max |ours - golden|: 6.0e-8 (element-wise ops), 5.7e-7 (the fused
    kernel, its 1 - beta_2 in float32)."""
    golden = np.load(GOLDEN_UPDATES)
    names = {"layer/kernel": "kernel", "layer/bias": "bias", "layer/LayerNorm/gamma": "LayerNorm_gamma",
             "embeddings": "embeddings"}
    variables = {k: keras.Variable(golden[f"start/{k}"], name=name) for k, name in names.items()}
    lrs = golden["lrs"]
    optimizer = create_optimizer(0.01, num_train_steps=len(lrs), num_warmup_steps=2, fused=fused)
    schedule = learning_rate_schedule(0.01, len(lrs), 2)
    assert [float(schedule(t)) for t in range(len(lrs))] == pytest.approx(lrs, rel=1e-6)
    for t in range(len(lrs)):
        optimizer.apply_gradients([(tf.constant(golden[f"grad{t}/{k}"]), v) for k, v in variables.items()])
    for k, v in variables.items():
        np.testing.assert_allclose(v.numpy(), golden[f"final/{k}"], rtol=0, atol=tolerance, err_msg=k)


def kernel_ops(optimizer, variables):
    """The op types of one traced apply_gradients of `optimizer` over `variables`."""
    optimizer.build(variables)
    apply = tf.function(lambda: optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables]))
    return {op.type for op in apply.get_concrete_function().graph.get_operations()}


@pytest.mark.parametrize("bias_correction,fused,kernel", [(False, True, True), (False, False, False),
                                                          (True, True, False)])
def test_fused_kernel_only_where_it_computes_the_originals_update(bias_correction, fused, kernel):
    optimizer = create_optimizer(1e-3, 10, 2, bias_correction=bias_correction, fused=fused)
    assert ("ResourceApplyAdam" in kernel_ops(optimizer, [keras.Variable(np.ones((3, 2), "float32"))])) == kernel


def test_fused_kernel_constants_are_traced_once_per_update():
    """The fused kernel's five scalars (beta powers, betas, epsilon) are one set of graph constants shared by every
    variable of a traced update, not five constants per variable; the update is still each variable's own."""
    optimizer = create_optimizer(1e-3, 10, 0)
    variables = [keras.Variable(np.full((3, 2), i + 1.0, "float32")) for i in range(4)]
    optimizer.build(variables)
    apply = tf.function(lambda: optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables]))
    graph = apply.get_concrete_function().graph
    kernels = [op for op in graph.get_operations() if op.type == "ResourceApplyAdam"]
    assert len(kernels) == len(variables)
    for position in (3, 4, 6, 7, 8):  # beta1_power, beta2_power, beta1, beta2, epsilon
        assert len({op.inputs[position].name for op in kernels}) == 1, position
    apply()
    moved = [float(np.abs(v.numpy() - (i + 1.0)).max()) for i, v in enumerate(variables)]
    assert all(m > 0 for m in moved)


def test_fused_kernel_moves_the_variables_as_the_element_wise_ops():
    """20 updates at the fine-tuning learning rate: where the element-wise ops move a variable by d (weight decay
    and exclusions included), the fused kernel moves it by d to 2e-5 relative (its 1 - beta_2 in float32: 1.3e-5
    on v, 6.4e-6 on the step) plus float32 rounding of the variable (4 ulp); the moments agree to 2e-5."""
    results = []
    for fused in (True, False):
        keras.utils.set_random_seed(0)  # the same start
        optimizer = create_optimizer(5e-5, 20, 2, fused=fused)
        start, _, variables = train_tiny_model(optimizer, 20, zero_gradient=("model/zero/bias",))
        moments = [m.numpy() for m in optimizer.variables if "adam" in m.path]
        results.append(({k: v.numpy() for k, v in variables.items()}, moments, start))
    (fused_vars, fused_moments, _), (ops_vars, ops_moments, start) = results
    for k, w0 in start.items():
        np.testing.assert_array_equal(results[0][2][k], w0)
        if k == "model/zero/bias":  # no gradient, no decay: neither moves it
            np.testing.assert_array_equal(fused_vars[k], ops_vars[k])
            np.testing.assert_array_equal(fused_vars[k], w0)
            continue
        change = ops_vars[k].astype(np.float64) - w0
        assert np.abs(change).max() > 0, k
        bound = 2e-5 * np.abs(change) + 20 * np.spacing(np.abs(ops_vars[k]))  # 1 ulp a step
        assert np.all(np.abs(fused_vars[k].astype(np.float64) - ops_vars[k]) <= bound), k
    for a, b in zip(fused_moments, ops_moments):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-30)


@pytest.mark.parametrize("exclude_from_layer_adaptation", [None, ("LayerNorm", "bias")])
def test_lamb_matches_nvidias_optimizer(exclude_from_layer_adaptation):
    """NVIDIA's recipe (None: every variable adapted) and the opt-in exclusion from layer adaptation.

    zero/kernel and the biases start at 0 and the first update's rate is 0 (warmup), so the second update meets
    ||w|| = 0 at a non-zero rate; LayerNorm/gamma gets no gradient and no decay (||update|| = 0). Both take ratio
    1, not NaN."""
    if exclude_from_layer_adaptation is None:
        optimizer = create_optimizer(0.1, num_train_steps=5, num_warmup_steps=2, optimizer="lamb")
    else:
        optimizer = Lamb(learning_rate=learning_rate_schedule(0.1, 5, 2, optimizer="lamb"),
                         exclude_from_layer_adaptation=exclude_from_layer_adaptation)
    start, steps, variables = train_tiny_model(optimizer, 4, zero_gradient={"model/LayerNorm/gamma"})
    lrs = [nvidia_lamb_learning_rate(t, 0.1, 5, 2) for t in range(4)]
    decayed = {k for k in variables if optimizer.decays(k)}
    adapted = {k for k in variables if optimizer.adapts(k)}
    assert decayed == {"model/dense/kernel", "model/zero/kernel"}
    assert adapted == (set(variables) if exclude_from_layer_adaptation is None else decayed)
    expected = numpy_reference(start, steps, lrs, decayed, bias_correction=True, adapt_names=adapted)
    for k, v in variables.items():
        np.testing.assert_allclose(v.numpy(), expected[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.all(variables["model/zero/kernel"].numpy() != 0)  # moved off 0 (by lr * update, ratio 1)
    np.testing.assert_array_equal(variables["model/LayerNorm/gamma"].numpy(), start["model/LayerNorm/gamma"])
    assert {"model_dense_kernel_adam_m", "model_dense_kernel_adam_v"} <= {s.name for s in optimizer.variables}


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_config_round_trip(optimizer):
    original = create_optimizer(1e-3, 100, 10, weight_decay_rate=0.02, sum_replica_gradients=False,
                                optimizer=optimizer)
    config = original.get_config()
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(original))
    assert type(restored) is type(original) and restored.get_config() == config
    assert restored.sum_replica_gradients is False and restored.weight_decay_rate == 0.02
    assert config["learning_rate"]["config"]["power"] == {"adamw": 1.0, "lamb": 0.5}[optimizer]


@pytest.mark.parametrize("schedule", [WarmupPolynomialDecay(1e-4, 100, 10), WarmupPolynomialDecay(1e-4, 100, 10, 0.5)])
def test_schedule_config_round_trip(schedule):
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert type(restored) is type(schedule) and restored.get_config() == schedule.get_config()
    for step in (0, 5, 10, 50, 100, 120):
        assert float(restored(step)) == float(schedule(step))


@pytest.mark.parametrize("optimizer_class", [AdamWeightDecay, Lamb])
def test_weight_decay_exclusions_follow_the_original_names(optimizer_class):
    optimizer = optimizer_class()
    assert optimizer.decays("bert/encoder/layer_0/attention/self/query/kernel")
    assert optimizer.decays("embeddings/word_embeddings")
    for name in ("layer_0/attention/LayerNorm/gamma", "embeddings/LayerNorm/beta", "pooler/dense/bias",
                 "predictions/output_bias", "classifier/projection/output_bias"):
        assert not optimizer.decays(name), name
    assert not optimizer_class(weight_decay_rate=0.0).decays("dense/kernel")


def test_lamb_adapts_every_variable_unless_told():
    assert Lamb().adapts("layer_0/attention/LayerNorm/gamma") and Lamb().adapts("pooler/dense/bias")
    optimizer = Lamb(exclude_from_layer_adaptation=["LayerNorm"])
    assert not optimizer.adapts("embeddings/LayerNorm/beta") and optimizer.adapts("pooler/dense/bias")


def test_unknown_optimizer():
    with pytest.raises(ValueError, match="Unknown optimizer 'adam': expected one of adamw, lamb"):
        create_optimizer(1e-4, 10, 1, optimizer="adam")


def test_bad_schedule():
    with pytest.raises(ValueError, match="num_train_steps must be positive"):
        WarmupPolynomialDecay(1e-4, 0)
    with pytest.raises(ValueError, match="decay power must be positive"):
        WarmupPolynomialDecay(1e-4, 10, power=0.0)


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
@pytest.mark.parametrize("gradient_scale", [30.0, 1e-4])  # clipped, and left as it is
def test_clipping_outside_the_optimizer_gives_the_same_numbers(optimizer, gradient_scale):
    """The Trainer's clipping (clip_by_global_norm with the global norm it reports, optimizer built with
    global_clipnorm=None) updates the variables as the optimizer clipping by itself, embedding gradients
    (IndexedSlices with a repeated row) included: the same numbers but for float32 rounding where TensorFlow's
    graph optimizer orders a product differently (1 ulp, rarely)."""
    rng = np.random.default_rng(3)
    initial = [rng.normal(size=shape).astype("float32") for shape in [(50, 8), (8, 16), (16,), (16, 4)]]
    ids = tf.constant([3, 7, 3, 41, 3, 9])

    def gradients(variables):
        with tf.GradientTape() as tape:
            x = tf.gather(variables[0], ids)
            y = tf.nn.gelu(tf.matmul(x, variables[1]) + variables[2])
            loss = gradient_scale * tf.reduce_sum(tf.matmul(y, variables[3]) ** 2)
        return tape.gradient(loss, variables)

    def train(global_clipnorm):
        variables = [keras.Variable(value, name=f"w{i}") for i, value in enumerate(initial)]
        opt = create_optimizer(1e-3, 10, 2, optimizer=optimizer, global_clipnorm=global_clipnorm)
        opt.build(variables)

        @tf.function(autograph=False)
        def step():
            grads = gradients(variables)
            assert isinstance(grads[0], tf.IndexedSlices)
            if global_clipnorm is None:
                grads = clip_by_global_norm(grads, tf.linalg.global_norm(grads))
            opt.apply_gradients(zip(grads, variables))
            return tf.linalg.global_norm(grads)

        norms = [float(step()) for _ in range(4)]
        return [v.numpy() for v in variables], norms

    inside, norms_inside = train(1.0)
    outside, norms_outside = train(None)
    assert (min(norms_inside) > 1.0) == (gradient_scale > 1.0)
    for a, b, start in zip(inside, outside, initial):
        assert not np.array_equal(a, start)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
