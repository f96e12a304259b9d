"""One training update on a replica: micro-batch accumulation, the all-reduce over replicas, clipping, the optimizer.

Gradients are summed over micro-batches and replicas, then clipped to global norm 1.0 and applied once, so every
strategy and accumulation computes the whole batch's update. Loss terms are shares of the update's figures
(bert_tf.training.losses). With `use_xla`, only programs holding no all-reduce compile (`xla_programs`).
"""
import functools

import keras
import tensorflow as tf
from absl import logging

from bert_tf.training import layers, losses, optimization


def build_optimizer(strategy, model, config, num_train_steps, num_warmup_steps):
    """`config`'s optimizer for `model`'s trainable variables, in `strategy`'s scope; it applies the gradients as given
    (`Update` sums and clips), with loss scaling under mixed_float16."""
    multipliers = layers.learning_rate_multipliers(model, config.layerwise_lr_decay)  # all 1.0 by default
    with strategy.scope():
        optimizer = optimization.create_optimizer(config.learning_rate, num_train_steps, num_warmup_steps,
                                                  bias_correction=config.adam_bias_correction,
                                                  sum_replica_gradients=False, optimizer=config.optimizer,
                                                  global_clipnorm=None,  # Update.replica_step clips
                                                  fused=config.fused_adam, learning_rate_multipliers=multipliers)
        if config.mixed_precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return optimizer


def describe_strategy(strategy):
    """(kind as distribute.STRATEGIES names it, device type or "mixed", replicas in sync)."""
    kinds = ((tf.distribute.TPUStrategy, "tpu"), (tf.distribute.MultiWorkerMirroredStrategy, "multi_worker_mirrored"),
             (tf.distribute.MirroredStrategy, "mirrored"), (tf.distribute.OneDeviceStrategy, "one_device"))
    kind = next((name for cls, name in kinds if isinstance(strategy, cls)), type(strategy).__name__)
    device_types = {tf.DeviceSpec.from_string(device).device_type for device in strategy.extended.worker_devices}
    device_type = device_types.pop() if len(device_types) == 1 else "mixed"
    return kind, device_type, strategy.num_replicas_in_sync


def xla_programs(kind, device_type, num_replicas):
    """The programs --use_xla compiles (`programs`), none holding an all-reduce:

    - "whole": the whole update, on one GPU;
    - "gradients": each micro-batch's gradients, on CPUs (BENCHMARKS.md) and under TPUStrategy;
    - "replicas": each micro-batch's gradients and each device's optimizer update (`BertOptimizer.jit_update`), on
      several GPU replicas; the all-reduce and clipping run outside.
    """
    if kind == "tpu" or device_type != "GPU":
        return "gradients"
    return "whole" if num_replicas == 1 else "replicas"


def add_gradients(a, b):
    """The sum of two micro-batches' gradients; IndexedSlices are concatenated, as one batch gives them (the global norm
    counts each row)."""
    if a is None:
        return None
    if isinstance(a, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0), tf.concat([a.indices, b.indices], 0),
                                a.dense_shape)
    return a + b


def gradients(model, loss, optimizer, features, labels, totals):
    """(shares, gradients) of one micro-batch: its shares of the update's figures given `totals`, and the gradients of
    its loss share (scaled under mixed_float16)."""
    variables = model.trainable_variables
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([v.value for v in variables])
        outputs = model(features, training=True)
        shares = losses.shares(loss, labels, outputs, totals)
        scaled = optimizer.scale_loss(shares["loss"])
    return shares, tape.gradient(scaled, variables)


class Update:
    """The update step of `model` under `strategy`, `replica_step`, run on each replica; `programs` is for tests."""

    def __init__(self, strategy, model, loss, optimizer, accumulation=1, use_xla=False, programs=None):
        self.strategy = strategy
        self.model = model
        self.loss = loss
        self.optimizer = optimizer
        self.gradients_fn = functools.partial(gradients, model, loss, optimizer)
        self.accumulation = accumulation
        replicas = strategy.num_replicas_in_sync
        programs = programs or xla_programs(*describe_strategy(strategy))
        compiled = {"whole": "the whole update as one program", "gradients": "each micro-batch's gradients",
                    "replicas": "each micro-batch's gradients and the optimizer's update on each device"}
        if programs not in compiled:
            raise ValueError(f"Unknown XLA programs {programs!r}: expected one of {', '.join(compiled)}.")
        if programs == "whole" and replicas > 1:
            raise ValueError("The whole update compiles as one program on one replica only: with several, the "
                             "all-reduce would run inside it.")
        self.programs = programs if use_xla else None
        inner = getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer
        if isinstance(inner, optimization.BertOptimizer):
            inner.jit_update = self.programs == "replicas"
        elif self.programs == "replicas":
            raise ValueError(f"The optimizer's update compiles for a BertOptimizer only, not {type(inner).__name__}.")
        # The compiled update (None: not compiled as a whole). `reduce_retracing`: batches whose length varies
        # share one trace, compiled once per length.
        self.compiled_step = (tf.function(self.step, jit_compile=True, reduce_retracing=True, autograph=False)
                              if self.programs == "whole" else None)
        self.replica_step = self.compiled_step or self.step  # what each replica runs
        if use_xla:
            outside = ", ".join(["the all-reduce"] * (replicas > 1) + ["clipping"]
                                + ["the optimizer's update"] * (programs == "gradients"))
            description = compiled[programs] + ("" if programs == "whole" else f"; outside XLA: {outside}")
            logging.info("XLA compiles %s (%s: %d replica(s) on %s).", description, type(strategy).__name__,
                         replicas, ", ".join(strategy.extended.worker_devices))

    # The step, the model and the losses hold no control flow on tensors: traced as plain Python, sooner.
    @tf.autograph.experimental.do_not_convert
    def step(self, inputs):
        """One update on this replica -> (its shares of the figures, the global gradient norm). Variables without a
        gradient are left untouched, weight decay included, as the original."""
        features, labels = inputs
        context = tf.distribute.get_replica_context()
        replicated = self.strategy.num_replicas_in_sync > 1
        totals = losses.sums(self.loss, self.loss.weights(labels))
        if replicated:
            totals = context.all_reduce(tf.distribute.ReduceOp.SUM, totals)
        shares, grads = self._accumulate(features, labels, totals)
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None]
        grads = [g for g, _ in pairs]
        if replicated:  # IndexedSlices are gathered: their rows are the whole batch's, as on one device
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        norm = tf.linalg.global_norm(grads)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            norm = norm / tf.cast(self.optimizer.dynamic_scale, tf.float32)
        self.optimizer.apply_gradients(zip(optimization.clip_by_global_norm(grads, norm), [v for _, v in pairs]))
        return shares, norm

    def _accumulate(self, features, labels, totals):
        """(shares, gradients) summed over the `accumulation` micro-batches of this replica's batch."""
        n = self.accumulation
        gradients_fn = self.gradients_fn
        if self.compiled_step is None:  # a function call per micro-batch (compiled under --use_xla);
            # inside the compiled update a nested function would make XLA compile the update again at every call
            gradients_fn = tf.function(gradients_fn, jit_compile=self.programs is not None, reduce_retracing=True,
                                       autograph=False)
        if n == 1:
            return gradients_fn(features, labels, totals)
        split = lambda t: tf.reshape(t, tf.concat([[n, -1], tf.shape(t)[1:]], 0))
        micro = tf.nest.map_structure(split, (features, labels))
        shares, grads = gradients_fn(*tf.nest.map_structure(lambda t: t[0], micro), totals)
        for i in range(1, n):  # unrolled: n is small, and the calls run in order (they read variables)
            micro_shares, micro_grads = gradients_fn(*tf.nest.map_structure(lambda t, i=i: t[i], micro), totals)
            shares = {name: value + micro_shares[name] for name, value in shares.items()}
            grads = [add_gradients(g, mg) for g, mg in zip(grads, micro_grads)]
        return shares, grads
