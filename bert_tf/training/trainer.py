"""The training loop shared by every run script: tf.distribute, accumulation, checkpoints, summaries, progress.

A task gives:
  build_model()                     -> a Keras task model (bert_tf.model.task_models), built in the strategy scope
  loss_fn(labels, outputs)          -> per-example losses [B] float32, or a batch-level loss (bert_tf.training.losses)
  dataset_fn(batch_size, ctx, seed) -> repeated (features, labels) batches, their order a function of `seed`

Checkpoints (`ckpt-<step>`) every save_checkpoints_steps and at the end; a restarted run with the same output_dir
resumes its last exactly. Each worker keeps its own (`Trainer.work_dir`); one holds, under these names:
  global_step, input_seed     the updates done; the input order's seed (given, else drawn once)
  dropout_random_state        each dropout layer's SeedGenerator state
  model, and the encoder and each head by its attribute (what `checkpoints.restore` reads)
  optimizer                   its state
  input_iterators             the input iterator's position, shuffle buffers included
A worker that stops responding stops the others with a `distribute.WorkerLost` naming it. The update step: update;
evaluation and prediction: prediction.

The loop's input: this worker's batches dealt to its replicas, the next update's fetched while the current one runs.
A loop fetches only the batches of the updates it runs (`_fetch_if`), so the checkpointed iterator's position is the
updates done. An update's replicas share one batch shape: one worker's are cut as one batch
(bert_tf.data.records.replica_batches), and across workers `_agreed` pads the cut features to the longest.
"""
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import random
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints, fileio
from bert_tf.training import distribute, layers, prediction, summaries, update
from bert_tf.training.config import RunConfig


def compute_train_steps(num_examples, train_batch_size, num_train_epochs, warmup_proportion):
    """The original's arithmetic: (num_train_steps, num_warmup_steps)."""
    num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
    if num_train_steps <= 0:
        raise ValueError(f"No training steps: {num_examples} examples, batch size {train_batch_size}, "
                         f"{num_train_epochs} epochs.")
    return num_train_steps, int(num_train_steps * warmup_proportion)


def trackables(model):
    """The model, and its encoder and heads by attribute (what `checkpoints.restore` reads)."""
    return {"model": model, **checkpoints.model_parts(model)}


def draw_seed():
    return random.randrange(2 ** 31)


def checkpoint_step(path):
    """The step of checkpoint `path` (ckpt-<step>); 0 for None."""
    return int(path.rsplit("-", 1)[1]) if path else 0


def counter(name):
    """A step counter of the run (int64, 0), one value across replicas."""
    return tf.Variable(0, dtype=tf.int64, trainable=False, name=name,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def shared_checkpoint(checkpoint_dir, latest, steps, worker_index, save_checkpoints_steps, keep_checkpoint_max):
    """The checkpoint in `checkpoint_dir` (this worker's; its latest: `latest`) of the latest step every worker has
    (`steps`: {worker: latest step, 0 for none}); None for a new run. ValueError if the steps lie over one checkpoint
    apart or this worker lacks the shared one."""
    step, newest = min(steps.values()), max(steps.values())
    behind = ", ".join(str(worker) for worker, worker_step in sorted(steps.items()) if worker_step == step)
    if newest - step > save_checkpoints_steps:
        raise ValueError(f"The latest checkpoint of worker(s) {behind} is of step {step} (0: none), another "
                         f"worker's of step {newest}: more than one checkpoint apart (--save_checkpoints_steps="
                         f"{save_checkpoints_steps}), which a stopped worker does not leave: their checkpoints are "
                         f"missing (each worker keeps its own in output_dir/workers/worker-<i>, the chief in "
                         f"output_dir: a host that takes over a worker needs them, so keep output_dir on storage "
                         f"every host reaches). Put them back, or rerun every worker with --start_over to train "
                         f"from the beginning.")
    if step == checkpoint_step(latest):
        return latest
    shared = os.path.join(checkpoint_dir, f"ckpt-{step}") if step else None
    if step and not fileio.exists(shared + ".index"):
        raise ValueError(f"Worker {worker_index} cannot resume step {step}, the latest that worker(s) {behind} "
                         f"have a checkpoint of: {checkpoint_dir} no longer holds ckpt-{step} (its latest: "
                         f"{latest}; --keep_checkpoint_max={keep_checkpoint_max}). Rerun every worker with "
                         f"--start_over to train from the beginning.")
    logging.warning("Worker %d %s: worker(s) %s have %s; its %s is written again when the run gets there.",
                    worker_index, f"resumes from {shared}" if step else "starts the run afresh", behind,
                    f"no checkpoint after step {step}" if step else "no checkpoint", latest)
    return shared


class Trainer(prediction.Predictor):
    """Trains a task model under a tf.distribute strategy; as a Predictor, evaluates and predicts.

    `config`: a RunConfig (its training fields), fields replaced by keyword `settings`; it sets the Keras global
    precision policy. `pretrained`: the `checkpoints.Pretrained` a new run starts from.
    """

    def __init__(self, build_model, loss_fn, output_dir, *, config=None, strategy=None, pretrained=None,
                 **settings):
        if not output_dir:
            raise ValueError("output_dir is required.")
        self.config = config = dataclasses.replace(config or RunConfig(), **settings)
        self.output_dir = output_dir
        self.pretrained = pretrained
        self.save_checkpoints_steps = max(1, config.save_checkpoints_steps)
        distribute.set_precision(config.mixed_precision)
        self.strategy = strategy or distribute.get_strategy("auto")
        self.worker_index, self.num_workers = distribute.worker_position(self.strategy)
        self.is_chief = self.worker_index == 0  # worker 0 writes the run's shared files
        # This worker's checkpoint directory: output_dir for the chief, else output_dir/workers/worker-<i>.
        self.work_dir = (output_dir if self.is_chief
                         else os.path.join(output_dir, "workers", f"worker-{self.worker_index}"))
        # Across workers, one update per loop call: in a tf.while_loop the updates' collectives share instance keys,
        # and the gather of the embedding gradient's rows fails when two batches differ in length.
        self.iterations_per_loop = 1 if self.num_workers > 1 else max(1, config.iterations_per_loop)
        local = self.strategy.num_replicas_in_sync // self.num_workers
        self.first_replica = self.worker_index * local  # the replica id of this worker's first replica
        tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)  # batches left on the host
        self.devices = [None] * local if tpu else list(self.strategy.extended.worker_devices)
        with self.strategy.scope():
            self.model = build_model()
            checkpoints.model_parts(self.model)["bert"].set_gradient_checkpointing(config.gradient_checkpointing)
            layers.freeze(self.model, config.freeze_layers)  # before the optimizer: no slots for them
            if config.gradient_checkpointing:
                logging.info("Gradient checkpointing: each transformer layer recomputes its activations in the "
                             "backward pass")
            self.global_step = counter("global_step")
            self.input_seed = counter("input_seed")
        self.optimizer = None  # built by `train`
        self.iterator = None  # this worker's input, opened by `train`
        self._pending_save = None  # the checkpoint being saved in the background
        super().__init__(functools.partial(self.model, training=False), loss_fn, config.use_xla)
        self.figure_names = ["loss", *(name for name in self.loss.terms if name != "loss")]
        fileio.makedirs(self.work_dir)

    # --- the run's state and its checkpoints (what they hold: the module docstring) -----------------------------

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint)."""
        return int(self.global_step.numpy())

    def latest_checkpoint(self):
        """work_dir's latest checkpoint or None, after any background save completes."""
        self.wait_for_checkpoint()
        return checkpoints.latest_checkpoint(self.work_dir)

    def wait_for_checkpoint(self):
        """Waits for the last checkpoint saved in the background (its errors raised here)."""
        pending, self._pending_save = self._pending_save, None
        if pending is not None:
            pending.result()

    def restore_step(self, path):
        """Restores global_step alone from the checkpoint `path`."""
        tf.train.Checkpoint(global_step=self.global_step).restore(path).expect_partial()

    def _manager(self):
        """A CheckpointManager of the whole state (the module docstring's list) in work_dir."""
        weights = {id(w) for w in self.model.weights}  # the dropout SeedGenerators' states: the other variables
        parts = {"global_step": self.global_step, "input_seed": self.input_seed,
                 "dropout_random_state": [v for v in self.model.variables if id(v) not in weights],
                 **trackables(self.model), "optimizer": self.optimizer, "input_iterators": [self.iterator]}
        return tf.train.CheckpointManager(tf.train.Checkpoint(**parts), self.work_dir,
                                          self.config.keep_checkpoint_max, checkpoint_name="ckpt")

    def _restore_input_seed(self, seed, latest):
        """Sets the input order's seed: `latest`'s when resuming, else `seed`, else one drawn at random."""
        if latest:
            tf.train.Checkpoint(input_seed=self.input_seed).restore(latest).expect_partial()
            if seed is not None and seed != self.input_seed.numpy():
                logging.warning("Ignoring seed %d: the run being resumed was seeded with %d.", seed,
                                self.input_seed.numpy())
            return
        self.input_seed.assign(draw_seed() if seed is None else seed)
        logging.info("Input order seed: %d%s", self.input_seed.numpy(),
                     " (drawn at random; saved with the checkpoints)" if seed is None else "")

    @staticmethod
    def _save(manager, step):
        """Writes ckpt-<step>."""
        logging.info("Saved %s", manager.save(checkpoint_number=step))

    def _save_in_background(self, manager, step):
        """`_save` in a thread, returning at once (`wait_for_checkpoint` waits for it)."""
        saving = concurrent.futures.ThreadPoolExecutor(1)
        self._pending_save = saving.submit(self._save, manager, step)
        saving.shutdown(wait=False)

    def restore_for_predict(self, required_heads=()):
        """Loads output_dir's latest checkpoint, else the pre-trained model's, and returns the one used; raises if a
        required head is absent."""
        latest = self.latest_checkpoint()
        if latest:
            self.restore_step(latest)
            logging.info("Restoring %s (step %d)", latest, self.step)
            checkpoints.restore(self.model, latest, required_heads)
            return latest
        if not (self.pretrained and self.pretrained.restored):
            raise ValueError(f"Nothing to predict with: no checkpoint in {self.output_dir} and no init_checkpoint.")
        self.pretrained.restore(self.model, required_heads)
        return self.pretrained.init_checkpoint

    # --- training ------------------------------------------------------------------------------------------

    def train(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed=None, meanwhile=None,
              save_last_in_background=False, evaluate_every=0, on_evaluation=None):
        """Trains until global_step == num_train_steps; returns the last loop's mean loss (None: no update ran), its
        figures in TensorBoard and the log.

        `seed`: a new run's input order (None: random). `meanwhile()` runs while the graph is optimized.
        `save_last_in_background`: `wait_for_checkpoint()` waits for the last save.
        `on_evaluation(step) -> stop` runs on the chief every `evaluate_every` steps and at the end,
        after that step's checkpoint; True stops every worker.
        """
        with distribute.naming_lost_workers(self.strategy, self.output_dir):
            manager, latest = self._start(dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed)
        step = self.step
        every = evaluate_every if on_evaluation else 0

        def evaluating(step):
            return bool(every) and (step % every == 0 or step == num_train_steps)

        if step and evaluating(step) and self._stops(on_evaluation, step):
            return None
        if step >= num_train_steps:
            logging.info("Training already finished (step %d of %d).", step, num_train_steps)
            return None
        writer = summaries.Writer(os.path.join(self.output_dir, "train")) if self.is_chief else None
        with tqdm(total=num_train_steps, initial=step, unit="step", desc="train", dynamic_ncols=True,
                  disable=not self.is_chief) as bar, writer or contextlib.nullcontext():
            train_loop = self._prepare_train_loop(latest, meanwhile)
            while step < num_train_steps:
                chunk = min(self.iterations_per_loop, num_train_steps - step,
                            self.save_checkpoints_steps - step % self.save_checkpoints_steps,
                            *([every - step % every] if every else []))
                start = time.time()
                with distribute.naming_lost_workers(self.strategy, self.output_dir):
                    figures = {name: float(value) for name, value in train_loop(tf.constant(chunk)).items()}
                elapsed = time.time() - start
                step = self.step
                self._check_finite(figures, step)
                figures["learning_rate"] = float(self.optimizer.learning_rate)
                figures["examples_per_second"] = chunk * global_batch_size / elapsed
                self._report(writer, bar, chunk, step, num_train_steps, figures)
                if step == num_train_steps and save_last_in_background and not evaluating(step):
                    self._save_in_background(manager, step)
                elif step % self.save_checkpoints_steps == 0 or step == num_train_steps or evaluating(step):
                    self._save(manager, step)  # before an evaluation: a kill after it resumes at or after it
                if writer is not None and step % self.save_checkpoints_steps == 0:
                    writer.flush()  # the summaries of each checkpoint's span (and at the end, leaving the `with`)
                if evaluating(step) and self._stops(on_evaluation, step):
                    break
        return figures["loss"]

    def _stops(self, on_evaluation, step):
        """The chief's `on_evaluation(step)`, which every worker receives (one all-gather): whether to stop."""
        stop = bool(on_evaluation(step)) if self.is_chief else False
        if self.num_workers > 1:
            with distribute.naming_lost_workers(self.strategy, self.output_dir):
                stop = bool(distribute.worker_values(self.strategy, [int(stop)])[0][0])
        if stop:
            logging.info("Training stops at step %d (the chief's evaluation ended it).", step)
        return stop

    def _start(self, dataset_fn, global_batch_size, num_train_steps, num_warmup_steps, seed):
        """Builds the optimizer, seeds and opens the input, resumes the latest checkpoint; returns (CheckpointManager,
        that checkpoint or None)."""
        self.wait_for_checkpoint()
        replicas = self.strategy.num_replicas_in_sync
        accumulation = self.config.gradient_accumulation_steps
        if global_batch_size % (replicas * accumulation):
            raise ValueError(f"train_batch_size {global_batch_size} is not divisible by replicas ({replicas}) x "
                             f"gradient_accumulation_steps ({accumulation}).")
        fileio.remove_stale_temporaries(self.work_dir, checkpoints=True)  # this run owns the directory
        self.optimizer = update.build_optimizer(self.strategy, self.model, self.config, num_train_steps,
                                                num_warmup_steps)
        latest = self.latest_checkpoint()
        if self.num_workers > 1:  # the latest step every worker has a checkpoint of, worker 0's seed
            shared = distribute.worker_values(self.strategy, [checkpoint_step(latest),
                                                               draw_seed() if seed is None else seed])
            steps = {worker: step for worker, (step, _) in shared.items()}
            latest = shared_checkpoint(self.work_dir, latest, steps, self.worker_index, self.save_checkpoints_steps,
                                       self.config.keep_checkpoint_max)
            seed = shared[0][1]
        self._restore_input_seed(seed, latest)
        context = tf.distribute.InputContext(num_input_pipelines=self.num_workers,
                                             input_pipeline_id=self.worker_index, num_replicas_in_sync=replicas)
        # This worker's input: one iterator, checkpointed with the run.
        self.iterator = iter(dataset_fn(global_batch_size // replicas, context, int(self.input_seed.numpy())))
        manager = self._manager()
        if latest:
            manager.checkpoint.restore(latest).assert_existing_objects_matched()
            logging.info("Resuming from %s at step %d: restored the model (%s), the optimizer state, the dropout "
                         "random state and the input position (seed %d)", latest, self.step,
                         ", ".join(sorted(trackables(self.model))), self.input_seed.numpy())
        return manager, latest

    def _prepare_train_loop(self, resumed, meanwhile):
        """The training tf.function, optimized in a thread while this one restores `pretrained` (unless `resumed`) and
        runs `meanwhile`."""
        train_loop = self._train_loop()
        train_loop.get_concrete_function(tf.TensorSpec([], tf.int32))  # traced here (strategy, Keras state)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            optimized = pool.submit(train_loop, tf.constant(0))
            if not resumed and self.pretrained:
                self.pretrained.restore(self.model)
            if meanwhile is not None:
                meanwhile()
            optimized.result()
        return train_loop

    def _train_loop(self):
        """`train_loop(steps)`: up to `steps` updates, stopping after one the NaN guard refuses; -> the figures' means.
        Each update runs while the next batches are fetched."""
        names, guarded = self.figure_names, self._guarded()
        replica_step = update.Update(self.strategy, self.model, self.loss, self.optimizer,
                                     self.config.gradient_accumulation_steps, self.config.use_xla).replica_step

        # A tf.while_loop written out, where AutoGraph would convert a Python loop and its `break` while tracing.
        @tf.function(autograph=False)
        def train_loop(steps):
            limit = tf.cast(steps, tf.float32)

            def body(done, finite, sums, batches):
                upcoming = self._fetch_if(done + 1.0 < limit, batches)
                shares, norm = self.strategy.run(replica_step, args=(self._distribute(batches),))
                figures = {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, shares[name], axis=None)
                           for name in names}
                figures["gradient_norm"] = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
                with tf.control_dependencies([self.global_step.assign_add(1)]):
                    return (done + 1.0, tf.reduce_all([tf.math.is_finite(figures[name]) for name in guarded]),
                            {name: total + figures[name] for name, total in sums.items()}, upcoming)

            sums = {name: tf.constant(0.0) for name in names + ["gradient_norm"]}
            first = self._fetch_if(limit > 0.0, self._empty())
            done, _, sums, _ = tf.while_loop(lambda done, finite, *_: tf.logical_and(done < limit, finite), body,
                                             (tf.constant(0.0), tf.constant(True), sums, first))
            return {name: total / done for name, total in sums.items()}

        return train_loop

    # --- the loop's input (the module docstring's rules) ---------------------------------------------------------

    def _fetch(self):
        """The next update's batches, one per local replica, each copied to its device (TPU: left on the host)."""
        batches = []
        for device in self.devices:
            batch = next(self.iterator)
            if device is not None:
                with tf.device(device):
                    batch = tf.nest.map_structure(tf.identity, batch)
            batches.append(batch)
        return batches

    def _fetch_if(self, condition, otherwise):
        """`_fetch()` when `condition` holds, else `otherwise`, without reading the iterator."""
        return tf.cond(condition, self._fetch, lambda: otherwise)

    def _empty(self):
        """Zero-size batches of `_fetch()`'s structure: what a loop that runs no update carries."""
        zeros = lambda spec: tf.zeros([0 if d is None else d for d in spec.shape], spec.dtype)
        return [tf.nest.map_structure(zeros, self.iterator.element_spec) for _ in self.devices]

    def _distribute(self, batches):
        """`batches` as the per-replica values `strategy.run` takes (`_agreed` first under several workers)."""
        if self.num_workers > 1:
            batches = self._agreed(batches)
        return self._per_replica(lambda replica: batches[replica])

    def _per_replica(self, value_fn):
        """The per-replica value of `value_fn(i)` for this worker's i-th replica."""
        return self.strategy.experimental_distribute_values_from_function(
            lambda context: value_fn(context.replica_id_in_sync_group - self.first_replica))

    def _agreed(self, batches):
        """`batches` with their cut features (last axis not static) zero-padded to the update's longest over every
        worker; labels as they are."""
        cut = {name: spec.shape.rank > 1 and spec.shape[-1] is None
               for name, spec in self.iterator.element_spec[0].items()}
        if not any(cut.values()):
            return batches
        name = next(name for name, is_cut in cut.items() if is_cut)  # the cut features share their batch's length
        local = tf.reduce_max([tf.shape(features[name])[-1] for features, _ in batches])
        length = tf.reduce_max(self.strategy.gather(self._per_replica(lambda _: tf.reshape(local, [1])), axis=0))

        def padded(t):
            return tf.pad(t, [[0, 0]] * (t.shape.rank - 1) + [[0, length - tf.shape(t)[-1]]])

        agreed = []
        for device, (features, labels) in zip(self.devices, batches):
            with tf.device(device):
                agreed.append(({name: padded(t) if cut[name] else t for name, t in features.items()}, labels))
        return agreed

    def _guarded(self):
        """The figures the NaN guard checks: the gradient norm too unless the optimizer skips non-finite updates."""
        skips = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)  # an update with non-finite gradients
        return ["loss"] if skips else ["loss", "gradient_norm"]

    def _check_finite(self, figures, step):
        """The NaN guard: raises, before anything is saved, when a guarded figure of the last loop is not finite."""
        for name in self._guarded():
            if not np.isfinite(figures[name]):
                latest = self.latest_checkpoint() or "none (no checkpoint yet)"
                raise FloatingPointError(
                    f"The {name.replace('_', ' ')} is {figures[name]} at step {step}: "
                    f"stopped without saving. The last good checkpoint: {latest}.")

    def _report(self, writer, bar, chunk, step, num_train_steps, figures):
        """A loop's figures to TensorBoard (the chief's `writer`), the progress bar and the log."""
        if writer is not None:
            writer.scalars(step, figures)
        bar.update(chunk)
        bar.set_postfix(loss=f"{figures['loss']:.4f}")
        logging.info("step %d/%d %s (%.1f examples/s)", step, num_train_steps,
                     " ".join(f"{name} {figures[name]:.4f}" for name in self.figure_names),
                     figures["examples_per_second"])
