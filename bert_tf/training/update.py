"""One training update on a replica: micro-batch accumulation, the all-reduce over replicas, clipping, the optimizer.

The gradients of an update are summed over its micro-batches and over the replicas before they are clipped to
global norm 1.0 and applied once, so that every strategy and accumulation computes the update of one device on the
whole batch. The loss terms and metrics are shares of the whole update's figures (bert_tf.training.losses).

With XLA (`use_xla`) on GPUs the whole update is one XLA program (`compiles_whole_step`): forward, losses, backward,
the accumulation over micro-batches, the all-reduce, the global norm, clipping, loss scaling and the optimizer's
update. XLA then fuses the optimizer's element-wise work with the gradients' and keeps no gradient in memory between
two programs. Elsewhere only the gradients of each micro-batch are compiled: on the CPU the whole program was slower
(fine-tuning MiniLM on real texts: 58 against 66 examples/s; BENCHMARKS.md, "The XLA training step on GPUs").
"""
import keras
import tensorflow as tf
from absl import logging

from bert_tf.training import losses, optimization


def build_optimizer(strategy, model, config, num_train_steps, num_warmup_steps):
    """The optimizer of `config` (a TrainingConfig) for `model`'s trainable variables, built in `strategy`'s scope:
    it applies the gradients as given (`Update` sums and clips them), under mixed_float16 with loss scaling."""
    with strategy.scope():
        optimizer = optimization.create_optimizer(config.learning_rate, num_train_steps, num_warmup_steps,
                                                  bias_correction=config.adam_bias_correction,
                                                  sum_replica_gradients=False, optimizer=config.optimizer,
                                                  global_clipnorm=None,  # Update.replica_step clips
                                                  fused=config.fused_adam)
        if config.mixed_precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return optimizer


def compiles_whole_step(strategy):
    """Whether --use_xla compiles a replica's whole update as one XLA program (`Update`) under `strategy`: when every
    replica is a GPU (several GPUs' MirroredStrategy and MultiWorkerMirroredStrategy then all-reduce with XLA's
    collective ops instead of a merge_call, which cannot run inside a compiled function). Not on the CPU, where it
    was slower, and where several replicas would need a merge_call; not under TPUStrategy, which compiles the
    replica's step with XLA itself."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return False
    return all(tf.DeviceSpec.from_string(device).device_type == "GPU" for device in strategy.extended.worker_devices)


def add_gradients(a, b):
    """The gradient of two micro-batches: the sum, or for the embedding tables' IndexedSlices the concatenation of
    their rows, which is what one batch of both gives (the original's global norm, TensorFlow's and Keras's count
    each row of an IndexedSlices: a token used twice adds two rows, not one summed row)."""
    if a is None:
        return None
    if isinstance(a, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0), tf.concat([a.indices, b.indices], 0),
                                a.dense_shape)
    return a + b


def gradients(model, loss, optimizer, features, labels, totals):
    """(shares, gradients) of one micro-batch: its share of each loss term and metric of `loss` (a batch loss), the
    whole update's summed weights being `totals` (bert_tf.training.losses), so that summing over micro-batches and
    replicas gives the figures of the whole batch; gradients of the loss share (scaled under mixed_float16)."""
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        outputs = model(features, training=True)
        shares = losses.shares(loss, labels, outputs, totals)
        scaled = optimizer.scale_loss(shares["loss"])
    return shares, tape.gradient(scaled, variables)


class Update:
    """The update step of `model` under `strategy`: `replica_step` runs on each replica (`strategy.run`).

    `gradients_fn(features, labels, totals)`: one micro-batch's (shares, gradients), as `gradients` gives them;
    `accumulation`: micro-batches per update; `use_xla`: compile the whole update (`compiled_step`) where
    `compiles_whole_step`, else each micro-batch's `gradients_fn`. `whole_step` True or False decides instead (to
    test or measure either program on one device); True with several replicas needs GPUs.
    """

    def __init__(self, strategy, model, loss, optimizer, gradients_fn, accumulation=1, use_xla=False,
                 whole_step=None):
        self.strategy = strategy
        self.model = model
        self.loss = loss
        self.optimizer = optimizer
        self.gradients_fn = gradients_fn
        self.accumulation = accumulation
        self.use_xla = use_xla
        # The compiled update (None: not compiled as a whole). `reduce_retracing`: batches whose length varies
        # share one trace, compiled once per length.
        self.compiled_step = None
        whole = compiles_whole_step(strategy) if whole_step is None else whole_step
        if whole and strategy.num_replicas_in_sync > 1 and not compiles_whole_step(strategy):
            raise ValueError("whole_step=True with several replicas needs GPU replicas: the all-reduce of CPU "
                             "replicas cannot run inside a compiled function.")
        if use_xla and whole:
            self.compiled_step = tf.function(self.step, jit_compile=True, reduce_retracing=True, autograph=False)
        elif use_xla:
            logging.info("XLA compiles the gradients of each micro-batch; the all-reduce and the optimizer's update "
                         "run outside (%s on %s).", type(strategy).__name__,
                         ", ".join(strategy.extended.worker_devices))

    def replica_step(self, inputs):
        """One update on this replica (`strategy.run`): `step`, compiled as one XLA program where it can be."""
        return (self.compiled_step or self.step)(inputs)

    # The step, the model and the losses hold no control flow on tensors: traced as plain Python (autograph off
    # here and in the gradient, evaluation and prediction functions), the first loop traces ~0.7 s sooner.
    @tf.autograph.experimental.do_not_convert
    def step(self, inputs):
        """One update on this replica: `accumulation` micro-batches, gradients summed over them and over the
        replicas, clipped to global norm 1.0 and applied once. Returns (this replica's shares of the figures, the
        global gradient norm).

        Variables without a gradient (e.g. the pooler under a span head) are left untouched, as the original
        skips them; so they also get no weight decay.
        """
        features, labels = inputs
        context = tf.distribute.get_replica_context()
        replicated = self.strategy.num_replicas_in_sync > 1
        totals = losses.weight_totals(self.loss, labels)
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
        if self.compiled_step is None:  # a function call per micro-batch (compiled with use_xla); inside the
            # compiled update a nested function would make XLA compile the update again at every call
            gradients_fn = tf.function(gradients_fn, jit_compile=self.use_xla, reduce_retracing=True, autograph=False)
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
