"""The training loop shared by every run script: tf.distribute, accumulation, checkpoints, summaries, progress.

A task gives three things:
  build_model()                 -> a Keras task model (bert_tf.model.task_models), built in the strategy scope
  loss_fn(labels, outputs)      -> per-example loss [B] float32 (dicts of tensors in, as the dataset/model give)
  dataset_fn(batch_size, ctx, seed) -> tf.data.Dataset of (features, labels) batches of `batch_size`, repeated,
                                   in an order that is a function of `seed`, ctx's input pipeline and
                                   TensorFlow's global seed (tf.data mixes it in; --seed sets it, else unset)
Then `Trainer.train` runs the original's optimizer (bert_tf.training.optimization) for num_train_steps updates,
saving `output_dir/ckpt-<step>` every save_checkpoints_steps and at the end. A run restarted with the same
output_dir resumes from its last checkpoint as the run it continues: the checkpoint holds the weights, the
optimizer state, the input order's seed (the one given, else drawn at random once) and the dropout layers' random
state, and the resumed run (the same command: the same global seed) skips the batches already used. Otherwise
the model starts from `init_checkpoint`: an original TF1 BERT checkpoint or one of ours. A training run first
removes the temporaries a killed run left in output_dir (bert_tf.data.fileio.remove_stale_temporaries).
"""
import os
import random
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints
from bert_tf.data import fileio
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


def _random_states(model):
    """The model's state beyond its weights: the Keras SeedGenerator state ([seed, counter]) of each dropout layer."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


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
            self.input_seed = tf.Variable(0, dtype=tf.int64, trainable=False, name="input_seed",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.optimizer = None
        tf.io.gfile.makedirs(output_dir)

    # --- checkpoints ---------------------------------------------------------------------------------------

    def _checkpoint(self):
        parts = _trackables(self.model)
        if self.optimizer is not None:
            parts["optimizer"] = self.optimizer
        return tf.train.Checkpoint(global_step=self.global_step, input_seed=self.input_seed,
                                   dropout_random_state=_random_states(self.model), **parts)

    def _manager(self):
        """The CheckpointManager of output_dir, over one Checkpoint that restores and saves (its save_counter
        carries on)."""
        return tf.train.CheckpointManager(self._checkpoint(), self.output_dir, self.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint of output_dir)."""
        return int(self.global_step.numpy())

    def latest_checkpoint(self):
        """The latest checkpoint of output_dir, looked up inside it (`checkpoints.latest_checkpoint`), or None."""
        return checkpoints.latest_checkpoint(self.output_dir)

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

    def _restore_or_init(self, manager, seed):
        """Resumes from the latest checkpoint of `manager`, else starts from init_checkpoint (if any) with the
        input order seeded by `seed` (None: drawn at random). Returns the step to start at."""
        latest = self.latest_checkpoint()
        if latest:
            manager.checkpoint.restore(latest).assert_existing_objects_matched()
            logging.info("Resuming from %s at step %d: restored the model (%s), the optimizer state, the dropout "
                         "random state and the input order (seed %d)", latest, self.step,
                         ", ".join(sorted(_trackables(self.model))), self.input_seed.numpy())
            if seed is not None and seed != self.input_seed.numpy():
                logging.warning("Ignoring seed %d: the run being resumed was seeded with %d.", seed,
                                self.input_seed.numpy())
            return self.step
        if self.init_checkpoint:
            self.load_init_checkpoint(self.init_checkpoint)
        self.input_seed.assign(random.randrange(2 ** 31) if seed is None else seed)
        logging.info("Input order seed: %d%s", self.input_seed.numpy(),
                     " (drawn at random; saved with the checkpoints)" if seed is None else "")
        return self.step

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
                micro_loss, micro_grads = gradients_fn(*tf.nest.map_structure(lambda t, i=i: t[i], micro),
                                                       global_batch_size)
                loss += micro_loss
                grads = [g if g is None else g + mg for g, mg in zip(grads, micro_grads)]
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None])
        return loss

    def _remove_stale_temporaries(self):
        for path in fileio.remove_stale_temporaries(self.output_dir):
            logging.info("Removed %s (left by a killed run)", path)

    def _input_iterator(self, dataset_fn, per_replica, step):
        """The batches of `dataset_fn` with the input order seed, from `step` on: each input pipeline skips the
        per-replica batches its replicas used in the first `step` updates."""
        seed = int(self.input_seed.numpy())

        def input_fn(ctx):
            batches_per_update = ctx.num_replicas_in_sync // ctx.num_input_pipelines
            return dataset_fn(per_replica, ctx, seed).skip(step * batches_per_update)

        return iter(self.strategy.distribute_datasets_from_function(input_fn))

    def train(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed=None):
        """Trains until global_step == num_train_steps. Returns the last loss (mean over the last loop).

        `seed`: the input order's seed of a new run (None: drawn at random); a resumed run keeps its checkpoint's.
        """
        replicas = self.strategy.num_replicas_in_sync
        if global_batch_size % (replicas * self.accumulation):
            raise ValueError(f"train_batch_size {global_batch_size} is not divisible by replicas ({replicas}) x "
                             f"gradient_accumulation_steps ({self.accumulation}).")
        self._remove_stale_temporaries()
        self.optimizer = self._build_optimizer(num_train_steps, num_warmup_steps)
        manager = self._manager()
        step = self._restore_or_init(manager, seed)
        if step >= num_train_steps:
            logging.info("Training already finished (step %d of %d).", step, num_train_steps)
            return None
        iterator = self._input_iterator(dataset_fn, global_batch_size // replicas, step)

        @tf.function
        def train_loop(iterator, steps):
            total = tf.constant(0.0)
            for _ in tf.range(steps):
                loss = self.strategy.run(self._replica_step, args=(next(iterator), global_batch_size))
                total += self.strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
                self.global_step.assign_add(1)
            return total / tf.cast(steps, tf.float32)

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
