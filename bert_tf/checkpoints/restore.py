"""The one way weights are loaded into a model: `restore(model, path, required_heads)`.

It reads an original TF1 checkpoint (by variable name), one of ours (a `tf.train.Checkpoint`, encoder under `bert`, each
head under its attribute), a Model Garden TF2 checkpoint (`model_garden`), a TF Hub SavedModel (`tfhub`) or a KerasHub
preset (`keras_hub`); refuses an encoder that does not fit and a missing required head; returns a LoadReport by original
variable name.
"""
import os
import re

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import assign, keras_hub, model_garden, name_map, original, tfhub
from bert_tf.model import task_models

_FILE_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")


def latest_checkpoint(directory):
    """The prefix that `directory`'s `checkpoint` state file names, looked up by file name inside `directory` (so a
    copied directory loads its own files), or None."""
    state = tf.train.get_checkpoint_state(directory)
    if not state:
        return None
    named = os.path.join(directory, os.path.basename(state.model_checkpoint_path))
    return named if fileio.exists(named + ".index") else None


def checkpoint_files(directory):
    """The existing paths of a run's `checkpoint` state file and ckpt-<step> files in `directory`."""
    state = os.path.join(directory, "checkpoint")
    return sorted(([state] if fileio.exists(state) else []) + fileio.glob(os.path.join(directory, "ckpt-*")))


def resolve_checkpoint(path):
    """A checkpoint prefix from what users pass: a prefix, one of its files, or a directory (its `checkpoint` state
    file's, by `latest_checkpoint`, else its `bert_model.ckpt`); a SavedModel or KerasHub preset directory is returned
    as it is."""
    if not path:
        raise ValueError("No checkpoint given (init_checkpoint is empty).")
    prefix = _FILE_SUFFIX.sub("", path)
    if fileio.exists(prefix + ".index"):
        return prefix
    if tfhub.is_saved_model(path) or keras_hub.is_preset(path):
        return path
    if fileio.isdir(path):
        latest = latest_checkpoint(path)
        if latest:
            return latest
        state = tf.train.get_checkpoint_state(path)
        if state:
            raise FileNotFoundError(f"{os.path.join(path, 'checkpoint')} names {state.model_checkpoint_path!r}, "
                                    f"but {path} holds no {os.path.basename(state.model_checkpoint_path)}.index.")
        if fileio.exists(os.path.join(path, "bert_model.ckpt.index")):
            return os.path.join(path, "bert_model.ckpt")
        raise FileNotFoundError(
            f"{path} is a directory that is neither a checkpoint nor a SavedModel (nor a KerasHub preset): expected "
            f"a `checkpoint` state file, a bert_model.ckpt.index, a saved_model.pb or a KerasHub config.json in it "
            f"(it holds {sorted(fileio.listdir(path))[:8]}).")
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path!r}: expected a prefix with a '{os.path.basename(prefix)}.index' file "
        f"beside it (e.g. .../bert_model.ckpt), a directory holding one, or a SavedModel directory.")


def _object_graph_tensors(model, reader, source):
    """Original name -> tensor getter for the model's variables in one of our checkpoints, walking its object graph
    beside the model's trackables; others are added under their object path (unused)."""
    graph = model_garden.read_object_graph(reader)
    roots = [c.local_name for c in graph.nodes[0].children]
    if "bert" not in roots:
        raise ValueError(f"{source} is a tf.train.Checkpoint without a `bert` object (it holds {roots}); "
                         f"bert-tf checkpoints hold the encoder as `bert` and each head under its attribute, Model "
                         f"Garden checkpoints a BertEncoder (an object with `_embedding_layer` and "
                         f"`_transformer_layers`).")
    names = {id(variable): name for name, variable in name_map.original_variable_map(model).items()}
    floating = {key for key, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating}
    parts = name_map.model_parts(model)
    stack = [(parts.get(c.local_name), c.node_id, c.local_name) for c in graph.nodes[0].children
             if c.local_name in parts or c.local_name in task_models.BUILT_IN_HEADS]
    tensors, paired, unpaired, seen = {}, set(), {}, set()
    while stack:
        obj, node_id, path = stack.pop()
        if (id(obj), node_id) in seen:
            continue
        seen.add((id(obj), node_id))
        key = graph.value_key(node_id)
        if key and id(obj) in names:
            tensors[names[id(obj)]] = lambda key=key: reader.get_tensor(key)
            paired.add(node_id)
        elif key in floating:
            unpaired.setdefault(node_id, (path, key))
        elif not key:
            children = tf.train.TrackableView.children(obj) if obj is not None else {}
            stack += [(children.get(c.local_name), c.node_id, f"{path}/{c.local_name}")
                      for c in graph.nodes[node_id].children]
    tensors.update({path: (lambda key=key: reader.get_tensor(key)) for node_id, (path, key) in unpaired.items()
                    if node_id not in paired})
    return tensors


def _checkpoint_tensors(model, prefix):
    """Original name -> tensor getter for what `prefix` holds, by its format."""
    if tfhub.is_saved_model(prefix):
        keras_paths = {variable.path: name for name, variable in name_map.original_variable_map(model).items()}
        return tfhub.hub_tensors(tfhub.read_hub_model(prefix), keras_paths)
    if keras_hub.is_preset(prefix):
        return keras_hub.preset_tensors(prefix)
    reader = original.checkpoint_reader(prefix)
    if model_garden.OBJECT_GRAPH not in reader.get_variable_to_shape_map():
        return original.original_tensors(reader)
    tensors = model_garden.checkpoint_tensors(reader)
    return _object_graph_tensors(model, reader, prefix) if tensors is None else tensors


def checkpoint_heads(path, config):
    """{head attribute: first dimension of its first variable (num_labels)} of the `task_models.BUILT_IN_HEADS` heads
    the checkpoint at `path` holds in full, found by original name or object path."""
    probe = task_models.BertPretrainer(config, restored=True)  # pairs the pretraining heads by object
    tensors = _checkpoint_tensors(probe, resolve_checkpoint(path))
    found = {}
    for attribute, rows in task_models.BUILT_IN_HEADS.items():
        getters = [tensors.get(name) or tensors.get(f"{attribute}/{inner.replace('.', '/')}") for name, inner in rows]
        if all(getters):
            found[attribute] = int(np.shape(getters[0]())[0])
    return found


def restore(model, path, required_heads=(), strict=False):
    """Loads the checkpoint at `path` (`resolve_checkpoint`) into `model`'s encoder and heads; returns a LoadReport
    (also logged).

    `required_heads`: heads the checkpoint must hold in full; `strict`: every other variable too. ValueError for an
    encoder that does not fit, a shape that differs (naming the config key) or a missing required head; other missing or
    unused head variables are warnings.
    """
    parts = name_map.model_parts(model)
    unknown = [h for h in required_heads if h not in parts or h == "bert"]
    if unknown:
        raise ValueError(f"{type(model).__name__} has no {', '.join(unknown)} head; its heads: {list(parts)[1:]}.")
    prefix = resolve_checkpoint(path)
    tensors = _checkpoint_tensors(model, prefix)
    report = assign.assign_by_name(model, tensors, prefix, strict=strict)
    missing = [n for n in report.missing if n.startswith("bert/")]
    unused = [n for n in report.unused if n.startswith("bert/")]
    if missing or unused:  # the checkpoint's encoder does not fit the model's
        config = parts["bert"].config
        problems = ([f"the checkpoint has {assign.describe_variables(unused)}, which the model has no place for"]
                    if unused else []) + ([f"it lacks {assign.describe_variables(missing)}"] if missing else [])
        raise ValueError(f"{prefix} does not fit the encoder of this bert_config.json (num_hidden_layers="
                         f"{config.num_hidden_layers}, hidden_size={config.hidden_size}): {'; '.join(problems)}. Use "
                         f"the bert_config.json the checkpoint was trained with.")
    lacking = [h for h in required_heads if h in report.missing_heads]
    if lacking:
        raise ValueError(f"{prefix} has no trained {' and '.join(lacking)} head (e.g. variable "
                         f"{model.heads[lacking[0]][0][0]!r}): fine-tune first, or pass a fine-tuned "
                         f"checkpoint.")
    report.log()
    return report
