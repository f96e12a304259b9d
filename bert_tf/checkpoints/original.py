"""Original TF1 checkpoints by variable name: read one as a name -> tensor map (`original_tensors`, for
`assign.assign_by_name`), and write a model back under the original names and shapes (the original code loads it;
`export_original` writes a directory like a released BERT), replacing an earlier one as a whole.
"""
import contextlib
import json
import os
import re
import shutil

import tensorflow as tf
from absl import logging

from bert_tf.checkpoints import name_map
from bert_tf.data import fileio
from bert_tf.model.encoder import BertModel


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
# bert_config.json and vocab.txt) in a directory that may hold other files (a converter's --output_dir), so it is
# not replaced by renaming a directory: `staged_checkpoint` writes the new files into a staging directory beside
# them, then a manifest naming them (one atomic rename: the commit point), then moves them in (`_commit`). A run
# killed before the manifest leaves the old files untouched and a staging directory `recover` removes; one killed
# after it is rolled forward by `recover` (the next write into the directory runs it first): the remaining files
# are moved in, and the old shards the new index does not name removed. So once a write has ended or `recover` has
# run, the directory holds the old checkpoint or the new one as a whole, never an old index with new data (a reader
# during the moves, or after a kill and before `recover`, can see a mix: renames of several files are not atomic).

MANIFEST = fileio.COMMIT_MANIFEST


@contextlib.contextmanager
def staged_checkpoint(checkpoint_prefix):
    """Yields a prefix in a new staging directory beside `checkpoint_prefix` to write a checkpoint to; the block may
    write other files into that directory too (`write_release`). When the block completes, its files and a
    `checkpoint` state file naming the prefix relative to its directory (so that a copy of the directory loads its
    own files) replace their namesakes beside `checkpoint_prefix` as a whole, and `<prefix>.data-*` shards of an
    earlier checkpoint that the new one lacks are removed; other files there are left alone. Nothing is left under
    the final names if the block fails."""
    directory = os.path.dirname(os.path.abspath(checkpoint_prefix))
    os.makedirs(directory, exist_ok=True)
    recover(directory)
    staging = fileio.temp_dir(directory, "ckpt")
    base = os.path.basename(checkpoint_prefix)
    try:
        yield os.path.join(staging, base)
        with open(os.path.join(staging, "checkpoint"), "w", encoding="utf-8") as f:
            f.write(f"model_checkpoint_path: {json.dumps(base)}\nall_model_checkpoint_paths: {json.dumps(base)}\n")
        files = sorted(os.listdir(staging), key=lambda name: name.endswith(".index"))  # the index last
        fileio.write_text_atomically(os.path.join(staging, MANIFEST), json.dumps({"prefix": base, "files": files}))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _commit(staging, directory)  # a failure from here on is completed by `recover`


def _commit(staging, directory):
    """Moves the files the manifest of `staging` names (those still there) into `directory`, removes the shards of
    its prefix there that it does not name, then `staging`. Idempotent, so that `recover` completes a killed one."""
    with open(os.path.join(staging, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    for name in manifest["files"]:
        if os.path.exists(os.path.join(staging, name)):
            os.replace(os.path.join(staging, name), os.path.join(directory, name))
    shard = re.compile(re.escape(manifest["prefix"]) + r"\.data-\d+-of-\d+")
    for name in os.listdir(directory):
        if shard.fullmatch(name) and name not in manifest["files"]:
            os.remove(os.path.join(directory, name))
    shutil.rmtree(staging)


def recover(directory):
    """Cleans up after writers killed in `directory`: completes each staged checkpoint whose manifest was written
    (`_commit`, oldest first), then removes the other stale temporaries (`fileio.remove_stale_temporaries`: staging
    directories without a manifest among them). Staging directories of running processes are left alone."""
    staged = [path for path in fileio.stale_temporaries(directory) if os.path.isfile(os.path.join(path, MANIFEST))]
    for staging in sorted(staged, key=lambda path: os.path.getmtime(os.path.join(path, MANIFEST))):
        logging.info("Completing the checkpoint replacement %s left by a killed run", staging)
        _commit(staging, directory)
    fileio.remove_stale_temporaries(directory)


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
    os.makedirs(output_dir, exist_ok=True)
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    if vocab_file:
        with fileio.written_atomically(os.path.join(output_dir, "vocab.txt")) as tmp:
            shutil.copyfile(vocab_file, tmp)
    return output_dir
