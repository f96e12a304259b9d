"""The training loop shared by every run script: tf.distribute, accumulation, checkpoints, summaries, progress.

A task gives three things:
  build_model()                 -> a Keras task model (bert_tf.model.task_models), built in the strategy scope
  loss                          -> per-example loss function `loss_fn(labels, outputs) -> [B]` float32 (dicts of
                                   tensors in, as the dataset/model give), or a batch-level loss with metrics
                                   (bert_tf.training.losses: e.g. the masked-LM loss sum(w*nll) / (sum(w) + 1e-5))
  dataset_fn(batch_size, ctx, seed) -> tf.data.Dataset of (features, labels) batches of `batch_size`, repeated,
                                   in an order that is a function of `seed`, ctx's input pipeline and
                                   TensorFlow's global seed (tf.data mixes it in; --seed sets it, else unset)
Then `Trainer.train` runs the optimizer (bert_tf.training.optimization; the original's by default) for
num_train_steps updates, saving `output_dir/ckpt-<step>` every save_checkpoints_steps and at the end. The
gradients of an update are summed over micro-batches and replicas before they are clipped to global norm 1.0,
so that every strategy and accumulation computes the update of one device on the whole batch.

A run restarted with the same output_dir resumes from its last checkpoint as the run it continues: the checkpoint
holds the weights, the optimizer state, the input iterators' positions (tf.data iterator checkpoints: their
shuffle buffers included, nothing is re-read), the input order's seed (the one given, else drawn at random once)
and the dropout layers' random state. Otherwise the model starts from `init_checkpoint`: an original TF1 BERT
checkpoint or one of ours. A training run first removes the temporaries a killed run left in its checkpoint
directory (bert_tf.data.fileio.remove_stale_temporaries: those of processes that have ended).

Under MultiWorkerMirroredStrategy every worker trains; the chief (worker 0) writes checkpoints, summaries and
results to output_dir, each other worker its checkpoints (its own input position) to
output_dir/workers/worker-<i>. Each call of the training loop then runs one update (see `__init__`).
"""
import collections
import concurrent.futures
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
from bert_tf.model import encoder
from bert_tf.training import distribute, losses, optimization


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


def _add_gradients(a, b):
    """The gradient of two micro-batches: the sum, or for the embedding tables' IndexedSlices the concatenation of
    their rows, which is what one batch of both gives (the original's global norm, TensorFlow's and Keras's count
    each row of an IndexedSlices: a token used twice adds two rows, not one summed row)."""
    if a is None:
        return None
    if isinstance(a, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0), tf.concat([a.indices, b.indices], 0),
                                a.dense_shape)
    return a + b


class Trainer:
    """Trains and runs one task model under a tf.distribute strategy (see the module docstring)."""

    def __init__(self, build_model, loss_fn, output_dir, *, strategy=None, init_checkpoint=None,
                 learning_rate=5e-5, save_checkpoints_steps=1000, iterations_per_loop=1000,
                 gradient_accumulation_steps=1, mixed_precision="float32", use_xla=False,
                 adam_bias_correction=False, keep_checkpoint_max=5, optimizer="adamw", fused_adam=True):
        if not output_dir:
            raise ValueError("output_dir is required.")
        if gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}.")
        self.output_dir = output_dir
        self.init_checkpoint = init_checkpoint
        self.learning_rate = learning_rate
        self.save_checkpoints_steps = max(1, save_checkpoints_steps)
        self.accumulation = gradient_accumulation_steps
        self.mixed_precision = distribute.set_precision(mixed_precision)
        self.use_xla = use_xla
        self.adam_bias_correction = adam_bias_correction
        self.fused_adam = fused_adam
        if optimizer not in optimization.OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {optimizer!r}: expected one of {', '.join(optimization.OPTIMIZERS)}.")
        if optimizer != "adamw" and adam_bias_correction:
            raise ValueError("--adam_bias_correction applies to --optimizer=adamw only (lamb always corrects).")
        self.optimizer_name = optimizer
        self.keep_checkpoint_max = keep_checkpoint_max
        self.loss_fn = loss_fn
        self.loss = losses.as_batch_loss(loss_fn)
        self.strategy = strategy or distribute.get_strategy("auto")
        self.worker_index, self.num_workers = distribute.worker_position(self.strategy)
        # Across workers, one update per call of the training loop: in a tf.while_loop the collective ops of every
        # update share their instance keys, and the gather of the embedding gradient's rows (as many as the batch's
        # tokens) then fails when two updates' batches differ in length.
        self.iterations_per_loop = 1 if self.num_workers > 1 else max(1, iterations_per_loop)
        # With an init_checkpoint every path restores the encoder before the model is used (`train`: it or a
        # checkpoint of output_dir; `restore_for_predict`), so its random initial values are not computed.
        with self.strategy.scope(), encoder.restored_encoder(bool(init_checkpoint)):
            self.model = build_model()
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.input_seed = tf.Variable(0, dtype=tf.int64, trainable=False, name="input_seed",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.optimizer = None
        self.input_iterators = []
        self._forward_functions = {}
        self._pending_save = None
        tf.io.gfile.makedirs(output_dir)

    @property
    def is_chief(self):
        """Whether this process writes the run's checkpoints, summaries and results (worker 0)."""
        return self.worker_index == 0

    @property
    def checkpoint_dir(self):
        """Where this worker's checkpoints go: output_dir for the chief, output_dir/workers/worker-<i> else."""
        return distribute.worker_dir(self.output_dir, self.worker_index)

    # --- checkpoints ---------------------------------------------------------------------------------------

    def _checkpoint(self):
        parts = _trackables(self.model)
        if self.optimizer is not None:
            parts["optimizer"] = self.optimizer
        if self.input_iterators:
            parts["input_iterators"] = self.input_iterators
        return tf.train.Checkpoint(global_step=self.global_step, input_seed=self.input_seed,
                                   dropout_random_state=_random_states(self.model), **parts)

    def _manager(self):
        """The CheckpointManager of output_dir, over one Checkpoint that restores and saves (its save_counter
        carries on)."""
        return tf.train.CheckpointManager(self._checkpoint(), self.checkpoint_dir, self.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint of output_dir)."""
        return int(self.global_step.numpy())

    def latest_checkpoint(self):
        """The latest checkpoint of this worker's checkpoint_dir (output_dir for the chief), looked up inside it
        (`checkpoints.latest_checkpoint`), or None."""
        self.wait_for_checkpoint()
        return checkpoints.latest_checkpoint(self.checkpoint_dir)

    def wait_for_checkpoint(self):
        """Waits until the checkpoint `train(..., save_last_in_background=True)` writes is complete (its errors
        raised here); at once when none is being written."""
        pending, self._pending_save = self._pending_save, None
        if pending is not None:
            pending.result()

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
                                                      bias_correction=self.adam_bias_correction,
                                                      sum_replica_gradients=False, optimizer=self.optimizer_name,
                                                      global_clipnorm=None,  # _replica_step clips
                                                      fused=self.fused_adam)
            if self.mixed_precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)
        return optimizer

    def _restore_input_seed(self, seed):
        """Sets the input order's seed: the latest checkpoint's when resuming, else `seed`, else one drawn at random.
        Returns the latest checkpoint of checkpoint_dir, or None."""
        latest = self.latest_checkpoint()
        if latest:
            tf.train.Checkpoint(input_seed=self.input_seed).restore(latest).expect_partial()
            if seed is not None and seed != self.input_seed.numpy():
                logging.warning("Ignoring seed %d: the run being resumed was seeded with %d.", seed,
                                self.input_seed.numpy())
            return latest
        self.input_seed.assign(random.randrange(2 ** 31) if seed is None else seed)
        logging.info("Input order seed: %d%s", self.input_seed.numpy(),
                     " (drawn at random; saved with the checkpoints)" if seed is None else "")
        return None

    def _resume(self, manager, latest):
        """Resumes from `latest`: the model, the optimizer, the input position and the random state."""
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        logging.info("Resuming from %s at step %d: restored the model (%s), the optimizer state, the dropout "
                     "random state and the input position (seed %d)", latest, self.step,
                     ", ".join(sorted(_trackables(self.model))), self.input_seed.numpy())
        if not any(name.startswith("input_iterators/") for name, _ in tf.train.list_variables(latest)):
            logging.warning("%s holds no input position (written by an older bert-tf): the input starts again at "
                            "the beginning of its order.", latest)

    def _gradients(self, features, labels, totals):
        """(shares, gradients) of one micro-batch: its share of each loss term and metric, the whole update's
        summed weights being `totals` (bert_tf.training.losses), so that summing over micro-batches and replicas
        gives the figures of the whole batch; gradients of the loss share (scaled under mixed_float16)."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            shares = losses.shares(self.loss, labels, outputs, totals)
            scaled = self.optimizer.scale_loss(shares["loss"])
        return shares, tape.gradient(scaled, variables)

    # The step, the model and the losses hold no control flow on tensors: traced as plain Python (autograph off
    # here and in the gradient, evaluation and prediction functions), the first loop traces ~0.7 s sooner.
    @tf.autograph.experimental.do_not_convert
    def _replica_step(self, inputs):
        """One update on this replica: `accumulation` micro-batches, gradients summed over them and over the
        replicas, clipped to global norm 1.0 and applied once. Returns (this replica's shares of the figures, the
        global gradient norm).

        Variables without a gradient (e.g. the pooler under a span head) are left untouched, as the original
        skips them; so they also get no weight decay.
        """
        features, labels = inputs
        n = self.accumulation
        context = tf.distribute.get_replica_context()
        replicated = self.strategy.num_replicas_in_sync > 1
        totals = losses.weight_totals(self.loss, labels)
        if replicated:
            totals = context.all_reduce(tf.distribute.ReduceOp.SUM, totals)
        gradients_fn = tf.function(self._gradients, jit_compile=self.use_xla, reduce_retracing=True, autograph=False)
        if n == 1:
            shares, grads = gradients_fn(features, labels, totals)
        else:
            split = lambda t: tf.reshape(t, tf.concat([[n, -1], tf.shape(t)[1:]], 0))  # noqa: E731
            micro = tf.nest.map_structure(split, (features, labels))
            shares, grads = gradients_fn(*tf.nest.map_structure(lambda t: t[0], micro), totals)
            for i in range(1, n):  # unrolled: n is small, and the calls run in order (they read variables)
                micro_shares, micro_grads = gradients_fn(*tf.nest.map_structure(lambda t, i=i: t[i], micro), totals)
                shares = {name: value + micro_shares[name] for name, value in shares.items()}
                grads = [_add_gradients(g, mg) for g, mg in zip(grads, micro_grads)]
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None]
        grads = [g for g, _ in pairs]
        if replicated:  # IndexedSlices are gathered: their rows are the whole batch's, as on one device
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        norm = tf.linalg.global_norm(grads)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            norm = norm / tf.cast(self.optimizer.dynamic_scale, tf.float32)
        self.optimizer.apply_gradients(zip(optimization.clip_by_global_norm(grads, norm), [v for _, v in pairs]))
        return shares, norm

    def _input(self, dataset_fn, per_replica):
        """Opens this worker's input: one tf.data iterator over its input pipeline's batches (`input_iterators`,
        checkpointed with the run). Returns `next_update()`, for the training tf.function: the per-replica batches
        of one update, the worker's consecutive batches going to its replicas in order, as tf.distribute deals
        them."""
        replicas = self.strategy.num_replicas_in_sync
        context = tf.distribute.InputContext(num_input_pipelines=self.num_workers,
                                             input_pipeline_id=self.worker_index, num_replicas_in_sync=replicas)
        iterator = iter(dataset_fn(per_replica, context, int(self.input_seed.numpy())))
        self.input_iterators = [iterator]
        local = replicas // self.num_workers
        first = self.worker_index * local

        def next_update():
            batches = [next(iterator) for _ in range(local)]
            return self.strategy.experimental_distribute_values_from_function(
                lambda replica: batches[replica.replica_id_in_sync_group - first])

        return next_update

    def train(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed=None, meanwhile=None,
              save_last_in_background=False):
        """Trains until global_step == num_train_steps. Returns the last loss (mean over the last loop).

        `seed`: the input order's seed of a new run (None: drawn at random); a resumed run keeps its checkpoint's.
        Each loop's mean loss and metrics (bert_tf.training.losses), gradient norm, learning rate and examples/s
        go to TensorBoard (output_dir/train) and the log; `self.figures` holds the last loop's.

        Once the training loop is traced, TensorFlow optimizes its graph (seconds of C++ for BERT) in a thread
        while this one loads init_checkpoint (a new run) and calls `meanwhile()` (e.g. `prepare_predict` for the
        evaluation that follows), before the first update.
        `save_last_in_background`: the last checkpoint is written in a thread and `train` returns before it is
        complete (`wait_for_checkpoint`; `latest_checkpoint`, `restore_for_predict` and `train` wait for it).
        """
        self.wait_for_checkpoint()
        replicas = self.strategy.num_replicas_in_sync
        if global_batch_size % (replicas * self.accumulation):
            raise ValueError(f"train_batch_size {global_batch_size} is not divisible by replicas ({replicas}) x "
                             f"gradient_accumulation_steps ({self.accumulation}).")
        fileio.remove_stale_temporaries(self.checkpoint_dir)
        self.optimizer = self._build_optimizer(num_train_steps, num_warmup_steps)
        latest = self._restore_input_seed(seed)
        next_update = self._input(dataset_fn, global_batch_size // replicas)
        manager = self._manager()
        if latest:
            self._resume(manager, latest)
        step = self.step
        if step >= num_train_steps:
            logging.info("Training already finished (step %d of %d).", step, num_train_steps)
            return None
        writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "train")) if self.is_chief else None
        self.figures = {}
        names = self._figure_names()
        with tqdm(total=num_train_steps, initial=step, unit="step", desc="train", dynamic_ncols=True,
                  disable=not self.is_chief) as bar:
            train_loop = self._prepare_train_loop(next_update, latest, meanwhile)
            while step < num_train_steps:
                chunk = min(self.iterations_per_loop, num_train_steps - step,
                            self.save_checkpoints_steps - step % self.save_checkpoints_steps)
                start = time.time()
                figures = {name: float(value) for name, value in train_loop(tf.constant(chunk)).items()}
                elapsed = time.time() - start
                step = int(self.global_step.numpy())
                if not np.isfinite(figures["loss"]):
                    raise FloatingPointError(
                        f"The loss is {figures['loss']} at step {step}: stopped without saving. The last good "
                        f"checkpoint: {self.latest_checkpoint() or 'none (no checkpoint yet)'}.")
                figures["learning_rate"] = float(self.optimizer.learning_rate)
                figures["examples_per_second"] = chunk * global_batch_size / elapsed
                self.figures = figures
                self._summarize(writer, step, figures)
                bar.update(chunk)
                bar.set_postfix(loss=f"{figures['loss']:.4f}")
                logging.info("step %d/%d %s (%.1f examples/s)", step, num_train_steps,
                             " ".join(f"{name} {figures[name]:.4f}" for name in names), figures["examples_per_second"])
                if step == num_train_steps and save_last_in_background:
                    saving = concurrent.futures.ThreadPoolExecutor(1)
                    self._pending_save = saving.submit(self._save, manager, step)
                    saving.shutdown(wait=False)
                elif step % self.save_checkpoints_steps == 0 or step == num_train_steps:
                    self._save(manager, step)
        if writer:
            writer.flush()
        return self.figures["loss"]

    def _prepare_train_loop(self, next_update, resumed, meanwhile):
        """The training tf.function, traced here and optimized by TensorFlow in a thread (a call with no update)
        while this one loads init_checkpoint (unless `resumed`) and runs `meanwhile`."""
        train_loop = self._train_loop(next_update)
        train_loop.get_concrete_function(tf.TensorSpec([], tf.int32))  # traced here (strategy, Keras state)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            optimized = pool.submit(train_loop, tf.constant(0))
            if not resumed and self.init_checkpoint:
                self.load_init_checkpoint(self.init_checkpoint)
            if meanwhile is not None:
                meanwhile()
            optimized.result()
        return train_loop

    @staticmethod
    def _save(manager, step):
        saved = manager.save(checkpoint_number=step)
        logging.info("Saved %s", saved)
        return saved

    def _figure_names(self):
        """The training figures the log shows: the loss, then the loss's other terms."""
        return ["loss", *(name for name in self.loss.terms if name != "loss")]

    def _train_loop(self, next_update):
        """The training tf.function: `train_loop(steps)` runs up to `steps` updates on the batches of
        `next_update()` and stops after one whose loss is not finite; it returns the figures' means (NaN for 0
        steps)."""
        names = self._figure_names()

        def update(done, finite, sums):
            """One update: the loop's body. `finite`: whether its loss is finite."""
            shares, norm = self.strategy.run(self._replica_step, args=(next_update(),))
            figures = {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, shares[name], axis=None)
                       for name in names}
            figures["gradient_norm"] = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
            with tf.control_dependencies([self.global_step.assign_add(1)]):
                return (done + 1.0, tf.math.is_finite(figures["loss"]),
                        {name: total + figures[name] for name, total in sums.items()})

        # A tf.while_loop written out, where AutoGraph would convert a Python loop and its `break` while tracing.
        @tf.function(autograph=False)
        def train_loop(steps):
            sums = {name: tf.constant(0.0) for name in names + ["gradient_norm"]}
            limit = tf.cast(steps, tf.float32)
            done, _, sums = tf.while_loop(lambda done, finite, _: tf.logical_and(done < limit, finite), update,
                                          (tf.constant(0.0), tf.constant(True), sums))
            return {name: total / done for name, total in sums.items()}

        return train_loop

    @staticmethod
    def _summarize(writer, step, figures):
        if writer is None:
            return
        with writer.as_default(step=step):
            for name, value in figures.items():
                tf.summary.scalar(name, value)

    # --- inference -----------------------------------------------------------------------------------------

    def evaluate(self, dataset):
        """The loss terms' figures over `dataset` ((features, labels) batches), streamed as the original's
        tf.metrics: each term's sum(values) / sum(weights) over all the batches (a weighted mean or accuracy), and
        `loss`, the mean of the batches' losses. Returns ({name: float32}, the number of batches).

        `dataset`: a tf.data.Dataset; its element_spec is the signature of the one trace every batch runs on (a
        last, smaller batch included)."""
        @tf.function(input_signature=list(dataset.element_spec), jit_compile=self.use_xla, autograph=False)
        def batch_figures(features, labels):
            outputs = self.model(features, training=False)
            values, weights = self.loss.values(labels, outputs), self.loss.weights(labels)
            sums = {name: tf.reduce_sum(values[name]) for name in self.loss.terms}
            totals = {name: tf.reduce_sum(weights[name]) for name in self.loss.terms}
            return sums, totals, losses.ratios(self.loss, sums, totals)["loss"]

        sums, totals, batch_losses = collections.Counter(), collections.Counter(), []
        for features, labels in dataset:
            batch_sums, batch_totals, loss = batch_figures(features, labels)
            sums.update({name: float(value) for name, value in batch_sums.items()})
            totals.update({name: float(value) for name, value in batch_totals.items()})
            batch_losses.append(float(loss))
        if not batch_losses:
            raise ValueError("Nothing to evaluate: the evaluation data holds no full batch.")
        figures = {name: np.float32(sums[name] / totals[name]) for name in self.loss.terms}
        figures["loss"] = np.float32(np.mean(batch_losses))
        return figures, len(batch_losses)

    def predict(self, dataset, with_loss=False):
        """Yields the model's outputs per batch as numpy dicts, in dataset order.

        `dataset`: a tf.data.Dataset of features dicts or (features, labels); with labels and `with_loss`, each
        dict also holds `per_example_loss` [B]. Its element_spec is the signature of the one trace every batch runs
        on (a last, smaller batch included), made once per element_spec (`prepare_predict`).
        """
        labelled = isinstance(dataset.element_spec, tuple)
        forward = self.prepare_predict(dataset.element_spec, with_loss)
        for batch in dataset:
            features, labels = batch if labelled else (batch, None)
            outputs = forward(features, labels) if with_loss and labelled else forward(features)
            yield tf.nest.map_structure(lambda t: t.numpy(), outputs)

    def prepare_predict(self, element_spec, with_loss=False):
        """The traced function `predict` runs on a dataset of `element_spec`: made on the first call for that spec
        (e.g. as `train`'s `meanwhile`), then reused. Where the batch size is not fixed, it also runs once on an
        empty batch, so that TensorFlow optimizes its graph now rather than on the first batch."""
        labelled = isinstance(element_spec, tuple)
        with_loss = with_loss and labelled
        key = (repr(element_spec), with_loss)  # the structure, names, shapes and dtypes
        if key not in self._forward_functions:
            signature = list(element_spec) if with_loss else [element_spec[0] if labelled else element_spec]
            forward = tf.function(lambda features: self.model(features, training=False), jit_compile=self.use_xla,
                                  input_signature=signature[:1], autograph=False)

            def forward_with_loss(features, labels):
                outputs = forward(features)
                return {**outputs, "per_example_loss": tf.cast(self.loss_fn(labels, outputs), tf.float32)}

            function = tf.function(forward_with_loss, input_signature=signature, autograph=False) if with_loss \
                else forward
            function.get_concrete_function()
            if all(spec.shape.rank and spec.shape[0] is None for spec in tf.nest.flatten(signature)):
                function(*tf.nest.map_structure(
                    lambda spec: tf.zeros([0] + [1 if n is None else n for n in spec.shape[1:]], spec.dtype),
                    signature))
            self._forward_functions[key] = function
        return self._forward_functions[key]
