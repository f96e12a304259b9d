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
and the dropout layers' random state. Otherwise the model starts from `pretrained` (`checkpoints.load_pretrained`'s
result: an original TF1 BERT checkpoint, one of ours, a Model Garden or TF Hub BERT), restored after the training
loop is traced. A training run first removes the temporaries a killed run left in its checkpoint
directory (bert_tf.fileio.remove_stale_temporaries: ours once untouched for a day, and TensorFlow's checkpoint
temporaries, which only the run that owns the directory removes).

Under MultiWorkerMirroredStrategy every worker trains; the chief (worker 0) writes checkpoints, summaries and
results to output_dir, each other worker its checkpoints (its own input position) to
output_dir/workers/worker-<i>. Each call of the training loop then runs one update (see `__init__`). A run
resumes the latest step every worker has a checkpoint of; a worker that stops responding makes the others stop
with a `distribute.WorkerLost` naming it (after the strategy's heartbeat timeout) rather than wait for it.

The Trainer composes, one concern a module: its settings (bert_tf.training.config.TrainingConfig), the run's
checkpointed state and its checkpoints (bert_tf.training.run_state), its input (bert_tf.training.feed: the next
update's batches fetched while one runs), the update step (bert_tf.training.update), evaluation and prediction
(bert_tf.training.prediction); it runs the training loop itself.
"""
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import time

import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints, fileio
from bert_tf.training import distribute, feed, losses, prediction, run_state, summaries, update
from bert_tf.training.config import TrainingConfig


def compute_train_steps(num_examples, train_batch_size, num_train_epochs, warmup_proportion):
    """The original's arithmetic: (num_train_steps, num_warmup_steps)."""
    num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
    if num_train_steps <= 0:
        raise ValueError(f"No training steps: {num_examples} examples, batch size {train_batch_size}, "
                         f"{num_train_epochs} epochs.")
    return num_train_steps, int(num_train_steps * warmup_proportion)


class Trainer:
    """Trains and runs one task model under a tf.distribute strategy (see the module docstring).

    `config`: a TrainingConfig (default: the defaults); keyword `settings` replace its fields (e.g.
    `Trainer(..., learning_rate=1e-3)`). The Keras global precision policy is set to config.mixed_precision;
    config.gradient_checkpointing turns the encoder's recomputation on (`BertModel.set_gradient_checkpointing`).
    `pretrained`: the `checkpoints.Pretrained` a new run starts from (None: random weights).
    """

    def __init__(self, build_model, loss_fn, output_dir, *, config=None, strategy=None, pretrained=None,
                 **settings):
        if not output_dir:
            raise ValueError("output_dir is required.")
        self.config = config = dataclasses.replace(config or TrainingConfig(), **settings)
        self.output_dir = output_dir
        self.pretrained = pretrained
        self.save_checkpoints_steps = max(1, config.save_checkpoints_steps)
        self.mixed_precision = distribute.set_precision(config.mixed_precision)
        self.loss_fn = loss_fn
        self.loss = losses.as_batch_loss(loss_fn)
        self.strategy = strategy or distribute.get_strategy("auto")
        self.worker_index, self.num_workers = distribute.worker_position(self.strategy)
        # Across workers, one update per call of the training loop: in a tf.while_loop the collective ops of every
        # update share their instance keys, and the gather of the embedding gradient's rows (as many as the batch's
        # tokens) then fails when two updates' batches differ in length.
        self.iterations_per_loop = 1 if self.num_workers > 1 else max(1, config.iterations_per_loop)
        with self.strategy.scope():
            self.model = build_model()
            checkpoints.model_parts(self.model)["bert"].set_gradient_checkpointing(config.gradient_checkpointing)
            if config.gradient_checkpointing:
                logging.info("Gradient checkpointing: each transformer layer recomputes its activations in the "
                             "backward pass")
            self.state = run_state.RunState(self.model, self.checkpoint_dir, config.keep_checkpoint_max)
        self.predictor = prediction.Predictor(functools.partial(self.model, training=False), loss_fn, config.use_xla)
        fileio.makedirs(output_dir)

    @property
    def is_chief(self):
        """Whether this process writes the run's checkpoints, summaries and results (worker 0)."""
        return self.worker_index == 0

    @property
    def checkpoint_dir(self):
        """Where this worker's checkpoints go: output_dir for the chief, output_dir/workers/worker-<i> else."""
        return distribute.worker_dir(self.output_dir, self.worker_index)

    # --- the run's state and checkpoints (bert_tf.training.run_state) ------------------------------------------

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint of output_dir)."""
        return self.state.step

    @property
    def input_seed(self):
        """The input order's seed (a tf.Variable, checkpointed)."""
        return self.state.input_seed

    @property
    def optimizer(self):
        """The optimizer, once `train` has built it (else None)."""
        return self.state.optimizer

    def latest_checkpoint(self):
        """The latest checkpoint of this worker's checkpoint_dir (output_dir for the chief), looked up inside it
        (`checkpoints.latest_checkpoint`), or None."""
        return self.state.latest_checkpoint()

    def wait_for_checkpoint(self):
        """Waits until the checkpoint `train(..., save_last_in_background=True)` writes is complete (its errors
        raised here); at once when none is being written."""
        self.state.wait_for_checkpoint()

    def load_pretrained(self):
        """Restores the pre-trained model into the model (`checkpoints.Pretrained.restore`). Returns its LoadReport
        (None without a pre-trained model or its init_checkpoint)."""
        return self.pretrained.restore(self.model) if self.pretrained else None

    def restore_for_predict(self, required_heads=()):
        """Loads the latest checkpoint of output_dir (and its step), else the pre-trained model's; raises if a
        required head is absent. Returns the checkpoint used."""
        latest = self.latest_checkpoint()
        if latest:
            self.state.restore_step(latest)
            logging.info("Restoring %s (step %d)", latest, self.step)
            checkpoints.restore(self.model, latest, required_heads)
            return latest
        if not (self.pretrained and self.pretrained.restores):
            raise ValueError(f"Nothing to predict with: no checkpoint in {self.output_dir} and no init_checkpoint.")
        self.pretrained.restore(self.model, required_heads)
        return self.pretrained.init_checkpoint

    # --- training ------------------------------------------------------------------------------------------

    def train(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed=None, meanwhile=None,
              save_last_in_background=False):
        """Trains until global_step == num_train_steps. Returns the last loss (mean over the last loop).

        `seed`: the input order's seed of a new run (None: drawn at random); a resumed run keeps its checkpoint's.
        Each loop's mean loss and metrics (bert_tf.training.losses), gradient norm, learning rate and examples/s
        go to TensorBoard (output_dir/train, written out at each checkpoint: bert_tf.training.summaries) and the log;
        `self.figures` holds the last loop's.

        Once the training loop is traced, TensorFlow optimizes its graph (seconds of C++ for BERT) in a thread
        while this one restores `pretrained` (a new run) and calls `meanwhile()` (e.g. `prepare_predict` for the
        evaluation that follows), before the first update.
        `save_last_in_background`: the last checkpoint is written in a thread and `train` returns before it is
        complete (`wait_for_checkpoint`; `latest_checkpoint`, `restore_for_predict` and `train` wait for it).
        """
        with distribute.naming_lost_workers(self.strategy, self.output_dir):
            manager, latest, input_feed = self._start(dataset_fn, global_batch_size, num_train_steps,
                                                       num_warmup_steps, seed)
        step = self.step
        if step >= num_train_steps:
            logging.info("Training already finished (step %d of %d).", step, num_train_steps)
            return None
        writer = summaries.Writer(os.path.join(self.output_dir, "train")) if self.is_chief else None
        self.figures = {}
        with tqdm(total=num_train_steps, initial=step, unit="step", desc="train", dynamic_ncols=True,
                  disable=not self.is_chief) as bar, writer or contextlib.nullcontext():
            train_loop = self._prepare_train_loop(input_feed, latest, meanwhile)
            while step < num_train_steps:
                chunk = min(self.iterations_per_loop, num_train_steps - step,
                            self.save_checkpoints_steps - step % self.save_checkpoints_steps)
                start = time.time()
                with distribute.naming_lost_workers(self.strategy, self.output_dir):
                    figures = {name: float(value) for name, value in train_loop(tf.constant(chunk)).items()}
                elapsed = time.time() - start
                step = self.step
                self._check_finite(figures, step)
                figures["learning_rate"] = float(self.optimizer.learning_rate)
                figures["examples_per_second"] = chunk * global_batch_size / elapsed
                self.figures = figures
                self._report(writer, bar, chunk, step, num_train_steps, figures)
                if step == num_train_steps and save_last_in_background:
                    self.state.save_in_background(manager, step)
                elif step % self.save_checkpoints_steps == 0 or step == num_train_steps:
                    self.state.save(manager, step)
                if writer is not None and step % self.save_checkpoints_steps == 0:
                    writer.flush()  # the summaries of each checkpoint's span (and at the end, leaving the `with`)
        return self.figures["loss"]

    def _start(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed):
        """Readies a training run: builds the optimizer, sets the input order's seed, opens the input and resumes
        the latest checkpoint of checkpoint_dir, if any. Returns (its CheckpointManager, that checkpoint or None,
        its `feed.Feed`)."""
        self.wait_for_checkpoint()
        replicas = self.strategy.num_replicas_in_sync
        accumulation = self.config.gradient_accumulation_steps
        if global_batch_size % (replicas * accumulation):
            raise ValueError(f"train_batch_size {global_batch_size} is not divisible by replicas ({replicas}) x "
                             f"gradient_accumulation_steps ({accumulation}).")
        fileio.remove_stale_temporaries(self.checkpoint_dir, checkpoints=True)  # this run owns the directory
        self.state.optimizer = update.build_optimizer(self.strategy, self.model, self.config, num_train_steps,
                                                      num_warmup_steps)
        latest = self.state.latest_checkpoint()
        if self.num_workers > 1:
            latest, seed = self._agreed_start(latest, seed)
        self.state.restore_input_seed(seed, latest)
        input_feed = self._input(dataset_fn, global_batch_size // replicas)
        manager = self.state.manager()
        if latest:
            self.state.resume(manager, latest)
        return manager, latest, input_feed

    def _agreed_start(self, latest, seed):
        """Under several workers: (the checkpoint to resume, the input order's seed of a new run) that every worker
        shares, from this worker's `latest` checkpoint (or None) and `seed` (the same flag on every worker): the
        latest step every worker has a checkpoint of (`RunState.shared_checkpoint`) and, for a new run, worker 0's
        seed (drawn at random when none is given)."""
        shared = distribute.worker_values(self.strategy, [run_state.checkpoint_step(latest),
                                                           run_state.draw_seed() if seed is None else seed])
        steps = {worker: step for worker, (step, _) in shared.items()}
        return (self.state.shared_checkpoint(latest, steps, self.worker_index, self.save_checkpoints_steps),
                shared[0][1])

    def _input(self, dataset_fn, per_replica):
        """Opens this worker's input: one tf.data iterator over its input pipeline's batches (the state's
        `input_iterators`, checkpointed with the run). Returns its `feed.Feed`, for the training tf.function."""
        replicas = self.strategy.num_replicas_in_sync
        context = tf.distribute.InputContext(num_input_pipelines=self.num_workers,
                                             input_pipeline_id=self.worker_index, num_replicas_in_sync=replicas)
        iterator = iter(dataset_fn(per_replica, context, int(self.input_seed.numpy())))
        self.state.input_iterators = [iterator]
        return feed.Feed(self.strategy, iterator, self.worker_index, self.num_workers)

    def _prepare_train_loop(self, input_feed, resumed, meanwhile):
        """The training tf.function, traced here and optimized by TensorFlow in a thread (a call with no update)
        while this one restores `pretrained` (unless `resumed`) and runs `meanwhile`."""
        train_loop = self._train_loop(input_feed)
        train_loop.get_concrete_function(tf.TensorSpec([], tf.int32))  # traced here (strategy, Keras state)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            optimized = pool.submit(train_loop, tf.constant(0))
            if not resumed and self.pretrained:
                self.load_pretrained()
            if meanwhile is not None:
                meanwhile()
            optimized.result()
        return train_loop

    def _gradients(self, features, labels, totals):
        """One micro-batch's (shares, gradients) (`update.gradients`): the function the update step traces."""
        return update.gradients(self.model, self.loss, self.optimizer, features, labels, totals)

    def _figure_names(self):
        """The training figures the log shows: the loss, then the loss's other terms."""
        return ["loss", *(name for name in self.loss.terms if name != "loss")]

    def _train_loop(self, input_feed):
        """The training tf.function: `train_loop(steps)` runs up to `steps` updates on the batches of `input_feed`
        and stops after one that the NaN guard refuses (`_guarded`); it returns the figures' means (NaN for 0
        steps). Each update runs while the next one's batches are fetched to the devices (`feed`)."""
        names, guarded = self._figure_names(), self._guarded()
        replica_step = update.Update(self.strategy, self.model, self.loss, self.optimizer, self._gradients,
                                     self.config.gradient_accumulation_steps, self.config.use_xla).replica_step

        # A tf.while_loop written out, where AutoGraph would convert a Python loop and its `break` while tracing.
        @tf.function(autograph=False)
        def train_loop(steps):
            limit = tf.cast(steps, tf.float32)

            def body(done, finite, sums, batches):
                """One update on `batches`: the loop's body. `finite`: whether its guarded figures are finite."""
                upcoming = input_feed.fetch_if(done + 1.0 < limit, batches)
                shares, norm = self.strategy.run(replica_step, args=(input_feed.distribute(batches),))
                figures = {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, shares[name], axis=None)
                           for name in names}
                figures["gradient_norm"] = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
                with tf.control_dependencies([self.state.global_step.assign_add(1)]):
                    return (done + 1.0, tf.reduce_all([tf.math.is_finite(figures[name]) for name in guarded]),
                            {name: total + figures[name] for name, total in sums.items()}, upcoming)

            sums = {name: tf.constant(0.0) for name in names + ["gradient_norm"]}
            first = input_feed.fetch_if(limit > 0.0, input_feed.empty())
            done, _, sums, _ = tf.while_loop(lambda done, finite, *_: tf.logical_and(done < limit, finite), body,
                                             (tf.constant(0.0), tf.constant(True), sums, first))
            return {name: total / done for name, total in sums.items()}

        return train_loop

    def _guarded(self):
        """The figures the NaN guard checks: the loss, and the gradient norm unless the optimizer skips an update
        whose gradients are not finite (`update.skips_non_finite`: loss scaling); any other writes NaN or inf into
        the weights."""
        return ["loss"] if update.skips_non_finite(self.optimizer) else ["loss", "gradient_norm"]

    def _check_finite(self, figures, step):
        """The NaN guard: raises, before anything is saved, when a guarded figure of the last loop is not finite."""
        for name in self._guarded():
            if not np.isfinite(figures[name]):
                raise FloatingPointError(
                    f"The {name.replace('_', ' ')} is {figures[name]} at step {step}: stopped without saving. The "
                    f"last good checkpoint: {self.latest_checkpoint() or 'none (no checkpoint yet)'}.")

    def _report(self, writer, bar, chunk, step, num_train_steps, figures):
        """Shows a loop's figures: TensorBoard (the chief's `writer`, a summaries.Writer), the progress bar and the
        log."""
        if writer is not None:
            writer.scalars(step, figures)
        bar.update(chunk)
        bar.set_postfix(loss=f"{figures['loss']:.4f}")
        logging.info("step %d/%d %s (%.1f examples/s)", step, num_train_steps,
                     " ".join(f"{name} {figures[name]:.4f}" for name in self._figure_names()),
                     figures["examples_per_second"])

    # --- evaluation and prediction (bert_tf.training.prediction) ------------------------------------------------

    def evaluate(self, dataset):
        """The loss terms' figures over `dataset` and its number of batches (`prediction.Predictor.evaluate`)."""
        return self.predictor.evaluate(dataset)

    def predict(self, dataset, with_loss=False):
        """Yields the model's outputs per batch as numpy dicts, in dataset order (`prediction.Predictor.predict`)."""
        return self.predictor.predict(dataset, with_loss)

    def prepare_predict(self, element_spec, with_loss=False):
        """The traced function `predict` runs on a dataset of `element_spec`, made once per spec (e.g. as `train`'s
        `meanwhile`; `prediction.Predictor.prepare_predict`)."""
        return self.predictor.prepare_predict(element_spec, with_loss)
