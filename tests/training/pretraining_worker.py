"""One process of tests/training/test_multi_worker.py: trains a tiny BertPretrainer with PretrainingLoss through the
Trainer, then resumes a copy of its run from the middle, and prints one line `RESULT {json}`.

    python pretraining_worker.py OUTPUT_DIR

With TF_CONFIG set (one worker of a cluster) the strategy is MultiWorkerMirroredStrategy, else OneDeviceStrategy;
it is created first (under a cluster it must precede the process's first TensorFlow op).
Every update takes the next global batch of GLOBAL_BATCH rows of the golden records (in file order); input
pipeline p of n gets rows [p * GLOBAL_BATCH / n, (p + 1) * GLOBAL_BATCH / n) of it, so that the workers together
see what one device sees.

1. OUTPUT_DIR/straight: STEPS updates, a checkpoint every STEPS / 2 (this worker's Trainer.checkpoint_dir);
2. OUTPUT_DIR/resumed: this worker's copy of the mid-run checkpoint of 1, trained on to STEPS by a new Trainer.
"""
import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_pretraining  # noqa: E402

from bert_tf.data.pretraining import dataset  # noqa: E402
from bert_tf.model.task_models import BertPretrainer  # noqa: E402
from bert_tf.tasks.pretraining import PretrainingLoss  # noqa: E402
from bert_tf.training import distribute  # noqa: E402
from bert_tf.training.trainer import Trainer  # noqa: E402

GLOBAL_BATCH, STEPS, LEARNING_RATE = 8, 4, 1e-2


def golden_rows():
    """(features, labels) of every record, in file order: dicts of [60, ...] NumPy arrays."""
    data = dataset.evaluation_dataset([tiny_pretraining.RECORDS], tiny_pretraining.NUM_RECORDS,
                                      tiny_pretraining.SEQ_LENGTH, tiny_pretraining.PREDICTIONS)
    return tf.nest.map_structure(lambda t: t.numpy(), next(iter(data)))


def dataset_fn(batch_size, ctx, seed):
    """This input pipeline's part of each global batch (one replica per pipeline: `batch_size` rows of it)."""
    del seed  # one fixed order
    pipelines, pipeline = ctx.num_input_pipelines, ctx.input_pipeline_id
    assert batch_size * pipelines == GLOBAL_BATCH, (batch_size, pipelines)
    rows = golden_rows()
    usable = tiny_pretraining.NUM_RECORDS // GLOBAL_BATCH * GLOBAL_BATCH

    def part(array):
        batches = array[:usable].reshape(-1, pipelines, batch_size, *array.shape[1:])
        return batches[:, pipeline].reshape(-1, *array.shape[1:])

    data = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(part, rows))
    return data.repeat().batch(batch_size, drop_remainder=True)


def train(strategy, output_dir):
    """Trains to STEPS (resuming what output_dir holds); returns the Trainer."""
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: BertPretrainer(tiny_pretraining.config()), PretrainingLoss(), output_dir,
                      strategy=strategy, learning_rate=LEARNING_RATE, save_checkpoints_steps=STEPS // 2,
                      iterations_per_loop=1)
    trainer.train(dataset_fn, GLOBAL_BATCH, STEPS, 1, seed=1)
    return trainer


def copy_checkpoint(source_dir, step, target_dir):
    """target_dir holds checkpoint ckpt-<step> of source_dir as its latest, as a run killed after it would."""
    os.makedirs(target_dir, exist_ok=True)  # the chief's: the parent of the other workers'
    for name in os.listdir(source_dir):
        if name.startswith(f"ckpt-{step}."):
            shutil.copy(os.path.join(source_dir, name), target_dir)
    tf.compat.v1.train.update_checkpoint_state(target_dir, f"ckpt-{step}")


def main(output_dir):
    strategy = distribute.get_strategy("multi_worker_mirrored" if "TF_CONFIG" in os.environ else "one_device")
    straight = train(strategy, os.path.join(output_dir, "straight"))
    resumed_dir = os.path.join(output_dir, "resumed")
    resumed_checkpoints = os.path.join(resumed_dir, os.path.relpath(straight.checkpoint_dir, straight.output_dir))
    copy_checkpoint(straight.checkpoint_dir, STEPS // 2, resumed_checkpoints)
    resumed = train(strategy, resumed_dir)
    difference = max(float(np.abs(a.numpy() - b.numpy()).max())
                     for a, b in zip(straight.model.weights, resumed.model.weights))
    print("RESULT " + json.dumps({
        "pid": os.getpid(), "position": list(distribute.worker_position(strategy)),
        "replicas": strategy.num_replicas_in_sync, "strategy": type(strategy).__name__,
        "is_chief": straight.is_chief, "checkpoint_dir": straight.checkpoint_dir,
        "resumed_step": resumed.step, "resumed_max_diff": difference}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
