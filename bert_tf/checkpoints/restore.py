"""The one way every script loads a checkpoint: `restore(model, path, required_heads)`.

It takes an original TF1 checkpoint (by variable name), one of ours (a `tf.train.Checkpoint` with the encoder
under `bert` and each head under its attribute, as the Trainer writes it; matched through its object graph), a
Model Garden TF2 checkpoint or a TF Hub BERT SavedModel (`model_garden`), refuses an encoder that does not fit the
model and a missing required head, and returns a LoadReport by original variable name. `model_files` resolves the
bert_config, vocabulary and casing a run uses, from the flags or from a TF Hub model.
"""
import dataclasses
import os
import re

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.checkpoints import model_garden, name_map, original
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.text import tokenization

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
    return named if tf.io.gfile.exists(named + ".index") else None


def checkpoint_files(directory):
    """What a training run keeps in `directory`: its `checkpoint` state file and ckpt-<step> files (the paths that
    exist; the other workers' are in their own directories, output_dir/workers/worker-<i>)."""
    state = os.path.join(directory, "checkpoint")
    return sorted(([state] if tf.io.gfile.exists(state) else []) + tf.io.gfile.glob(os.path.join(directory, "ckpt-*")))


def resolve_checkpoint(path):
    """A checkpoint prefix from what users pass.

    `path`: a prefix (`.../bert_model.ckpt`), one of its files (`.index`, `.data-00000-of-00001`), or a directory:
    the checkpoint its `checkpoint` state file names, looked up by file name inside that directory (a copied
    directory whose state file records an absolute path never loads the weights it was copied from), else its
    `bert_model.ckpt`; a SavedModel directory (a TF Hub model) is returned as it is.
    """
    if not path:
        raise ValueError("No checkpoint given (init_checkpoint is empty).")
    prefix = _FILE_SUFFIX.sub("", path)
    if tf.io.gfile.exists(prefix + ".index"):
        return prefix
    if model_garden.is_saved_model(path):
        return path
    if tf.io.gfile.isdir(path):
        latest = latest_checkpoint(path)
        if latest:
            return latest
        state = tf.train.get_checkpoint_state(path)
        if state:
            raise FileNotFoundError(f"{os.path.join(path, 'checkpoint')} names {state.model_checkpoint_path!r}, "
                                    f"but {path} holds no {os.path.basename(state.model_checkpoint_path)}.index.")
        if tf.io.gfile.exists(os.path.join(path, "bert_model.ckpt.index")):
            return os.path.join(path, "bert_model.ckpt")
    if tf.io.gfile.isdir(path):
        raise FileNotFoundError(
            f"{path} is a directory that is neither a checkpoint nor a SavedModel: expected a `checkpoint` state "
            f"file, a bert_model.ckpt.index or a saved_model.pb in it (it holds "
            f"{sorted(tf.io.gfile.listdir(path))[:8]}).")
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path!r}: expected a prefix with a '{os.path.basename(prefix)}.index' file "
        f"beside it (e.g. .../bert_model.ckpt), a directory holding one, or a SavedModel directory.")


def _object_graph_tensors(model, reader, source):
    """Original name -> tensor getter for the model's variables in one of our (object-based) checkpoints.

    Walks the checkpoint's object graph and the model's trackables side by side from the encoder (`bert`) and each
    head attribute, so that a variable is found however the checkpoint keyed it (the Trainer's checkpoints hold
    most variables under optimizer/_trainable_variables/N). Floating-point checkpoint variables under those roots
    that the model has no place for are added under their object path (e.g. "bert/_operations/13/attention/
    query/_kernel", or "classifier/projection/output_weights" for a head the model lacks) without a getter, so that
    they are reported unused.
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
             if c.local_name in ("bert", *name_map.TASK_HEADS)]
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
            unpaired.setdefault(node_id, path)
        elif not keys:
            children = tf.train.TrackableView.children(obj) if obj is not None else {}
            stack += [(children.get(c.local_name), c.node_id, f"{path}/{c.local_name}") for c in node.children]
    tensors.update({path: None for node_id, path in unpaired.items() if node_id not in paired})
    return tensors


def _checkpoint_tensors(model, prefix):
    """Original name -> tensor getter for what `prefix` (from `resolve_checkpoint`) holds, by its format."""
    if model_garden.is_saved_model(prefix):
        keras_paths = {variable.path: name for name, variable in name_map.original_variable_map(model).items()}
        return model_garden.hub_tensors(model_garden.read_hub_model(prefix), keras_paths)
    reader = tf.train.load_checkpoint(prefix)
    if _OBJECT_GRAPH not in reader.get_variable_to_shape_map():
        return original.original_tensors(reader)
    if model_garden.is_model_garden_graph(reader):
        return model_garden.checkpoint_tensors(reader, prefix)
    return _object_graph_tensors(model, reader, prefix)


def _check_encoder(report, config):
    """Raises if the checkpoint's encoder does not fit the model's: encoder variables missing or unused."""
    missing = [n for n in report.missing if n.startswith("bert/")]
    unused = [n for n in report.unused if n.startswith("bert/")]
    if not (missing or unused):
        return
    problems = ([f"the checkpoint has {original.describe_variables(unused)}, which the model has no place for"]
                if unused else [])
    problems += [f"it lacks {original.describe_variables(missing)}"] if missing else []
    raise ValueError(f"{report.checkpoint} does not fit the encoder of this bert_config.json (num_hidden_layers="
                     f"{config.num_hidden_layers}, hidden_size={config.hidden_size}): {'; '.join(problems)}. Use "
                     f"the bert_config.json the checkpoint was trained with.")


def restore(model, path, required_heads=(), strict=False):
    """Loads a checkpoint into `model` (a BertModel or a task model): the encoder and each head the model has.

    `path`: an original TF1 checkpoint (loaded by variable name), one of ours (a tf.train.Checkpoint with the
    encoder under `bert` and heads under their attributes, as the Trainer writes it; matched through its object
    graph) or a Model Garden TF2 checkpoint (through its object graph), as a prefix, one of its files, or a
    directory (see `resolve_checkpoint`); or a TF Hub BERT SavedModel directory (see `model_garden`).
    `required_heads`: head attributes (keys of name_map.TASK_HEADS) the checkpoint must provide in full.
    `strict`: also raise if any other variable of the model is missing.
    Raises ValueError if the encoder does not fit (missing or unused encoder variables, e.g. another
    num_hidden_layers), a shape differs (naming the config key), or a required head is missing (naming one of its
    original variables). Missing and unused head variables are logged as warnings.
    Returns: LoadReport (also logged).
    """
    parts = name_map.model_parts(model)
    unknown = [h for h in required_heads if h not in parts or h == "bert"]
    if unknown:
        raise ValueError(f"{type(model).__name__} has no {', '.join(unknown)} head; its heads: {list(parts)[1:]}.")
    prefix = resolve_checkpoint(path)
    tensors = _checkpoint_tensors(model, prefix)
    report = original.assign_by_name(model, tensors, prefix, strict=strict)
    _check_encoder(report, parts["bert"].config)
    lacking = [h for h in required_heads if h in report.missing_heads]
    if lacking:
        raise ValueError(f"{prefix} has no trained {' and '.join(lacking)} head (e.g. variable "
                         f"{name_map.TASK_HEADS[lacking[0]][0][0]!r}): fine-tune first, or pass a fine-tuned "
                         f"checkpoint.")
    report.log()
    return report


def load_original_checkpoint(model, init_checkpoint, strict=False):
    """Loads an original TF1 BERT checkpoint (or one of ours) into `model`: `restore` with no required head.

    Optimizer slots (adam_m/adam_v, global_step) are skipped; missing and unused variables are reported.
    Returns: LoadReport (also logged).
    """
    return restore(model, init_checkpoint, strict=strict)


@dataclasses.dataclass
class ModelFiles:
    """The pre-trained model a run uses besides its weights (`model_files`)."""
    config: BertConfig
    vocab_file: str | None
    do_lower_case: bool


def model_files(init_checkpoint=None, bert_config_file=None, vocab_file=None, do_lower_case=None):
    """The bert_config, vocabulary and casing of a run: those given; where one is not given (None), the model's
    own: the bert_config.json in init_checkpoint's directory (a release or SavedModel directory), else for a TF Hub
    BERT SavedModel the config inferred from its weights (`model_garden.infer_bert_config`); a TF Hub model's
    `vocab_file` asset and `do_lower_case` variable. do_lower_case defaults to True (the original flag's default).

    Raises ValueError if no bert_config is given or found, if a given vocab_file's size differs from the Hub
    model's vocabulary, or if a given do_lower_case contradicts the Hub model's.
    Returns: ModelFiles.
    """
    hub = (model_garden.read_hub_model(init_checkpoint) if init_checkpoint and model_garden.is_saved_model(
        init_checkpoint) else None)
    beside = _config_beside(init_checkpoint)
    if bert_config_file or beside:
        config = BertConfig.from_json_file(bert_config_file or beside)
    elif hub:
        config = model_garden.infer_bert_config(hub)
    else:
        raise ValueError(f"No bert_config_file given, and init_checkpoint={init_checkpoint!r} has no "
                         f"bert_config.json beside it and is not a TF Hub BERT SavedModel to infer one from.")
    if hub is None:
        return ModelFiles(config, vocab_file, True if do_lower_case is None else do_lower_case)
    _check_hub_vocab(hub, vocab_file)
    if do_lower_case is not None and hub.do_lower_case is not None and do_lower_case != hub.do_lower_case:
        raise ValueError(f"do_lower_case={do_lower_case} contradicts {hub.path}, whose do_lower_case variable says "
                         f"{hub.do_lower_case}: leave do_lower_case out to use the model's own casing.")
    casing = next(c for c in (do_lower_case, hub.do_lower_case, True) if c is not None)
    return ModelFiles(config, vocab_file or hub.vocab_file, casing)


def _config_beside(init_checkpoint):
    """The bert_config.json in init_checkpoint's directory (a release or SavedModel directory), or None."""
    if not init_checkpoint:
        return None
    directory = init_checkpoint if tf.io.gfile.isdir(init_checkpoint) else os.path.dirname(init_checkpoint)
    path = os.path.join(directory, "bert_config.json")
    return path if tf.io.gfile.exists(path) else None


def _check_hub_vocab(hub, vocab_file):
    """Raises if `vocab_file` (when given) does not have the Hub model's number of word embeddings."""
    if not vocab_file:
        return
    size = len(tokenization.load_vocab(vocab_file))
    if size != hub.vocab_size:
        raise ValueError(f"{vocab_file} has {size} tokens but {hub.path} has {hub.vocab_size} word embeddings: the "
                         f"vocab does not belong to this TF Hub model; leave vocab_file out to use its own "
                         f"{hub.vocab_file or 'vocab_file asset'}.")


CONVERSION_FORMATS = ("original", "model_garden")


def convert_checkpoint(init_checkpoint, output_dir, to="original", bert_config_file=None, vocab_file=None):
    """Any checkpoint `restore` reads (original, bert-tf, Model Garden TF2, TF Hub SavedModel) -> a release
    directory: output_dir/bert_model.ckpt under the original names (`to="original"`) or in Model Garden's TF2
    layout (`to="model_garden"`, `model_garden.save_model_garden_checkpoint`), with bert_config.json and vocab.txt
    (`model_files`: those given, else a TF Hub model's own). It holds the encoder and whichever pretraining heads
    the checkpoint has. Returns output_dir."""
    if to not in CONVERSION_FORMATS:
        raise ValueError(f"to={to!r}: expected one of {CONVERSION_FORMATS}.")
    files = model_files(init_checkpoint, bert_config_file, vocab_file)
    model = task_models.build(task_models.BertPretrainer(files.config))
    report = restore(model, init_checkpoint)
    mapping = name_map.original_variable_map(model)
    tensors = {name: mapping[name].numpy() for name in report.loaded}
    if to == "original":
        return original.write_release(tensors, files.config, output_dir, files.vocab_file)
    model_garden.save_model_garden_checkpoint(tensors, files.config, os.path.join(output_dir, "bert_model.ckpt"))
    return original.write_release_files(files.config, output_dir, files.vocab_file)
