"""The one way weights are loaded into a model: `restore(model, path, required_heads)`.

It takes an original TF1 checkpoint (by variable name), one of ours (a `tf.train.Checkpoint` with the encoder
under `bert` and each head under its attribute, as the Trainer writes it; matched through its object graph), a
Model Garden TF2 checkpoint (`model_garden`), a TF Hub BERT SavedModel (`tfhub`) or a KerasHub BERT preset
(`keras_hub`), refuses an encoder that does not fit the model and a missing required head, and returns a
LoadReport by original variable name. Also: where a path or a run directory keeps its checkpoint
(`resolve_checkpoint`, `latest_checkpoint`, `checkpoint_files`), and the heads a checkpoint holds
(`checkpoint_heads`).
"""
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf import fileio
from bert_tf.checkpoints import assign, keras_hub, model_garden, name_map, original, tfhub
from bert_tf.model import task_models

_OBJECT_GRAPH = model_garden.OBJECT_GRAPH
_FILE_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")


def latest_checkpoint(directory):
    """The prefix of the checkpoint that `directory`'s `checkpoint` state file names, looked up by file name inside
    `directory` (so a copied directory whose state file records absolute paths loads its own files), or None when
    there is no state file or no such checkpoint in `directory`."""
    state = tf.train.get_checkpoint_state(directory)
    if not state:
        return None
    named = os.path.join(directory, os.path.basename(state.model_checkpoint_path))
    return named if fileio.exists(named + ".index") else None


def checkpoint_files(directory):
    """What a training run keeps in `directory`: its `checkpoint` state file and ckpt-<step> files (the paths that
    exist; the other workers' are in their own directories, output_dir/workers/worker-<i>)."""
    state = os.path.join(directory, "checkpoint")
    return sorted(([state] if fileio.exists(state) else []) + fileio.glob(os.path.join(directory, "ckpt-*")))


def resolve_checkpoint(path):
    """A checkpoint prefix from what users pass.

    `path`: a prefix (`.../bert_model.ckpt`), one of its files (`.index`, `.data-00000-of-00001`), or a directory:
    the checkpoint its `checkpoint` state file names, looked up by file name inside that directory (a copied
    directory whose state file records an absolute path never loads the weights it was copied from), else its
    `bert_model.ckpt`; a SavedModel directory (a TF Hub model) or a KerasHub preset directory is returned as it is.
    """
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
    if fileio.isdir(path):
        raise FileNotFoundError(
            f"{path} is a directory that is neither a checkpoint nor a SavedModel (nor a KerasHub preset): expected "
            f"a `checkpoint` state file, a bert_model.ckpt.index, a saved_model.pb or a KerasHub config.json in it "
            f"(it holds "
            f"{sorted(fileio.listdir(path))[:8]}).")
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path!r}: expected a prefix with a '{os.path.basename(prefix)}.index' file "
        f"beside it (e.g. .../bert_model.ckpt), a directory holding one, or a SavedModel directory.")


def _object_graph_tensors(model, reader, source):
    """Original name -> tensor getter for the model's variables in one of our (object-based) checkpoints.

    Walks the checkpoint's object graph and the model's trackables side by side from `bert` and each head, so that
    a variable is found however the checkpoint keyed it (the Trainer's hold most under the optimizer). Variables the
    model has no place for are added under their object path: reported unused (and `checkpoint_heads` finds them).
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(reader.get_tensor(_OBJECT_GRAPH))
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
        node = graph.nodes[node_id]
        keys = [a.checkpoint_key for a in node.attributes if a.name == "VARIABLE_VALUE"]
        if keys and id(obj) in names:
            tensors[names[id(obj)]] = lambda key=keys[0]: reader.get_tensor(key)
            paired.add(node_id)
        elif keys and keys[0] in floating:
            unpaired.setdefault(node_id, (path, keys[0]))
        elif not keys:
            children = tf.train.TrackableView.children(obj) if obj is not None else {}
            stack += [(children.get(c.local_name), c.node_id, f"{path}/{c.local_name}") for c in node.children]
    tensors.update({path: (lambda key=key: reader.get_tensor(key)) for node_id, (path, key) in unpaired.items()
                    if node_id not in paired})
    return tensors


def _checkpoint_tensors(model, prefix):
    """Original name -> tensor getter for what `prefix` (from `resolve_checkpoint`) holds, by its format."""
    if tfhub.is_saved_model(prefix):
        keras_paths = {variable.path: name for name, variable in name_map.original_variable_map(model).items()}
        return tfhub.hub_tensors(tfhub.read_hub_model(prefix), keras_paths)
    if keras_hub.is_preset(prefix):
        return keras_hub.preset_tensors(prefix)
    reader = original.checkpoint_reader(prefix)
    if _OBJECT_GRAPH not in reader.get_variable_to_shape_map():
        return original.original_tensors(reader)
    if model_garden.is_model_garden_graph(reader):
        return model_garden.checkpoint_tensors(reader, prefix)
    return _object_graph_tensors(model, reader, prefix)


def checkpoint_heads(path, config):
    """The heads of `task_models.BUILT_IN_HEADS` that the checkpoint at `path` (any format `restore` reads, for
    BertConfig `config`) holds in full: {head attribute: the first dimension of its first variable (a labelled head's
    num_labels)}. A head is found by its original names, or in one of our checkpoints by its object path
    (`<attribute>/<attribute path inside the head>`, e.g. classifier/projection/output_weights)."""
    probe = task_models.BertPretrainer(config, restored=True)  # pairs the pretraining heads by object
    tensors = _checkpoint_tensors(probe, resolve_checkpoint(path))
    found = {}
    for attribute, rows in task_models.BUILT_IN_HEADS.items():
        getters = [tensors.get(name) or tensors.get(f"{attribute}/{inner.replace('.', '/')}") for name, inner in rows]
        if all(getters):
            found[attribute] = int(np.shape(getters[0]())[0])
    return found


def _check_encoder(report, config):
    """Raises if the checkpoint's encoder does not fit the model's: encoder variables missing or unused."""
    missing = [n for n in report.missing if n.startswith("bert/")]
    unused = [n for n in report.unused if n.startswith("bert/")]
    if not (missing or unused):
        return
    problems = ([f"the checkpoint has {assign.describe_variables(unused)}, which the model has no place for"]
                if unused else [])
    problems += [f"it lacks {assign.describe_variables(missing)}"] if missing else []
    raise ValueError(f"{report.checkpoint} does not fit the encoder of this bert_config.json (num_hidden_layers="
                     f"{config.num_hidden_layers}, hidden_size={config.hidden_size}): {'; '.join(problems)}. Use "
                     f"the bert_config.json the checkpoint was trained with.")


def restore(model, path, required_heads=(), strict=False):
    """Loads the checkpoint at `path` (any format of the module docstring; see `resolve_checkpoint`) into `model` (a
    BertModel or a task model): the encoder and each head the model has. Returns a LoadReport (also logged).

    `required_heads`: head attributes (of the model's `heads`) the checkpoint must provide in full; `strict`: every
    other variable too. ValueError if the encoder does not fit (e.g. another num_hidden_layers), a shape differs
    (naming the config key), or a required head is missing (naming one of its variables); missing and unused head
    variables are warnings.
    """
    parts = name_map.model_parts(model)
    unknown = [h for h in required_heads if h not in parts or h == "bert"]
    if unknown:
        raise ValueError(f"{type(model).__name__} has no {', '.join(unknown)} head; its heads: {list(parts)[1:]}.")
    prefix = resolve_checkpoint(path)
    tensors = _checkpoint_tensors(model, prefix)
    report = assign.assign_by_name(model, tensors, prefix, strict=strict)
    _check_encoder(report, parts["bert"].config)
    lacking = [h for h in required_heads if h in report.missing_heads]
    if lacking:
        raise ValueError(f"{prefix} has no trained {' and '.join(lacking)} head (e.g. variable "
                         f"{model.heads[lacking[0]][0][0]!r}): fine-tune first, or pass a fine-tuned "
                         f"checkpoint.")
    report.log()
    return report
