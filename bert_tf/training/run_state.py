"""A training run's checkpointed state: what a run restarted with the same output_dir resumes.

A checkpoint `ckpt-<step>` holds, under these names:
  global_step, input_seed     the updates done; the input order's seed (given, else drawn once)
  dropout_random_state        each dropout layer's SeedGenerator state
  model, and the encoder and each head by its attribute (what `checkpoints.restore` reads)
  optimizer                   its state, once training has built it
  input_iterators             the input iterators' positions, shuffle buffers included
Each worker keeps its own (`Trainer.work_dir`).
"""
import concurrent.futures
import os
import random

import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, fileio


def trackables(model):
    """The model, and its encoder and heads by attribute (what `checkpoints.restore` reads)."""
    return {"model": model, **checkpoints.model_parts(model)}


def draw_seed():
    return random.randrange(2 ** 31)


def checkpoint_step(path):
    """The step of checkpoint `path` (ckpt-<step>); 0 for None."""
    return int(path.rsplit("-", 1)[1]) if path else 0


def _counter(name):
    return tf.Variable(0, dtype=tf.int64, trainable=False, name=name,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class RunState:
    """One worker's checkpointed state and its checkpoints in `checkpoint_dir`; made in the strategy's scope."""

    def __init__(self, model, checkpoint_dir, keep_checkpoint_max):
        self.model = model
        self.checkpoint_dir = checkpoint_dir
        self.keep_checkpoint_max = keep_checkpoint_max
        self.global_step = _counter("global_step")
        self.input_seed = _counter("input_seed")
        self.optimizer = None
        self.input_iterators = []
        self._pending_save = None

    @property
    def step(self):
        """Updates done so far (restored with a checkpoint)."""
        return int(self.global_step.numpy())

    def manager(self):
        """A CheckpointManager of the whole state (the module docstring's) in checkpoint_dir."""
        weights = {id(w) for w in self.model.weights}  # the dropout SeedGenerators' states: the other variables
        parts = {"global_step": self.global_step, "input_seed": self.input_seed,
                 "dropout_random_state": [v for v in self.model.variables if id(v) not in weights],
                 **trackables(self.model)}
        if self.optimizer is not None:
            parts["optimizer"] = self.optimizer
        if self.input_iterators:
            parts["input_iterators"] = self.input_iterators
        return tf.train.CheckpointManager(tf.train.Checkpoint(**parts), self.checkpoint_dir, self.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    def latest_checkpoint(self):
        """checkpoint_dir's latest checkpoint or None, after any background save completes."""
        self.wait_for_checkpoint()
        return checkpoints.latest_checkpoint(self.checkpoint_dir)

    def wait_for_checkpoint(self):
        """Waits for `save_in_background`'s checkpoint (its errors raised here)."""
        pending, self._pending_save = self._pending_save, None
        if pending is not None:
            pending.result()

    def restore_step(self, path):
        """Restores global_step alone from the checkpoint `path`."""
        tf.train.Checkpoint(global_step=self.global_step).restore(path).expect_partial()

    def shared_checkpoint(self, latest, steps, worker_index, save_checkpoints_steps):
        """The checkpoint of the latest step every worker has (`steps`: {worker: latest step, 0 for none}); None for
        a new run. ValueError if the steps lie over one checkpoint apart or this worker lacks the shared one."""
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
        shared = os.path.join(self.checkpoint_dir, f"ckpt-{step}") if step else None
        if step and not fileio.exists(shared + ".index"):
            raise ValueError(f"Worker {worker_index} cannot resume step {step}, the latest that worker(s) {behind} "
                             f"have a checkpoint of: {self.checkpoint_dir} no longer holds ckpt-{step} (its latest: "
                             f"{latest}; --keep_checkpoint_max={self.keep_checkpoint_max}). Rerun every worker with "
                             f"--start_over to train from the beginning.")
        logging.warning("Worker %d %s: worker(s) %s have %s; its %s is written again when the run gets there.",
                        worker_index, f"resumes from {shared}" if step else "starts the run afresh", behind,
                        f"no checkpoint after step {step}" if step else "no checkpoint", latest)
        return shared

    def restore_input_seed(self, seed, latest):
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

    def resume(self, manager, latest):
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        logging.info("Resuming from %s at step %d: restored the model (%s), the optimizer state, the dropout "
                     "random state and the input position (seed %d)", latest, self.step,
                     ", ".join(sorted(trackables(self.model))), self.input_seed.numpy())

    @staticmethod
    def save(manager, step):
        """Writes ckpt-<step>."""
        logging.info("Saved %s", manager.save(checkpoint_number=step))

    def save_in_background(self, manager, step):
        """`save` in a thread, returning at once (`wait_for_checkpoint` waits for it)."""
        saving = concurrent.futures.ThreadPoolExecutor(1)
        self._pending_save = saving.submit(self.save, manager, step)
        saving.shutdown(wait=False)
