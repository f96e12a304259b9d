"""The original's optimization (AdamWeightDecay, warmup then linear decay) and NVIDIA's LAMB recipe.

Original semantics (optimization.py of google-research/bert):
- learning rate at step t (t = updates done so far, starting at 0): init_lr * t / warmup while t < warmup, else
  init_lr * (1 - t / num_train_steps) (clamped at 0);
- gradients clipped to global norm 1.0;
- Adam with beta_1 0.9, beta_2 0.999, epsilon 1e-6 and **no bias correction**; weight decay 0.01 added to the
  update (decoupled, scaled by the learning rate) for every variable whose name matches none of
  "LayerNorm", "layer_norm", "bias".
`bias_correction=False` (the default) is that exact mode; `bias_correction=True` gives standard Adam(W) moments.
In that mode AdamWeightDecay applies the update with TensorFlow's fused Adam kernel unless `fused=False`: the same
update to float32 rounding, but for 1 - beta_2 taken in float32 (AdamWeightDecay._fused_update).

NVIDIA's LAMB recipe (NVIDIA/DeepLearningExamples, TensorFlow/LanguageModeling/BERT/optimization.py, last
changed in 398dc781: `create_optimizer(..., optimizer_type="lamb")` and class `LAMBOptimizer`), `optimizer="lamb"`:
- learning rate: the same linear warmup, then `tf.compat.v1.train.polynomial_decay(init_lr, t, num_train_steps,
  end_learning_rate=0.0, power=0.5)`, i.e. init_lr * (1 - min(t, num_train_steps) / num_train_steps) ** 0.5 (its
  `adjusted_init_lr` is init_lr for lamb; only its adam branch rescales init_lr, and that branch is not the
  original's, so `optimizer="adamw"` keeps the original's);
- gradients clipped to global norm 1.0 in `create_optimizer`, for lamb as for adam;
- `LAMBOptimizer(weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6, exclude_from_weight_decay=
  ["LayerNorm", "layer_norm", "bias"])`, slots `adam_m` / `adam_v`; per variable w: the Adam moments m, v **with**
  bias correction m / (1 - beta_1 ** t), v / (1 - beta_2 ** t); update = m_hat / (sqrt(v_hat) + epsilon), plus
  weight_decay_rate * w where w decays; trust ratio = ||w|| / ||update|| (Frobenius norms, w before the step), 1.0
  where either norm is 0; w -= ratio * lr * update. Every variable gets the trust ratio (no exclusion from layer
  adaptation; `exclude_from_layer_adaptation` here is an opt-in, default none).
- t of the bias correction: `LAMBOptimizer.apply_gradients` reads global_step while the same step's
  `global_step.assign(global_step + 1)` runs unordered beside it. With TF1 reference variables (NVIDIA's TF1
  containers) the read aliases the variable and sees the incremented value: t = 1 at the first update (with resource
  variables it reads 0 and divides by 0: NaN). So t = the updates including this one, as in standard Adam. Its
  learning rate reads global_step the same way, so there update k (from 0) takes the rate of step k + 1: run in TF1
  graph mode with reference variables, NVIDIA's create_optimizer matches this module's LAMB with the schedule read at
  k + 1 to 4e-7. The original's create_optimizer increments global_step in the same unordered way; this module
  gives update k the rate of step k, for lamb as for adamw (the original's schedule as written).
Not in the optimizer, for whoever runs it: NVIDIA's gradient accumulation clips each micro-batch's gradients to
global norm 1.0 before summing them (bert_tf's update step clips the sum), and its run_pretraining.py multiplies
--learning_rate by the number of Horovod workers.
"""
import re

import keras
import tensorflow as tf
from keras import ops

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZERS = ("adamw", "lamb")
CLIP_NORM = 1.0  # the original's global-norm clipping
LAMB_DECAY_POWER = 0.5


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """init_lr * step / num_warmup_steps during warmup, then init_lr * (1 - step / num_train_steps) ** power, >= 0.

    The decay is tf.compat.v1.train.polynomial_decay to 0 over num_train_steps; power 1.0 is the original's linear.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0, power=1.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        if power <= 0:
            raise ValueError(f"The learning rate decay power must be positive, got {power}.")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.power = float(power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        remaining = 1.0 - ops.minimum(step, float(self.num_train_steps)) / self.num_train_steps
        decayed = self.init_lr * (remaining if self.power == 1.0 else ops.power(remaining, self.power))
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "power": self.power}


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(WarmupPolynomialDecay):
    """The original's schedule: WarmupPolynomialDecay with power 1.0."""

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
        super().__init__(init_lr, num_train_steps, num_warmup_steps)

    def get_config(self):
        return {k: v for k, v in super().get_config().items() if k != "power"}


def matches(variable, patterns):
    """Whether `variable` (a Keras variable, by its path such as `layer_0/attention/LayerNorm/gamma`, or a name
    string) matches any of the regular expressions `patterns` (re.search, as the original matches names)."""
    name = variable if isinstance(variable, str) else variable.path
    return any(re.search(p, name) for p in patterns)


class BertOptimizer(keras.optimizers.Optimizer):
    """What the original's AdamWeightDecay and NVIDIA's LAMB share, as a Keras 3 optimizer: Adam moments in slots
    `adam_m` / `adam_v` (bias-corrected or not), decoupled weight decay for the variables whose Keras path matches
    none of `exclude_from_weight_decay`, gradients clipped to global norm `global_clipnorm` (1.0, the original's).

    Its gradients may come already summed over the tf.distribute replicas: Keras sums the replicas' gradients
    inside `apply_gradients`, after clipping each replica's part by its own global norm.
    The Trainer's update step (`bert_tf.training.update`) sums them first and builds its optimizer with
    `sum_replica_gradients=False`, so that global-norm clipping sees the gradient of the whole batch, as on one
    device.

    jit_update: update the variables of each device in one XLA program (`device_update`); the Trainer's update
    step sets it where --use_xla compiles the optimizer's update on its own.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY, bias_correction=False, global_clipnorm=CLIP_NORM,
                 sum_replica_gradients=True, jit_update=False, **kwargs):
        super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm, **kwargs)
        self.jit_update = jit_update
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.bias_correction = bias_correction
        self.sum_replica_gradients = sum_replica_gradients

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        self._decay = [self.decays(v) for v in var_list]

    def decays(self, variable):
        """Whether weight decay applies to `variable` (a Keras variable, matched by path, or a name string)."""
        return bool(self.weight_decay_rate) and not matches(variable, self.exclude_from_weight_decay)

    def _all_reduce_sum_gradients(self, grads_and_vars):  # overrides Keras's TensorFlow-backend hook
        if self.sum_replica_gradients:
            return super()._all_reduce_sum_gradients(grads_and_vars)
        return list(grads_and_vars)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):  # overrides Keras's
        # TensorFlow-backend hook. Keras runs it in the strategy's cross-replica context (a merge_call, outside any
        # compiled function), and it calls `distribution.extended.update(variable, update_step)` for each variable:
        # on each device, in that device's UpdateContext, where every read and write of a mirrored variable is
        # that device's copy. With jit_update it calls `extended.update` once and runs `device_update` there.
        if not self.jit_update:
            return super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
        grads, variables = zip(*grads_and_vars)
        distribution.extended.update(
            variables[0], lambda _, grads, learning_rate: self.device_update(variables)(grads, learning_rate),
            args=(list(grads), learning_rate), group=False)

    def device_update(self, variables):
        """A new XLA-compiled function of (gradients, learning_rate) that calls `update_step` for each of
        `variables`: the optimizer's update of one device in one program (`jit_update`). Traced where it is first
        called (in a device's UpdateContext: that device's copies; a function per device); it holds no all-reduce
        or merge_call, since the gradients and the learning rate given are the device's."""
        def update(grads, learning_rate):
            for gradient, variable in zip(grads, variables):
                self.update_step(gradient, variable, learning_rate)
        return tf.function(update, jit_compile=True, autograph=False)

    def _adam_update(self, gradient, variable):
        """Advances the moments of `variable` by `gradient`; returns m_hat / (sqrt(v_hat) + epsilon), plus
        weight_decay_rate * variable where it decays (the variable's shape, before the learning rate)."""
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        gradient = ops.cast(gradient, variable.dtype)
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        m_hat, v_hat = m, v
        if self.bias_correction:
            step = ops.cast(self.iterations + 1, variable.dtype)
            m_hat = m / (1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
            v_hat = v / (1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if self._decay[index]:
            update = update + self.weight_decay_rate * variable
        return update

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
                "bias_correction": self.bias_correction, "sum_replica_gradients": self.sum_replica_gradients,
                "jit_update": self.jit_update}


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(BertOptimizer):
    """The original AdamWeightDecayOptimizer as a Keras 3 optimizer (see the module docstring): w -= lr * update.

    Takes BertOptimizer's arguments; by default the original's exact mode (no bias correction).
    fused: without bias correction, apply the update with TensorFlow's fused Adam kernel (`_fused_update`): one
    pass over the variable and its moments, the same update to float32 rounding but for 1 - beta_2. False: the
    element-wise ops, the original's arithmetic step by step.
    """

    def __init__(self, *args, fused=True, name="AdamWeightDecay", **kwargs):
        super().__init__(*args, name=name, **kwargs)
        self.fused = fused
        self._scalars = None

    def apply(self, grads, trainable_variables=None):
        """Keras's `apply`; the fused kernel's scalar constants are made once per update and device (a graph
        traces 5 of them, not 5 per variable: ~500 graph nodes less for BERT, traced and optimized sooner)."""
        self._scalars = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._scalars = None

    def update_step(self, gradient, variable, learning_rate):
        learning_rate = ops.cast(learning_rate, variable.dtype)
        if self.fused and not self.bias_correction:
            self._fused_update(gradient, variable, learning_rate)
        else:
            self.assign_sub(variable, learning_rate * self._adam_update(gradient, variable))

    def _fused_update(self, gradient, variable, learning_rate):
        """The update by ResourceApplyAdam: the moments and the variable in one pass over them, where the
        element-wise ops of `_adam_update` make a dozen. With beta powers 0 its step size is learning_rate exactly
        (no bias correction). The weight decay, learning_rate * weight_decay_rate * w, is subtracted first: the
        Adam part does not read w. The kernel takes 1 - beta_2 in float32 (9.9998713e-4, where the original's
        float64 constant rounds to 1e-3), so v and the update differ from the original's by up to 1.3e-5 and 6.4e-6
        relative, besides float32 rounding."""
        index = self._get_variable_index(variable)
        variable = _tf_variable(variable)
        if self._decay[index]:
            variable.assign_sub(learning_rate * (self.weight_decay_rate * variable))
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=_tf_variable(self._m[index]).handle, v=_tf_variable(self._v[index]).handle,
            lr=learning_rate, grad=tf.convert_to_tensor(gradient, variable.dtype), **self._adam_scalars(variable))

    def _adam_scalars(self, variable):
        """ResourceApplyAdam's constant arguments for `variable`'s dtype (beta powers 0: no bias correction),
        shared by the variables of one update on one device."""
        key = (variable.dtype, variable.device)
        scalars = (self._scalars or {}).get(key)
        if scalars is None:
            with tf.device(variable.device):
                scalars = {name: tf.constant(value, variable.dtype) for name, value in (
                    ("beta1_power", 0.0), ("beta2_power", 0.0), ("beta1", self.beta_1), ("beta2", self.beta_2),
                    ("epsilon", self.epsilon))}
            if self._scalars is not None:  # inside `apply`
                self._scalars[key] = scalars
        return scalars

    def get_config(self):
        return {**super().get_config(), "fused": self.fused}


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(BertOptimizer):
    """NVIDIA's LAMBOptimizer as a Keras 3 optimizer (see the module docstring): w -= ratio * lr * update, with the
    trust ratio ||w|| / ||update|| (1.0 where either is 0) for every variable whose Keras path matches none of
    `exclude_from_layer_adaptation` (NVIDIA's: none), 1.0 for the others.

    Takes BertOptimizer's arguments; by default NVIDIA's (bias-corrected moments).
    """

    def __init__(self, *args, bias_correction=True, exclude_from_layer_adaptation=(), name="Lamb", **kwargs):
        super().__init__(*args, bias_correction=bias_correction, name=name, **kwargs)
        self.exclude_from_layer_adaptation = tuple(exclude_from_layer_adaptation or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapt = [self.adapts(v) for v in var_list]

    def adapts(self, variable):
        """Whether the trust ratio scales the update of `variable` (a Keras variable, by path, or a name string)."""
        return not matches(variable, self.exclude_from_layer_adaptation)

    def update_step(self, gradient, variable, learning_rate):
        update = self._adam_update(gradient, variable)
        lr = ops.cast(learning_rate, variable.dtype)
        if self._adapt[self._get_variable_index(variable)]:
            w_norm, u_norm = ops.norm(ops.reshape(variable, [-1])), ops.norm(ops.reshape(update, [-1]))
            lr = lr * ops.where(ops.logical_and(w_norm > 0, u_norm > 0), w_norm / u_norm, 1.0)
        self.assign_sub(variable, lr * update)

    def get_config(self):
        return {**super().get_config(), "exclude_from_layer_adaptation": list(self.exclude_from_layer_adaptation)}


def _tf_variable(variable):
    """The tf.Variable behind a Keras variable (under tf.distribute, in an update: this device's)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def clip_by_global_norm(grads, norm, clip_norm=CLIP_NORM):
    """`grads` (IndexedSlices made dense) clipped to global norm `clip_norm`, given their global norm `norm`.

    The optimizer's own clipping (Keras `clip_by_global_norm`, whose norm is bitwise TensorFlow's `global_norm`)
    without computing the norm a second time: one pass less over every gradient. The same numbers but for float32
    rounding where TensorFlow's graph optimizer orders a product differently (1 ulp, rarely). Under loss scaling
    `grads` are scaled and `norm` is not; the scale, a power of two, commutes exactly.
    """
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)
    scale = scale + (norm - norm)  # NaN for a non-finite norm, as Keras's
    return [tf.convert_to_tensor(g) * scale for g in grads]


def learning_rate_schedule(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw"):
    """The schedule `create_optimizer` gives `optimizer`: warmup, then linear decay (adamw, the original's) or
    decay with power 0.5 (lamb, NVIDIA's)."""
    if optimizer == "adamw":
        return WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer == "lamb":
        return WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps, power=LAMB_DECAY_POWER)
    raise ValueError(f"Unknown optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZERS)}.")


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, bias_correction=False, weight_decay_rate=0.01,
                     sum_replica_gradients=True, optimizer="adamw", global_clipnorm=CLIP_NORM, fused=True):
    """The pretraining/fine-tuning optimizer on its schedule (`learning_rate_schedule`).

    optimizer: "adamw", the original's AdamWeightDecay (bias correction per `bias_correction`); "lamb", NVIDIA's
    recipe (LAMB, always bias-corrected as NVIDIA's: `bias_correction` is AdamWeightDecay's alone).
    global_clipnorm: the optimizer clips the gradients to this global norm (the original's 1.0); None for a caller
    that clips them itself (bert_tf.training.trainer).
    fused: AdamWeightDecay's (its fused kernel where there is no bias correction); lamb has none.
    """
    schedule = learning_rate_schedule(init_lr, num_train_steps, num_warmup_steps, optimizer)
    common = {"learning_rate": schedule, "weight_decay_rate": weight_decay_rate,
              "sum_replica_gradients": sum_replica_gradients, "global_clipnorm": global_clipnorm}
    if optimizer == "lamb":
        return Lamb(**common)
    return AdamWeightDecay(bias_correction=bias_correction, fused=fused, **common)
