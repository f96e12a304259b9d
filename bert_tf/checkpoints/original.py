"""Original TF1 checkpoints by variable name: read one as a name -> tensor map (`original_tensors`, for
`assign.assign_by_name`), and write a model back under the original names and shapes (the original code loads it;
`export_original` writes a directory like a released BERT), replacing an earlier one as a whole.
"""
import contextlib
import json
import os
import re

import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import name_map
from bert_tf.model.encoder import BertModel


def checkpoint_reader(prefix):
    """A reader of the checkpoint `prefix` (local or a URL). tf.train.load_checkpoint would first ask whether the
    prefix is a directory, which TensorFlow's ram:// file system answers yes for any prefix of a file name."""
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def original_tensors(reader):
    """Original name -> tensor getter for every variable of an original (name-based) TF1 checkpoint."""
    return {name: (lambda n=name: reader.get_tensor(n)) for name in reader.get_variable_to_shape_map()}


def _model_tensors(model):
    """The model's variables as arrays by original TF1 name (`name_map.original_variable_map`)."""
    return {name: variable.numpy() for name, variable in name_map.original_variable_map(model).items()}


def save_original_checkpoint(model, checkpoint_prefix):
    """Writes the model's variables under the original TF1 names and shapes (the original code can load it):
    `save_tensors` of `_model_tensors(model)`. Returns the prefix."""
    return save_tensors(_model_tensors(model), checkpoint_prefix)


def save_tensors(tensors, checkpoint_prefix):
    """Writes `tensors` (original name -> array) as a TF1 checkpoint, as float32 (`staged_checkpoint`). Returns the
    prefix."""
    with staged_checkpoint(checkpoint_prefix) as staged:
        _write_tensors(tensors, staged)
    return checkpoint_prefix


def _write_tensors(tensors, prefix):
    """SaveV2 of `tensors` (name -> array) as float32 under `prefix`."""
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[n], tf.float32) for n in names])


# --- replacing a checkpoint's files as a whole ------------------------------------------------------------------
# A checkpoint is several files (`<prefix>.index`, `<prefix>.data-*`, the `checkpoint` state file; a release adds
# bert_config.json and vocab.txt) in a directory that may hold other files (a converter's --output_dir): they are
# committed together by `fileio.staged_directory`, the .index last (a reader takes a checkpoint only with its index),
# the old shards the new index does not name removed, other files left alone; a write killed half-way leaves the
# old checkpoint, none (no .index) or the new one, and the next write replaces it.


@contextlib.contextmanager
def staged_checkpoint(checkpoint_prefix):
    """Yields a prefix in a new staging directory beside `checkpoint_prefix` to write a checkpoint to; the block may
    write other files into that directory too (`write_release`). When the block completes, its files and a
    `checkpoint` state file naming the prefix relative to its directory (so that a copy of the directory loads its
    own files) replace their namesakes beside `checkpoint_prefix` as a whole, and `<prefix>.data-*` shards of an
    earlier checkpoint that the new one lacks are removed; other files there are left alone. Nothing is left under
    the final names if the block fails."""
    directory, base = os.path.dirname(checkpoint_prefix) or ".", os.path.basename(checkpoint_prefix)
    shards = re.escape(base) + r"\.data-\d+-of-\d+"
    with fileio.staged_directory(directory, key=base + ".index", remove=shards, label="ckpt") as staging:
        yield os.path.join(staging, base)
        fileio.write_text_atomically(os.path.join(staging, "checkpoint"), f"model_checkpoint_path: {json.dumps(base)}\n"
                                     f"all_model_checkpoint_paths: {json.dumps(base)}\n")


def export_original(model, output_dir, vocab_file=None):
    """Writes a directory like a released BERT: bert_model.ckpt.*, bert_config.json and (optionally) vocab.txt
    (`write_release`)."""
    bert = model if isinstance(model, BertModel) else model.bert
    return write_release(_model_tensors(model), bert.config, output_dir, vocab_file)


def write_release(tensors, config, output_dir, vocab_file=None):
    """Writes `tensors` (original name -> array) as output_dir/bert_model.ckpt with bert_config.json and (if
    `vocab_file`) vocab.txt, replacing an earlier release's files as a whole (`staged_checkpoint`); other files in
    output_dir are kept. Returns output_dir."""
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
