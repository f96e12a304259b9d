"""The original's AdamWeightDecay and NVIDIA's LAMB recipe (`create_optimizer(optimizer=...)`), as Keras 3 optimizers.

| | "adamw": google-research/bert's | "lamb": NVIDIA DeepLearningExamples' |
|---|---|---|
| rate at update t (from 0) | init_lr * t / warmup, then init_lr * (1 - t / num_train_steps) | the same, ** 0.5 |
| Adam (0.9, 0.999, 1e-6) | no bias correction (`bias_correction=True`: Adam's) | bias-corrected, t counting this one |
| update | w -= lr * (m / (sqrt(v) + eps) + 0.01 * w) | the same times ||w|| / ||update|| (1 where 0) |

Both clip gradients to global norm 1.0 and decay every variable whose name matches none of "LayerNorm", "layer_norm",
"bias". `learning_rate_multipliers` ({variable path: m}, bert_tf.training.layers) scale a variable's rate and its weight
decay. Unlike NVIDIA's, gradient accumulation clips the sum, not each micro-batch.
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
    """init_lr * step / num_warmup_steps during warmup, then init_lr * (1 - step / num_train_steps) ** power, >= 0."""

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


def matches(variable, patterns):
    """Whether `variable` (a Keras variable or a name) re.search-es any of `patterns`, as the original."""
    name = variable if isinstance(variable, str) else variable.path
    return any(re.search(p, name) for p in patterns)


class BertOptimizer(keras.optimizers.Optimizer):
    """What AdamWeightDecay and Lamb share: slots `adam_m` / `adam_v`, decoupled weight decay, global-norm clipping.

    `sum_replica_gradients=False`: gradients come already summed over replicas, so clipping sees the whole batch's
    (`bert_tf.training.update`). `jit_update`: each device's update in one XLA program (`device_update`).
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY, bias_correction=False, global_clipnorm=CLIP_NORM,
                 sum_replica_gradients=True, jit_update=False, learning_rate_multipliers=None, **kwargs):
        super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm, **kwargs)
        self.jit_update = jit_update
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.bias_correction = bias_correction
        self.sum_replica_gradients = sum_replica_gradients
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        self._decay = [self.decays(v) for v in var_list]
        self._multiplier = [float(self.learning_rate_multipliers.get(v.path, 1.0)) for v in var_list]

    def decays(self, variable):
        return bool(self.weight_decay_rate) and not matches(variable, self.exclude_from_weight_decay)

    def _all_reduce_sum_gradients(self, grads_and_vars):  # overrides Keras's TensorFlow-backend hook
        if self.sum_replica_gradients:
            return super()._all_reduce_sum_gradients(grads_and_vars)
        return list(grads_and_vars)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):  # overrides Keras's
        # TensorFlow-backend hook: Keras calls `extended.update` per variable; jit_update once, for `device_update`.
        if not self.jit_update:
            return super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
        grads, variables = zip(*grads_and_vars)
        distribution.extended.update(
            variables[0], lambda _, grads, learning_rate: self.device_update(variables)(grads, learning_rate),
            args=(list(grads), learning_rate), group=False)

    def device_update(self, variables):
        """An XLA-compiled fn(gradients, learning_rate) running `update_step` for each of `variables` on one device,
        with that device's gradients (no all-reduce inside)."""
        def update(grads, learning_rate):
            for gradient, variable in zip(grads, variables):
                self.update_step(gradient, variable, learning_rate)
        return tf.function(update, jit_compile=True, autograph=False)

    def variable_rate(self, learning_rate, variable):
        """`learning_rate` in `variable`'s dtype, times its multiplier."""
        learning_rate = ops.cast(learning_rate, variable.dtype)
        multiplier = self._multiplier[self._get_variable_index(variable)]
        return learning_rate if multiplier == 1.0 else learning_rate * multiplier

    def _adam_update(self, gradient, variable):
        """Advances the moments; returns m_hat / (sqrt(v_hat) + epsilon) (+ weight decay), before lr."""
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
        # Adding the square of the weights to the loss is not the correct L2 regularization with Adam: it would
        # interact with m and v. Decaying the weights beside the Adam step (as the original does) equals L2 with
        # plain SGD.
        if self._decay[index]:
            update = update + self.weight_decay_rate * variable
        return update

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
                "bias_correction": self.bias_correction, "sum_replica_gradients": self.sum_replica_gradients,
                "jit_update": self.jit_update, "learning_rate_multipliers": self.learning_rate_multipliers}


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(BertOptimizer):
    """The original AdamWeightDecayOptimizer (by default without bias correction).

    `fused` (without bias correction): TensorFlow's fused Adam kernel, the same update to float32 rounding; False: the
    original's arithmetic step by step.
    """

    def __init__(self, *args, fused=True, name="AdamWeightDecay", **kwargs):
        super().__init__(*args, name=name, **kwargs)
        self.fused = fused
        self._scalars = None

    def apply(self, grads, trainable_variables=None):  # Keras's, making the fused kernel's scalars once per update
        self._scalars = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._scalars = None

    def update_step(self, gradient, variable, learning_rate):
        learning_rate = self.variable_rate(learning_rate, variable)
        if self.fused and not self.bias_correction:
            self._fused_update(gradient, variable, learning_rate)
        else:
            self.assign_sub(variable, learning_rate * self._adam_update(gradient, variable))

    def _fused_update(self, gradient, variable, learning_rate):
        """The update by ResourceApplyAdam (beta powers 0 make its step learning_rate exactly), the decay subtracted
        first."""
        index = self._get_variable_index(variable)
        variable = _tf_variable(variable)
        if self._decay[index]:
            variable.assign_sub(learning_rate * (self.weight_decay_rate * variable))
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=_tf_variable(self._m[index]).handle, v=_tf_variable(self._v[index]).handle,
            lr=learning_rate, grad=tf.convert_to_tensor(gradient, variable.dtype), **self._adam_scalars(variable))

    def _adam_scalars(self, variable):
        """ResourceApplyAdam's constant arguments, shared by the variables of one update on one device."""
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
    """NVIDIA's LAMBOptimizer: the trust ratio for every variable matching none of `exclude_from_layer_adaptation`."""

    def __init__(self, *args, bias_correction=True, exclude_from_layer_adaptation=(), name="Lamb", **kwargs):
        super().__init__(*args, bias_correction=bias_correction, name=name, **kwargs)
        self.exclude_from_layer_adaptation = tuple(exclude_from_layer_adaptation or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapt = [self.adapts(v) for v in var_list]

    def adapts(self, variable):
        """Whether the trust ratio scales the update of `variable`."""
        return not matches(variable, self.exclude_from_layer_adaptation)

    def update_step(self, gradient, variable, learning_rate):
        update = self._adam_update(gradient, variable)
        lr = self.variable_rate(learning_rate, variable)
        if self._adapt[self._get_variable_index(variable)]:
            w_norm, u_norm = ops.norm(ops.reshape(variable, [-1])), ops.norm(ops.reshape(update, [-1]))
            lr = lr * ops.where(ops.logical_and(w_norm > 0, u_norm > 0), w_norm / u_norm, 1.0)
        self.assign_sub(variable, lr * update)

    def get_config(self):
        return {**super().get_config(), "exclude_from_layer_adaptation": list(self.exclude_from_layer_adaptation)}


def _tf_variable(variable):
    """The tf.Variable behind a Keras variable (under tf.distribute, in an update: this device's)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def clip_by_global_norm(grads, norm):
    """Keras's global-norm clipping of `grads` to CLIP_NORM given their `norm`. Under loss scaling `grads` are scaled
    and `norm` is not; the power-of-two scale commutes exactly."""
    scale = CLIP_NORM * tf.minimum(1.0 / norm, 1.0 / CLIP_NORM)
    scale = scale + (norm - norm)  # NaN for a non-finite norm, as Keras's
    return [tf.convert_to_tensor(g) * scale for g in grads]


def learning_rate_schedule(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw"):
    """The schedule `create_optimizer` gives `optimizer` (see the module docstring)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZERS)}.")
    return WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps,
                                 power=LAMB_DECAY_POWER if optimizer == "lamb" else 1.0)


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, bias_correction=False, weight_decay_rate=0.01,
                     sum_replica_gradients=True, optimizer="adamw", global_clipnorm=CLIP_NORM, fused=True,
                     learning_rate_multipliers=None):
    """The pretraining/fine-tuning optimizer on its schedule. `bias_correction` and `fused`: adamw only;
    `global_clipnorm=None` for a caller that clips itself (bert_tf.training.update)."""
    schedule = learning_rate_schedule(init_lr, num_train_steps, num_warmup_steps, optimizer)
    common = {"learning_rate": schedule, "weight_decay_rate": weight_decay_rate,
              "sum_replica_gradients": sum_replica_gradients, "global_clipnorm": global_clipnorm,
              "learning_rate_multipliers": learning_rate_multipliers}
    if optimizer == "lamb":
        return Lamb(**common)
    return AdamWeightDecay(bias_correction=bias_correction, fused=fused, **common)
