"""A training run's checkpointed state and its checkpoints: what a run restarted with the same output_dir resumes.

A checkpoint `ckpt-<step>` holds, under these names:
  global_step, input_seed     the updates done; the input order's seed (the one given, else drawn at random once)
  dropout_random_state        the Keras SeedGenerator state ([seed, counter]) of each dropout layer
  model, and the encoder and each head by its attribute (what `checkpoints.restore` reads)
  optimizer                   its state, once training has built it
  input_iterators             the input's tf.data iterators: their positions, shuffle buffers included
Each worker keeps its own in its checkpoint directory (bert_tf.training.distribute.worker_dir).
"""
import concurrent.futures
import random

import tensorflow as tf
from absl import logging

from bert_tf import checkpoints


def trackables(model):
    """The objects a checkpoint names: the encoder and each head by its attribute (what `checkpoints.restore`
    reads), plus the whole model."""
    return {"model": model, **checkpoints.model_parts(model)}


def random_states(model):
    """The model's state beyond its weights: the Keras SeedGenerator state ([seed, counter]) of each dropout layer."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def _counter(name):
    return tf.Variable(0, dtype=tf.int64, trainable=False, name=name,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class RunState:
    """The checkpointed state of one worker's run of `model` and its checkpoints in `checkpoint_dir` (the latest
    `keep_checkpoint_max` kept). Made in the strategy's scope, which its variables belong to.

    `optimizer` and `input_iterators` join the checkpoints once training sets them.
    """

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

    def checkpoint(self):
        """The tf.train.Checkpoint of the whole state (see the module docstring)."""
        parts = trackables(self.model)
        if self.optimizer is not None:
            parts["optimizer"] = self.optimizer
        if self.input_iterators:
            parts["input_iterators"] = self.input_iterators
        return tf.train.Checkpoint(global_step=self.global_step, input_seed=self.input_seed,
                                   dropout_random_state=random_states(self.model), **parts)

    def manager(self):
        """The CheckpointManager of checkpoint_dir, over one Checkpoint that restores and saves (its save_counter
        carries on)."""
        return tf.train.CheckpointManager(self.checkpoint(), self.checkpoint_dir, self.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    def latest_checkpoint(self):
        """The latest checkpoint of checkpoint_dir, looked up inside it (`checkpoints.latest_checkpoint`), or None;
        after the one being written in the background is complete."""
        self.wait_for_checkpoint()
        return checkpoints.latest_checkpoint(self.checkpoint_dir)

    def wait_for_checkpoint(self):
        """Waits until the checkpoint `save_in_background` writes is complete (its errors raised here); at once when
        none is being written."""
        pending, self._pending_save = self._pending_save, None
        if pending is not None:
            pending.result()

    def restore_step(self, path):
        """Restores global_step alone from the checkpoint `path`."""
        tf.train.Checkpoint(global_step=self.global_step).restore(path).expect_partial()

    def restore_input_seed(self, seed):
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

    def resume(self, manager, latest):
        """Resumes from `latest` through `manager`: the model, the optimizer, the input position and the random
        state."""
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        logging.info("Resuming from %s at step %d: restored the model (%s), the optimizer state, the dropout "
                     "random state and the input position (seed %d)", latest, self.step,
                     ", ".join(sorted(trackables(self.model))), self.input_seed.numpy())
        if not any(name.startswith("input_iterators/") for name, _ in tf.train.list_variables(latest)):
            logging.warning("%s holds no input position (written by an older bert-tf): the input starts again at "
                            "the beginning of its order.", latest)

    @staticmethod
    def save(manager, step):
        """Writes the checkpoint ckpt-<step> through `manager`. Returns its path."""
        saved = manager.save(checkpoint_number=step)
        logging.info("Saved %s", saved)
        return saved

    def save_in_background(self, manager, step):
        """`save` in a thread, returning at once (`wait_for_checkpoint` waits for it)."""
        saving = concurrent.futures.ThreadPoolExecutor(1)
        self._pending_save = saving.submit(self.save, manager, step)
        saving.shutdown(wait=False)
