"""The training loop shared by every run script: tf.distribute, accumulation, checkpoints, summaries, progress.

A task gives three things:
  build_model()                 -> a Keras task model from bert_tf.heads (built inside the strategy scope)
  loss_fn(labels, outputs)      -> per-example loss [B] float32 (dicts of tensors in, as the dataset/model give)
  dataset_fn(batch_size, ctx)   -> tf.data.Dataset of (features, labels) batches of `batch_size`, repeated
Then `Trainer.train` runs the original's optimizer (bert_tf.training.optimization) for num_train_steps updates,
saving `output_dir/ckpt-<step>` every save_checkpoints_steps and at the end. A run restarted with the same
output_dir resumes from its last checkpoint (and skips the batches it already used); otherwise the model starts
from `init_checkpoint`: an original TF1 BERT checkpoint or one of ours.
"""
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints
from bert_tf.training import distribute, optimization


def compute_train_steps(num_examples, train_batch_size, num_train_epochs, warmup_proportion):
    """The original's arithmetic: (num_train_steps, num_warmup_steps)."""
    num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
    if num_train_steps <= 0:
        raise ValueError(f"No training steps: {num_examples} examples, batch size {train_batch_size}, "
                         f"{num_train_epochs} epochs.")
    return num_train_steps, int(num_train_steps * warmup_proportion)


def _trackables(model):
    """The objects a checkpoint names: the encoder and each head by its attribute (what `checkpoints.restore`
    reads), plus the whole model."""
    return {"model": model, **checkpoints.model_parts(model)}


class Trainer:
    """Trains and runs one task model under a tf.distribute strategy (see the module docstring)."""

    def __init__(self, build_model, loss_fn, output_dir, *, strategy=None, init_checkpoint=None,
                 learning_rate=5e-5, save_checkpoints_steps=1000, iterations_per_loop=1000,
                 gradient_accumulation_steps=1, mixed_precision="float32", use_xla=False,
                 adam_bias_correction=False, keep_checkpoint_max=5):
        if not output_dir:
            raise ValueError("output_dir is required.")
        if gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}.")
        self.output_dir = output_dir
        self.init_checkpoint = init_checkpoint
        self.learning_rate = learning_rate
        self.save_checkpoints_steps = max(1, save_checkpoints_steps)
        self.iterations_per_loop = max(1, iterations_per_loop)
        self.accumulation = gradient_accumulation_steps
        self.mixed_precision = distribute.set_precision(mixed_precision)
        self.use_xla = use_xla
        self.adam_bias_correction = adam_bias_correction
        self.keep_checkpoint_max = keep_checkpoint_max
        self.loss_fn = loss_fn
        self.strategy = strategy or distribute.get_strategy("auto")
        with self.strategy.scope():
            self.model = build_model()
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.optimizer = None
        tf.io.gfile.makedirs(output_dir)

    @classmethod
    def from_flags(cls, flag_values, build_model, loss_fn):
        """A Trainer configured by the shared flags of bert_tf.flags."""
        return cls(build_model, loss_fn, flag_values.output_dir,
                   strategy=distribute.strategy_from_flags(flag_values),
                   init_checkpoint=flag_values.init_checkpoint, learning_rate=flag_values.learning_rate,
                   save_checkpoints_steps=flag_values.save_checkpoints_steps,
                   iterations_per_loop=flag_values.iterations_per_loop,
                   gradient_accumulation_steps=flag_values.gradient_accumulation_steps,
                   mixed_precision=flag_values.mixed_precision, use_xla=flag_values.use_xla,
                   adam_bias_correction=flag_values.adam_bias_correction,
                   keep_checkpoint_max=flag_values.keep_checkpoint_max)

    # --- checkpoints ---------------------------------------------------------------------------------------

    def _checkpoint(self):
        parts = _trackables(self.model)
        if self.optimizer is not None:
            parts["optimizer"] = self.optimizer
        return tf.train.Checkpoint(global_step=self.global_step, **parts)

    def _manager(self):
        return tf.train.CheckpointManager(self._checkpoint(), self.output_dir, self.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint of output_dir)."""
        return int(self.global_step.numpy())

    def latest_checkpoint(self):
        return tf.train.latest_checkpoint(self.output_dir)

    def load_init_checkpoint(self, path):
        """Initializes from an original TF1 checkpoint or one of ours (`checkpoints.restore`).

        Returns the names of the task heads the checkpoint did not provide.
        """
        return checkpoints.restore(self.model, path).missing_heads

    def restore_for_predict(self, required_heads=()):
        """Loads the latest checkpoint of output_dir (and its step), else init_checkpoint; raises if a required
        head is absent. Returns the checkpoint used."""
        latest = self.latest_checkpoint()
        if latest:
            tf.train.Checkpoint(global_step=self.global_step).restore(latest).expect_partial()
            logging.info("Restoring %s (step %d)", latest, self.step)
        elif not self.init_checkpoint:
            raise ValueError(f"Nothing to predict with: no checkpoint in {self.output_dir} and no init_checkpoint.")
        checkpoints.restore(self.model, latest or self.init_checkpoint, required_heads)
        return latest or self.init_checkpoint

    def export_original_checkpoint(self, checkpoint_prefix):
        """Writes the (fine-tuned) model under the original TF1 variable names."""
        return checkpoints.save_original_checkpoint(self.model, checkpoint_prefix)

    # --- training ------------------------------------------------------------------------------------------

    def _build_optimizer(self, num_train_steps, num_warmup_steps):
        with self.strategy.scope():
            optimizer = optimization.create_optimizer(self.learning_rate, num_train_steps, num_warmup_steps,
                                                      bias_correction=self.adam_bias_correction)
            if self.mixed_precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)
        return optimizer

    def _restore_or_init(self):
        latest = self.latest_checkpoint()
        if latest:
            self._checkpoint().restore(latest).assert_existing_objects_matched()
            logging.info("Resuming from %s at step %d", latest, int(self.global_step.numpy()))
        elif self.init_checkpoint:
            self.load_init_checkpoint(self.init_checkpoint)
        return int(self.global_step.numpy())

    def _gradients(self, features, labels, global_batch_size):
        """(loss, gradients) of one micro-batch: its per-example losses summed / the whole update's batch size, so
        that summing over micro-batches and replicas gives the mean over the update's batch."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            per_example = tf.cast(self.loss_fn(labels, outputs), tf.float32)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
            scaled = self.optimizer.scale_loss(loss)
        return loss, tape.gradient(scaled, variables)

    def _replica_step(self, inputs, global_batch_size):
        """One update on this replica: `accumulation` micro-batches, gradients summed, applied once.

        Variables without a gradient (e.g. the pooler under a span head) are left untouched, as the original
        skips them; so they also get no weight decay.
        """
        features, labels = inputs
        n = self.accumulation
        gradients_fn = tf.function(self._gradients, jit_compile=self.use_xla, reduce_retracing=True)
        if n == 1:
            loss, grads = gradients_fn(features, labels, global_batch_size)
        else:
            split = lambda t: tf.reshape(t, tf.concat([[n, -1], tf.shape(t)[1:]], 0))  # noqa: E731
            micro = tf.nest.map_structure(split, (features, labels))
            loss, grads = gradients_fn(*tf.nest.map_structure(lambda t: t[0], micro), global_batch_size)
            grads = [g if g is None else tf.convert_to_tensor(g) for g in grads]  # embedding IndexedSlices
            for i in range(1, n):  # unrolled: n is small, and the calls run in order (they read variables)
                micro_loss, micro_grads = gradients_fn(*tf.nest.map_structure(lambda t: t[i], micro),
                                                       global_batch_size)
                loss += micro_loss
                grads = [g if g is None else g + mg for g, mg in zip(grads, micro_grads)]
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None])
        return loss

    def train(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps):
        """Trains until global_step == num_train_steps. Returns the last loss (mean over the last loop)."""
        replicas = self.strategy.num_replicas_in_sync
        if global_batch_size % (replicas * self.accumulation):
            raise ValueError(f"train_batch_size {global_batch_size} is not divisible by replicas ({replicas}) x "
                             f"gradient_accumulation_steps ({self.accumulation}).")
        self.optimizer = self._build_optimizer(num_train_steps, num_warmup_steps)
        step = self._restore_or_init()
        if step >= num_train_steps:
            logging.info("Training already finished (step %d of %d).", step, num_train_steps)
            return None
        per_replica = global_batch_size // replicas

        def input_fn(ctx):
            return dataset_fn(per_replica, ctx).skip(step)

        iterator = iter(self.strategy.distribute_datasets_from_function(input_fn))

        @tf.function
        def train_loop(iterator, steps):
            total = tf.constant(0.0)
            for _ in tf.range(steps):
                loss = self.strategy.run(self._replica_step, args=(next(iterator), global_batch_size))
                total += self.strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
                self.global_step.assign_add(1)
            return total / tf.cast(steps, tf.float32)

        manager = self._manager()
        writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "train"))
        schedule = optimization.WarmupLinearDecay(self.learning_rate, num_train_steps, num_warmup_steps)
        loss = None
        with tqdm(total=num_train_steps, initial=step, unit="step", desc="train", dynamic_ncols=True) as bar:
            while step < num_train_steps:
                chunk = min(self.iterations_per_loop, num_train_steps - step,
                            self.save_checkpoints_steps - step % self.save_checkpoints_steps)
                start = time.time()
                loss = float(train_loop(iterator, tf.constant(chunk)))
                elapsed = time.time() - start
                step = int(self.global_step.numpy())
                if not np.isfinite(loss):
                    raise FloatingPointError(f"Loss is {loss} at step {step}; last checkpoint: "
                                             f"{self.latest_checkpoint()}.")
                with writer.as_default(step=step):
                    tf.summary.scalar("loss", loss)
                    tf.summary.scalar("learning_rate", float(schedule(step - 1)))
                    tf.summary.scalar("examples_per_second", chunk * global_batch_size / elapsed)
                bar.update(chunk)
                bar.set_postfix(loss=f"{loss:.4f}")
                logging.info("step %d/%d loss %.4f (%.1f examples/s)", step, num_train_steps, loss,
                             chunk * global_batch_size / elapsed)
                if step % self.save_checkpoints_steps == 0 or step == num_train_steps:
                    logging.info("Saved %s", manager.save(checkpoint_number=step))
        writer.flush()
        return loss

    # --- inference -----------------------------------------------------------------------------------------

    def predict(self, dataset, with_loss=False):
        """Yields the model's outputs per batch as numpy dicts, in dataset order.

        `dataset` yields features dicts or (features, labels); with labels and `with_loss`, each dict also holds
        `per_example_loss` [B].
        """
        @tf.function(jit_compile=self.use_xla, reduce_retracing=True)
        def forward(features):
            return self.model(features, training=False)

        @tf.function(reduce_retracing=True)
        def forward_with_loss(features, labels):
            outputs = forward(features)
            return {**outputs, "per_example_loss": tf.cast(self.loss_fn(labels, outputs), tf.float32)}

        for batch in dataset:
            if isinstance(batch, tuple):
                features, labels = batch
                outputs = forward_with_loss(features, labels) if with_loss else forward(features)
            else:
                outputs = forward(batch)
            yield tf.nest.map_structure(lambda t: t.numpy(), outputs)
