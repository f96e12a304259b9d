"""Real checkpoints written by the Trainer (one update, optimizer included) for any tiny task model of
bert_tf.model.task_models, with inputs and a loss made from the model itself; readers of what a training run
writes (TensorBoard scalars, checkpoint tensors, the numbers of output files)."""
import collections
import glob
import os
import re

import numpy as np
import tensorflow as tf

from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer

_DECIMAL = r"-?\d+\.\d+(?:e-?\d+)?"


def random_features(model, batch_size=2, seq_length=6, seed=0):
    """int32 inputs for every input of `model` (None dims -> batch_size / seq_length), values 0 or 1, which are
    valid ids, mask values, segment ids and masked positions alike."""
    rng = np.random.RandomState(seed)
    return {name: rng.randint(0, 2, [batch_size] + [d or seq_length for d in tensor.shape[1:]]).astype(np.int32)
            for name, tensor in model.input.items()}


def _loss(labels, outputs):
    """Per-example [B]: the mean square of every floating-point output."""
    del labels
    return tf.add_n([tf.reduce_mean(tf.reshape(tf.square(v), [tf.shape(v)[0], -1]), -1)
                     for v in outputs.values() if v.dtype.is_floating])


def train_one_step(build_model, output_dir):
    """Trains `build_model()` for one update with the Trainer; returns the trainer (its checkpoint: ckpt-1)."""
    trainer = Trainer(build_model, _loss, str(output_dir), strategy=distribute.get_strategy("one_device"),
                      learning_rate=1e-2)
    features = random_features(trainer.model)

    def dataset_fn(batch_size, ctx=None, seed=None):  # one fixed order: the seed is not used
        labels = {"unused": np.zeros(len(features["input_ids"]), np.int32)}
        return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(batch_size, drop_remainder=True)

    trainer.train(dataset_fn, 2, 1, 0)
    return trainer


def summaries(output_dir):
    """{tag: {step: value}} of the scalars in output_dir/train (every event file), and the event files' names."""
    series = collections.defaultdict(dict)
    files = sorted(glob.glob(os.path.join(output_dir, "train", "events.out.tfevents.*")))
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                series[value.tag][event.step] = float(tf.make_ndarray(value.tensor))
    return dict(series), [os.path.basename(path) for path in files]


def checkpoint_floats(checkpoint):
    """{name: value} of every floating-point tensor of `checkpoint` (a prefix, or a directory: its latest)."""
    checkpoint = str(checkpoint)
    if os.path.isdir(checkpoint):
        checkpoint = tf.train.latest_checkpoint(checkpoint)
    reader = tf.train.load_checkpoint(checkpoint)
    return {name: reader.get_tensor(name) for name, dtype in reader.get_variable_to_dtype_map().items()
            if dtype.is_floating}


def max_diff(a, b):
    """The largest absolute difference between two {name: array} of the same names."""
    assert sorted(a) == sorted(b)
    return max(float(np.abs(np.asarray(a[name]) - np.asarray(b[name])).max()) for name in a)


def numbers_and_text(path):
    """The decimal numbers of an output file, in order, and its text with each replaced by "#" (compared
    separately)."""
    text = open(path, encoding="utf-8").read()
    return [float(x) for x in re.findall(_DECIMAL, text)], re.sub(_DECIMAL, "#", text)
