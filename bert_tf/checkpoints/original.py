"""Original TF1 checkpoints by variable name: assign name -> tensor maps to a model (with a LoadReport of what was
loaded, missing and unused), and write a model back under the original names and shapes (the original code loads
it; `export_original` writes a directory like a released BERT).
"""
import contextlib
import dataclasses
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.checkpoints import name_map
from bert_tf.data import fileio
from bert_tf.model.encoder import BertModel


@dataclasses.dataclass
class LoadReport:
    """What a checkpoint load did, by original variable name (unused variables of one of our checkpoints that the
    model has no place for: by object path)."""
    checkpoint: str
    loaded: list
    missing: list  # variables of the model that the checkpoint lacks (left at their initial values)
    unused: list  # checkpoint variables the model has no place for (optimizer slots excluded)
    heads: list = dataclasses.field(default_factory=list)  # head attributes of the model loaded in full
    missing_heads: list = dataclasses.field(default_factory=list)  # head attributes left (partly) initialized

    def log(self):
        """Per-variable details at INFO; missing heads and unused checkpoint variables also as one WARNING each."""
        logging.info("Loaded %d variables from %s (heads: %s)", len(self.loaded), self.checkpoint,
                     ", ".join(self.heads) or "none")
        for name in self.missing:
            logging.info("  not in checkpoint (newly initialized): %s", name)
        for name in self.unused:
            logging.info("  in checkpoint but unused: %s", name)
        if self.missing_heads:
            logging.warning("%s has no trained %s head: newly initialized.", self.checkpoint,
                            " and ".join(self.missing_heads))
        if self.unused:
            logging.warning("%s: %s unused by this model.", self.checkpoint, describe_variables(self.unused))


def _span(numbers):
    """[4, 5, 6] -> "4..6"; [1, 3] -> "1,3"."""
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}..{numbers[-1]}"
    return ",".join(map(str, numbers))


def describe_variables(names):
    """A short account of variable names: encoder layers as a range ("bert/encoder/layer_4..5"), a few others."""
    layers = sorted({int(m.group(1)) for m in map(name_map.ENCODER_LAYER.match, names) if m})
    others = [n for n in names if not name_map.ENCODER_LAYER.match(n)]
    parts = ([f"bert/encoder/layer_{_span(layers)}"] if layers else []) + others[:3]
    return f"{', '.join(parts)}{', ...' if len(others) > 3 else ''} ({len(names)} variables)"


def shape_error(name, source, ckpt_shape, model_shape):
    """A ValueError naming the config key behind the first dimension that differs."""
    suffix = name.rsplit("/", 1)[-1]
    keys = name_map.SHAPE_KEYS.get(name) or {"output_weights": ("num_labels", "hidden_size"),
                                     "output_bias": ("num_labels",)}.get(suffix, ())
    dims = [i for i, (a, b) in enumerate(zip(ckpt_shape, model_shape)) if a != b] or [len(model_shape)]
    key = keys[dims[0]] if dims[0] < len(keys) else "hidden_size / intermediate_size"
    if name == "bert/embeddings/word_embeddings" and dims[0] < 2:
        return ValueError(f"{key} mismatch: {source} has {name} with {ckpt_shape[dims[0]]} "
                          f"{('rows', 'columns')[dims[0]]} but the model's config says {key}="
                          f"{model_shape[dims[0]]}; use the bert_config.json and vocab.txt that came with the "
                          f"checkpoint.")
    return ValueError(f"Shape mismatch for {name} (check `{key}`): {source} has {list(ckpt_shape)}, the model "
                      f"expects {list(model_shape)}.")


def assign_by_name(model, tensors, source, strict=False):
    """Assigns `tensors` (original name -> array-like getter) to the model's variables.

    Args:
      tensors: dict of original variable name -> zero-argument callable returning a numpy array.
      source: a name for error messages (file path).
      strict: raise if any of the model's variables is missing from `tensors`.
    Returns: LoadReport.
    """
    mapping = name_map.original_variable_map(model)
    loaded, missing = [], []
    for name, variable in mapping.items():
        if name not in tensors:
            missing.append(name)
            continue
        value = np.asarray(tensors[name]())
        if tuple(value.shape) != tuple(variable.shape):
            raise shape_error(name, source, value.shape, variable.shape)
        variable.assign(value.astype(variable.dtype))
        loaded.append(name)
    unused = sorted(n for n in tensors if n not in mapping and not name_map.OPTIMIZER_NAME.search(n))
    heads = [h for h in name_map.model_parts(model) if h != "bert"]
    lacking = [h for h in heads if any(name in missing for name, _ in name_map.TASK_HEADS[h])]
    report = LoadReport(source, loaded, missing, unused, [h for h in heads if h not in lacking], lacking)
    if strict and missing:
        raise ValueError(f"{source} lacks {len(missing)} variables the model needs, e.g. {missing[:3]}.")
    if not loaded:
        raise ValueError(f"{source} holds no variable of a BERT model under the original names "
                         f"(found e.g. {sorted(tensors)[:3]}).")
    return report


def original_tensors(reader):
    """Original name -> tensor getter for every variable of an original (name-based) TF1 checkpoint."""
    return {name: (lambda n=name: reader.get_tensor(n)) for name in reader.get_variable_to_shape_map()}


def save_original_checkpoint(model, checkpoint_prefix):
    """Writes the model's variables under the original TF1 names and shapes (the original code can load it):
    `save_tensors` of `name_map.original_variable_map(model)`. Returns the prefix."""
    mapping = name_map.original_variable_map(model)
    return save_tensors({name: variable.numpy() for name, variable in mapping.items()}, checkpoint_prefix)


def save_tensors(tensors, checkpoint_prefix):
    """Writes `tensors` (original name -> array) as a TF1 checkpoint, as float32 (`staged_checkpoint`). Returns the
    prefix."""
    with staged_checkpoint(checkpoint_prefix) as staged:
        names = sorted(tensors)
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.convert_to_tensor(tensors[n], tf.float32) for n in names])
    return checkpoint_prefix


@contextlib.contextmanager
def staged_checkpoint(checkpoint_prefix):
    """Yields a prefix in a temporary directory beside `checkpoint_prefix` to write a checkpoint to; when the block
    ends, moves its files (`<prefix>.index`, `<prefix>.data-*`) beside `checkpoint_prefix` and writes a `checkpoint`
    state file naming the prefix relative to its directory (so that a copy of the directory loads its own files).
    Nothing is left under the final names if the block fails."""
    directory = os.path.dirname(os.path.abspath(checkpoint_prefix))
    os.makedirs(directory, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".tmp_ckpt_", dir=directory)
    try:
        base = os.path.basename(checkpoint_prefix)
        yield os.path.join(staging, base)
        for filename in os.listdir(staging):
            os.replace(os.path.join(staging, filename), os.path.join(directory, filename))
        state = os.path.join(staging, "checkpoint")
        with open(state, "w", encoding="utf-8") as f:
            f.write(f"model_checkpoint_path: {json.dumps(base)}\nall_model_checkpoint_paths: {json.dumps(base)}\n")
        os.replace(state, os.path.join(directory, "checkpoint"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_original(model, output_dir, vocab_file=None):
    """Writes a directory like a released BERT: bert_model.ckpt.*, bert_config.json and (optionally) vocab.txt."""
    bert = model if isinstance(model, BertModel) else model.bert
    save_original_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"))
    return write_release_files(bert.config, output_dir, vocab_file)


def write_release_files(config, output_dir, vocab_file=None):
    """Writes bert_config.json and (if `vocab_file`) a copy of it as vocab.txt into output_dir; returns it."""
    os.makedirs(output_dir, exist_ok=True)
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    if vocab_file:
        with fileio.written_atomically(os.path.join(output_dir, "vocab.txt")) as tmp:
            shutil.copyfile(vocab_file, tmp)
    return output_dir
