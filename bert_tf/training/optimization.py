"""The original's optimization: linear warmup then linear decay to 0, Adam with decoupled weight decay.

Original semantics (optimization.py of google-research/bert):
- learning rate at step t (t = updates done so far, starting at 0): init_lr * t / warmup while t < warmup, else
  init_lr * (1 - t / num_train_steps) (clamped at 0);
- gradients clipped to global norm 1.0;
- Adam with beta_1 0.9, beta_2 0.999, epsilon 1e-6 and **no bias correction**; weight decay 0.01 added to the
  update (decoupled, scaled by the learning rate) for every variable whose name matches none of
  "LayerNorm", "layer_norm", "bias".
`bias_correction=False` (the default) is that exact mode; `bias_correction=True` gives standard Adam(W) moments.
"""
import re

import keras
from keras import ops

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """init_lr * step / num_warmup_steps during warmup, then init_lr * (1 - step / num_train_steps), >= 0."""

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decayed = self.init_lr * (1.0 - ops.minimum(step, float(self.num_train_steps)) / self.num_train_steps)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


class BertOptimizer(keras.optimizers.Optimizer):
    """A Keras 3 optimizer whose gradients may come already summed over the tf.distribute replicas.

    Keras sums the replicas' gradients inside `apply_gradients`, after clipping each replica's part by its own
    global norm. `bert_tf.training.trainer.Trainer` sums them first and builds its optimizer with
    `sum_replica_gradients=False`, so that global-norm clipping sees the gradient of the whole batch, as on one
    device.
    """

    def __init__(self, *args, sum_replica_gradients=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.sum_replica_gradients = sum_replica_gradients

    def _all_reduce_sum_gradients(self, grads_and_vars):  # overrides Keras's TensorFlow-backend hook
        if self.sum_replica_gradients:
            return super()._all_reduce_sum_gradients(grads_and_vars)
        return list(grads_and_vars)

    def get_config(self):
        return {**super().get_config(), "sum_replica_gradients": self.sum_replica_gradients}


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(BertOptimizer):
    """The original AdamWeightDecayOptimizer as a Keras 3 optimizer (see the module docstring).

    Variables are matched for weight decay by their Keras path (e.g. `layer_0/attention/LayerNorm/gamma`), which
    carries the original's layer names. Slots are named `adam_m` and `adam_v` as in the original.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY, bias_correction=False, global_clipnorm=1.0,
                 name="AdamWeightDecay", **kwargs):
        super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.bias_correction = bias_correction

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        self._decay = [self.decays(v) for v in var_list]

    def decays(self, variable):
        """Whether weight decay applies to `variable` (a Keras variable, matched by path, or a name string)."""
        name = variable if isinstance(variable, str) else variable.path
        return bool(self.weight_decay_rate) and not any(re.search(p, name) for p in self.exclude_from_weight_decay)

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        lr = ops.cast(learning_rate, variable.dtype)
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
        self.assign_sub(variable, lr * update)

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
                "bias_correction": self.bias_correction}


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, bias_correction=False, weight_decay_rate=0.01,
                     sum_replica_gradients=True):
    """The original's fine-tuning/pretraining optimizer: AdamWeightDecay on a warmup + linear decay schedule."""
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=weight_decay_rate,
                           bias_correction=bias_correction, sum_replica_gradients=sum_replica_gradients)
