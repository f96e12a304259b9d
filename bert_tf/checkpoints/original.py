"""Original TF1 checkpoints by variable name: read one as a name -> tensor map (`original_tensors`), and write a
model back under the original names and shapes (`export_original`: a directory like a released BERT).

A checkpoint's files replace an earlier one's as a whole (`staged_checkpoint`): a killed write leaves the old, none
or the new checkpoint; other files in the directory are left alone.
"""
import contextlib
import json
import os
import re

import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import name_map
from bert_tf.model import task_models


def checkpoint_reader(prefix):
    """A reader of the checkpoint `prefix` (local or a URL; tf.train.load_checkpoint mistakes a ram:// prefix for a
    directory)."""
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def original_tensors(reader):
    """Original name -> tensor getter for every variable of an original (name-based) TF1 checkpoint."""
    return {name: (lambda n=name: reader.get_tensor(n)) for name in reader.get_variable_to_shape_map()}


def save_original_checkpoint(model, checkpoint_prefix):
    """Writes the model's variables under the original TF1 names and shapes; returns the prefix."""
    return save_tensors(name_map.model_tensors(model), checkpoint_prefix)


def save_tensors(tensors, checkpoint_prefix):
    """Writes `tensors` (original name -> array) as a float32 TF1 checkpoint; returns the prefix."""
    with staged_checkpoint(checkpoint_prefix) as staged:
        _write_tensors(tensors, staged)
    return checkpoint_prefix


def _write_tensors(tensors, prefix):
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[n], tf.float32) for n in names])


@contextlib.contextmanager
def staged_checkpoint(checkpoint_prefix):
    """Yields a staging prefix to write a checkpoint (and other files) to; when the block completes, they and a
    `checkpoint` state file replace their namesakes beside `checkpoint_prefix` (`fileio.staged_directory`)."""
    directory, base = os.path.dirname(checkpoint_prefix) or ".", os.path.basename(checkpoint_prefix)
    shards = re.escape(base) + r"\.data-\d+-of-\d+"
    with fileio.staged_directory(directory, key=base + ".index", remove=shards, label="ckpt") as staging:
        yield os.path.join(staging, base)
        fileio.write_text_atomically(os.path.join(staging, "checkpoint"), f"model_checkpoint_path: {json.dumps(base)}\n"
                                     f"all_model_checkpoint_paths: {json.dumps(base)}\n")


def export_original(model, output_dir, vocab_file=None):
    """Writes a directory like a released BERT (`write_release`)."""
    config = task_models.encoder_of(model).config
    return write_release(name_map.model_tensors(model), config, output_dir, vocab_file)


def write_release(tensors, config, output_dir, vocab_file=None):
    """Writes `tensors` (original name -> array) as output_dir/bert_model.ckpt with bert_config.json and (if
    `vocab_file`) vocab.txt, as a whole; returns output_dir."""
    with staged_checkpoint(os.path.join(output_dir, "bert_model.ckpt")) as staged:
        _write_tensors(tensors, staged)
        write_release_files(config, os.path.dirname(staged), vocab_file)
    return output_dir


def write_release_files(config, output_dir, vocab_file=None):
    """Writes bert_config.json and (if `vocab_file`) a copy of it as vocab.txt into output_dir; returns it."""
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    if vocab_file:
        fileio.copy_file(vocab_file, os.path.join(output_dir, "vocab.txt"))
    return output_dir
