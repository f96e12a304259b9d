"""One process of tests/training/test_multi_worker.py: trains tiny dropout-free models through the Trainer on the
real training readers of run_pretraining.py and run_classifier.py, records the shape of the batch every replica's
model is called on, and prints one line `RESULT {json}`.

    python pretraining_worker.py DATA_DIR OUTPUT_DIR

With TF_CONFIG set (one worker of a cluster) the strategy is MultiWorkerMirroredStrategy: one replica on the
worker's CPU (it takes one CPU device per worker); it is created first (under a cluster it must precede the
process's first TensorFlow op). Without, the single process: the CPU split into 2 logical devices, OneDeviceStrategy
on the first, MirroredStrategy on both.

Pretraining, DATA_DIR/pretraining-{0,1}.tfrecord (tiny_pretraining.write_varying_records: file 0 short texts, file 1
up to 128 tokens), read by PretrainingTask's reader (bert_tf.data.pretraining.dataset), batches of GLOBAL_BATCH:
1. OUTPUT_DIR/straight: STEPS updates, a checkpoint every STEPS / 2 (this worker's Trainer.work_dir). A worker
   reads its own file; the single process, on one device, reads both workers' batches of every update, padded to
   the longer and stacked (`both_workers`): the global batches the cluster trains on.
2. (a worker of the cluster) OUTPUT_DIR/resumed: this worker's copy of the mid-run checkpoint of 1, trained on to
   STEPS by a new Trainer.
Classifier, DATA_DIR/classifier (train.tsv of texts of 1 to 28 words, the tsv task; ClassifierTask's reader:
bert_tf.data.records.training_dataset): OUTPUT_DIR/classifier: STEPS updates under the cluster (a worker) or on one
device (the single process); (single process) OUTPUT_DIR/classifier_mirrored: under MirroredStrategy.

Other data (a worker of the cluster): OUTPUT_DIR/other_data: runner.train of the tsv task, worker 1 on a train.tsv
with another label on one row; RESULT's `other_data`: the error it stops with, before any update.

RESULT's `shapes`: for each run, [replica id, the input_ids shape, the longest real text (input_mask)] of every
call of the model, in the order this process ran them.
"""
import json
import os
import shutil
import sys
import types

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_pretraining  # noqa: E402

from bert_tf.data import lengths  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.tasks import runner  # noqa: E402
from bert_tf.tasks.classifier import ClassifierTask  # noqa: E402
from bert_tf.tasks.pretraining import PretrainingTask  # noqa: E402
from bert_tf.tasks.runner import RunConfig  # noqa: E402
from bert_tf.text import packing, tokenization  # noqa: E402
from bert_tf.training import distribute  # noqa: E402
from bert_tf.training.trainer import Trainer  # noqa: E402

GLOBAL_BATCH, STEPS, LEARNING_RATE = 8, 4, 1e-2
CLASSIFIER_SEQ_LENGTH = 32


def recorded(model, log):
    """`model`, each of its calls appending [replica id, input_ids' shape, the longest real text] to `log` as it
    runs (on the replica, inside the update)."""
    call = model.call

    def recording(inputs, *args, **kwargs):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        longest = tf.reduce_max(lengths.real_lengths(inputs["input_mask"]))
        tf.py_function(lambda r, s, n: log.append([int(r), s.numpy().tolist(), int(n)]),
                       [replica, tf.shape(inputs["input_ids"]), longest], [])
        return call(inputs, *args, **kwargs)

    model.call = recording
    return model


def stacked(*parts):
    """(features, labels) batches -> one batch of their rows in order, the cut tensors (packing.INPUT_NAMES) padded
    with zeros to the longest."""
    longest = tf.reduce_max([tf.shape(features["input_ids"])[-1] for features, _ in parts])

    def pad(name, t):
        return tf.pad(t, [[0, 0], [0, longest - tf.shape(t)[-1]]]) if name in packing.INPUT_NAMES else t

    return tuple({name: tf.concat([pad(name, part[i][name]) for part in parts], 0) for name in parts[0][i]}
                 for i in range(2))


def both_workers(dataset_fn, workers=2):
    """A one-device dataset_fn whose every batch stacks the batches of `workers` input pipelines (one replica
    each) of `dataset_fn`: the global batch a cluster of that many workers trains on."""
    def both(batch_size, ctx, seed):
        del ctx  # one device
        parts = [dataset_fn(batch_size // workers, tf.distribute.InputContext(workers, i, workers), seed)
                 for i in range(workers)]
        return tf.data.Dataset.zip(tuple(parts)).map(stacked)
    return both


def pretraining_data(data_dir, output_dir):
    """PretrainingTask's training dataset_fn over DATA_DIR's two files."""
    task = PretrainingTask(os.path.join(data_dir, "pretraining-*.tfrecord"),
                           max_predictions_per_seq=tiny_pretraining.PREDICTIONS, num_train_steps=STEPS)
    run = RunConfig(None, None, output_dir, max_seq_length=tiny_pretraining.SEQ_LENGTH, do_train=True)
    task.read_inputs(run, tiny_pretraining.config())
    everything = types.SimpleNamespace(worker_index=0, num_workers=1)  # a Trainer's position: one input pipeline
    return task, task.train_data(run, None, everything).dataset_fn


def train_pretraining(strategy, task, dataset_fn, output_dir, log):
    """Trains to STEPS (resuming what output_dir holds); returns the Trainer."""
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: recorded(task.build_model(tiny_pretraining.config()), log), task.loss, output_dir,
                      strategy=strategy, learning_rate=LEARNING_RATE, save_checkpoints_steps=STEPS // 2,
                      iterations_per_loop=1)
    trainer.train(dataset_fn, GLOBAL_BATCH, STEPS, 1, seed=1)
    return trainer


def train_classifier(strategy, data_dir, output_dir, log):
    """Trains the tsv task of data_dir for STEPS updates on ClassifierTask's reader; returns the Trainer."""
    vocab_file = os.path.join(data_dir, "vocab.txt")
    config = BertConfig.from_json_file(os.path.join(data_dir, "bert_config.json"))
    run = RunConfig(None, vocab_file, output_dir, max_seq_length=CLASSIFIER_SEQ_LENGTH, do_train=True)
    task = ClassifierTask("tsv", data_dir)
    task.read_inputs(run, config)
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: recorded(task.build_model(config), log), task.loss, output_dir, strategy=strategy,
                      learning_rate=LEARNING_RATE, save_checkpoints_steps=STEPS, iterations_per_loop=1)
    data = task.train_data(run, tokenization.FullTokenizer(vocab_file, do_lower_case=True), trainer)
    trainer.train(data.dataset_fn, GLOBAL_BATCH, STEPS, 1, seed=1)
    return trainer


def other_data(strategy, data_dir, output_dir):
    """(a worker of the cluster) runner.train of the tsv task of data_dir, worker 1's train.tsv with another label
    on its last row (as many examples, so that both would train as many steps): the error it raises (None if it
    trains)."""
    index = distribute.worker_position(strategy)[0]
    if index:
        copy = os.path.join(output_dir, "data")
        shutil.copytree(data_dir, copy)
        with open(os.path.join(copy, "train.tsv"), "r+") as f:
            rows = f.readlines()
            label, text = rows[-1].split("\t", 1)
            f.seek(0)
            f.writelines([*rows[:-1], f"{'pos' if label == 'neg' else 'neg'}\t{text}"])
            f.truncate()
        data_dir = copy
    vocab_file = os.path.join(data_dir, "vocab.txt")
    config = BertConfig.from_json_file(os.path.join(data_dir, "bert_config.json"))
    run = RunConfig(None, vocab_file, output_dir, max_seq_length=CLASSIFIER_SEQ_LENGTH, do_train=True,
                    train_batch_size=GLOBAL_BATCH)
    task = ClassifierTask("tsv", data_dir)
    task.read_inputs(run, config)
    trainer = Trainer(lambda: task.build_model(config), task.loss, output_dir, strategy=strategy)
    try:
        runner.train(run, task, tokenization.FullTokenizer(vocab_file, do_lower_case=True), trainer)
    except ValueError as e:
        return str(e)
    return None


def copy_checkpoint(source_dir, step, target_dir):
    """target_dir holds checkpoint ckpt-<step> of source_dir as its latest, as a run killed after it would."""
    os.makedirs(target_dir, exist_ok=True)  # the chief's: the parent of the other workers'
    for name in os.listdir(source_dir):
        if name.startswith(f"ckpt-{step}."):
            shutil.copy(os.path.join(source_dir, name), target_dir)
    tf.compat.v1.train.update_checkpoint_state(target_dir, f"ckpt-{step}")


def strategies():
    """{run kind: strategy}: "cluster" under TF_CONFIG, else "one_device" and "mirrored" on 2 CPU devices."""
    if "TF_CONFIG" in os.environ:
        return {"cluster": distribute.get_strategy("multi_worker_mirrored")}
    distribute.split_cpu(2)
    return {"one_device": distribute.get_strategy("one_device", num_gpus=0),
            "mirrored": distribute.get_strategy("mirrored", num_gpus=0)}


def main(data_dir, output_dir):
    by_kind = strategies()
    strategy = by_kind.get("cluster") or by_kind["one_device"]
    shapes = {name: [] for name in ("straight", "classifier")}
    task, dataset_fn = pretraining_data(data_dir, output_dir)
    if "cluster" not in by_kind:
        dataset_fn = both_workers(dataset_fn)
    straight = train_pretraining(strategy, task, dataset_fn, os.path.join(output_dir, "straight"),
                                 shapes["straight"])
    result = {}
    if "cluster" in by_kind:  # (resuming on one device: tests/training/test_trainer.py)
        resumed_dir = os.path.join(output_dir, "resumed")
        resumed_checkpoints = os.path.join(resumed_dir, os.path.relpath(straight.work_dir, straight.output_dir))
        copy_checkpoint(straight.work_dir, STEPS // 2, resumed_checkpoints)
        shapes["resumed"] = []
        resumed = train_pretraining(strategy, task, dataset_fn, resumed_dir, shapes["resumed"])
        result["resumed_step"] = resumed.step
        result["resumed_max_diff"] = max(float(np.abs(a.numpy() - b.numpy()).max())
                                         for a, b in zip(straight.model.weights, resumed.model.weights))
    train_classifier(strategy, os.path.join(data_dir, "classifier"), os.path.join(output_dir, "classifier"),
                     shapes["classifier"])
    if "cluster" in by_kind:
        result["other_data"] = other_data(strategy, os.path.join(data_dir, "classifier"),
                                          os.path.join(output_dir, "other_data"))
    if "mirrored" in by_kind:
        shapes.update(classifier_mirrored=[])
        train_classifier(by_kind["mirrored"], os.path.join(data_dir, "classifier"),
                         os.path.join(output_dir, "classifier_mirrored"), shapes["classifier_mirrored"])
    print("RESULT " + json.dumps({
        "pid": os.getpid(), "position": list(distribute.worker_position(strategy)),
        "replicas": strategy.num_replicas_in_sync, "strategy": type(strategy).__name__,
        "is_chief": straight.is_chief, "work_dir": straight.work_dir, "shapes": shapes, **result}),
        flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
