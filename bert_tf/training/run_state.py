"""A training run's checkpointed state: what a run restarted with the same output_dir resumes.

A checkpoint `ckpt-<step>` holds, under these names:
  global_step, input_seed     the updates done; the input order's seed (given, else drawn once)
  dropout_random_state        each dropout layer's SeedGenerator state
  model, and the encoder and each head by its attribute (what `checkpoints.restore` reads)
  optimizer                   its state, once training has built it
  input_iterators             the input iterators' positions, shuffle buffers included
Each worker keeps its own (`Trainer.work_dir`); the Trainer writes and resumes them.
"""
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
