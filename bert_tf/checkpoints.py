"""Checkpoints: original TF1 BERT checkpoints in and out by the original variable names; Hugging Face import.

The name map is a table: each row pairs an original variable name with the path of our variable. A model
provides its parts by attribute: a `BertModel` itself, or any model with `.bert` (a BertModel) and optional heads
named in `TASK_HEADS`: `.masked_lm` (MaskedLMHead), `.next_sentence` (OutputProjection), `.classifier`
(ClassifierHead), `.span` (SpanHead), `.tagger` (NER) and `.choice` (multiple choice): the task models of
`bert_tf.heads`.

`restore(model, path, required_heads)` is the one loading path of every script: it takes an original TF1
checkpoint (by variable name) or one of ours (a `tf.train.Checkpoint` with the encoder under `bert` and each head
under its attribute, as the Trainer writes it; matched through its object graph), refuses an encoder that does not
fit the model and a missing required head, and returns a LoadReport by original variable name.
"""
import dataclasses
import json
import os
import re
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel

# (original name, our attribute path) for the encoder; `{i}` is the layer index.
_EMBEDDINGS = [
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings"),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings"),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings"),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.layer_norm.gamma"),
    ("bert/embeddings/LayerNorm/beta", "embeddings.layer_norm.beta"),
]
_LAYER = [
    ("attention/self/query/kernel", "attention.query.kernel"),
    ("attention/self/query/bias", "attention.query.bias"),
    ("attention/self/key/kernel", "attention.key.kernel"),
    ("attention/self/key/bias", "attention.key.bias"),
    ("attention/self/value/kernel", "attention.value.kernel"),
    ("attention/self/value/bias", "attention.value.bias"),
    ("attention/output/dense/kernel", "attention.output_dense.kernel"),
    ("attention/output/dense/bias", "attention.output_dense.bias"),
    ("attention/output/LayerNorm/gamma", "attention.layer_norm.gamma"),
    ("attention/output/LayerNorm/beta", "attention.layer_norm.beta"),
    ("intermediate/dense/kernel", "intermediate.kernel"),
    ("intermediate/dense/bias", "intermediate.bias"),
    ("output/dense/kernel", "output_dense.kernel"),
    ("output/dense/bias", "output_dense.bias"),
    ("output/LayerNorm/gamma", "layer_norm.gamma"),
    ("output/LayerNorm/beta", "layer_norm.beta"),
]
_POOLER = [
    ("bert/pooler/dense/kernel", "pooler.dense.kernel"),
    ("bert/pooler/dense/bias", "pooler.dense.bias"),
]
# The task heads: attribute of the task model -> rows (original name, attribute path inside the head).
TASK_HEADS = {
    "masked_lm": [
        ("cls/predictions/transform/dense/kernel", "transform.kernel"),
        ("cls/predictions/transform/dense/bias", "transform.bias"),
        ("cls/predictions/transform/LayerNorm/gamma", "layer_norm.gamma"),
        ("cls/predictions/transform/LayerNorm/beta", "layer_norm.beta"),
        ("cls/predictions/output_bias", "output_bias"),
    ],
    "next_sentence": [
        ("cls/seq_relationship/output_weights", "output_weights"),
        ("cls/seq_relationship/output_bias", "output_bias"),
    ],
    "classifier": [
        ("output_weights", "projection.output_weights"),
        ("output_bias", "projection.output_bias"),
    ],
    "span": [
        ("cls/squad/output_weights", "projection.output_weights"),
        ("cls/squad/output_bias", "projection.output_bias"),
    ],
    # Heads the original never had, under names in its style.
    "tagger": [
        ("cls/ner/output_weights", "projection.output_weights"),
        ("cls/ner/output_bias", "projection.output_bias"),
    ],
    "choice": [
        ("cls/swag/output_weights", "projection.output_weights"),
        ("cls/swag/output_bias", "projection.output_bias"),
    ],
}
# Variables that only optimizers and loss scaling write: never reported as unused.
_OPTIMIZER_NAME = re.compile(r"(/adam_[mv]$|/(Adam|Adam_1|Momentum|LAMB|lamb_[mv])$|^global_step$|"
                             r"^(good_steps|current_loss_scale|loss_scale)$|/ExponentialMovingAverage$)")
# Which config key each dimension of a variable comes from, for shape errors (else a head's output_weights
# [num_labels, H] and output_bias [num_labels]; else hidden_size / intermediate_size).
_SHAPE_KEYS = {
    "bert/embeddings/word_embeddings": ("vocab_size", "hidden_size"),
    "bert/embeddings/position_embeddings": ("max_position_embeddings", "hidden_size"),
    "bert/embeddings/token_type_embeddings": ("type_vocab_size", "hidden_size"),
    "cls/predictions/output_bias": ("vocab_size",),
}
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
_FILE_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")
_ENCODER_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")


def _resolve_attr(obj, path):
    """Follows a dotted attribute path; numeric parts index lists ("encoder_layers.3.attention")."""
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def _ensure_built(model):
    if not model.built or not model.weights:
        raise ValueError(f"Model {model.name!r} must be built (called once) before its variables can be mapped.")


def model_parts(model):
    """{"bert": the encoder, head attribute: head} for a BertModel or a task model (see the module docstring)."""
    bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(f"Expected a BertModel or a model with a `.bert` BertModel, got {type(model).__name__}.")
    heads = {} if model is bert else {h: getattr(model, h) for h in TASK_HEADS if getattr(model, h, None) is not None}
    return {"bert": bert, **heads}


def original_variable_map(model):
    """Original TF1 variable name -> our Keras variable, for every variable the model has.

    `model`: a BertModel, or a model with `.bert` and optional head attributes (see the module docstring).
    """
    parts = model_parts(model)
    bert = parts.pop("bert")
    _ensure_built(bert)
    rows = list(_EMBEDDINGS) + list(_POOLER)
    for i in range(len(bert.encoder_layers)):
        rows += [(f"bert/encoder/layer_{i}/{name}", f"encoder_layers.{i}.{path}") for name, path in _LAYER]
    mapping = {name: _resolve_attr(bert, path) for name, path in rows}
    for attr, head in parts.items():
        mapping.update({name: _resolve_attr(head, path) for name, path in TASK_HEADS[attr]})
    return mapping


def resolve_checkpoint(path):
    """A checkpoint prefix from what users pass.

    `path`: a prefix (`.../bert_model.ckpt`), one of its files (`.index`, `.data-00000-of-00001`), or a directory:
    the checkpoint its `checkpoint` state file names, looked up by file name inside that directory (a copied
    directory whose state file records an absolute path never loads the weights it was copied from), else its
    `bert_model.ckpt`.
    """
    if not path:
        raise ValueError("No checkpoint given (init_checkpoint is empty).")
    prefix = _FILE_SUFFIX.sub("", path)
    if tf.io.gfile.exists(prefix + ".index"):
        return prefix
    if tf.io.gfile.isdir(path):
        state = tf.train.get_checkpoint_state(path)
        named = os.path.join(path, os.path.basename(state.model_checkpoint_path if state else "bert_model.ckpt"))
        if tf.io.gfile.exists(named + ".index"):
            return named
        if state:
            raise FileNotFoundError(f"{os.path.join(path, 'checkpoint')} names {state.model_checkpoint_path!r}, "
                                    f"but {path} holds no {os.path.basename(named)}.index.")
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path!r}: expected a prefix with a '{os.path.basename(prefix)}.index' file "
        f"beside it (e.g. .../bert_model.ckpt) or a directory holding one.")


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
            logging.warning("%s: %s unused by this model.", self.checkpoint, _describe(self.unused))


def _span(numbers):
    """[4, 5, 6] -> "4..6"; [1, 3] -> "1,3"."""
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}..{numbers[-1]}"
    return ",".join(map(str, numbers))


def _describe(names):
    """A short account of variable names: encoder layers as a range ("bert/encoder/layer_4..5"), a few others."""
    layers = sorted({int(m.group(1)) for m in map(_ENCODER_LAYER.match, names) if m})
    others = [n for n in names if not _ENCODER_LAYER.match(n)]
    parts = ([f"bert/encoder/layer_{_span(layers)}"] if layers else []) + others[:3]
    return f"{', '.join(parts)}{', ...' if len(others) > 3 else ''} ({len(names)} variables)"


def _shape_error(name, source, ckpt_shape, model_shape):
    """A ValueError naming the config key behind the first dimension that differs."""
    suffix = name.rsplit("/", 1)[-1]
    keys = _SHAPE_KEYS.get(name) or {"output_weights": ("num_labels", "hidden_size"),
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
    mapping = original_variable_map(model)
    loaded, missing = [], []
    for name, variable in mapping.items():
        if name not in tensors:
            missing.append(name)
            continue
        value = np.asarray(tensors[name]())
        if tuple(value.shape) != tuple(variable.shape):
            raise _shape_error(name, source, value.shape, variable.shape)
        variable.assign(value.astype(variable.dtype))
        loaded.append(name)
    unused = sorted(n for n in tensors if n not in mapping and not _OPTIMIZER_NAME.search(n))
    heads = [h for h in model_parts(model) if h != "bert"]
    lacking = [h for h in heads if any(name in missing for name, _ in TASK_HEADS[h])]
    report = LoadReport(source, loaded, missing, unused, [h for h in heads if h not in lacking], lacking)
    if strict and missing:
        raise ValueError(f"{source} lacks {len(missing)} variables the model needs, e.g. {missing[:3]}.")
    if not loaded:
        raise ValueError(f"{source} holds no variable of a BERT model under the original names "
                         f"(found e.g. {sorted(tensors)[:3]}).")
    return report


def _original_tensors(reader):
    """Original name -> tensor getter for every variable of an original (name-based) TF1 checkpoint."""
    return {name: (lambda n=name: reader.get_tensor(n)) for name in reader.get_variable_to_shape_map()}


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
                         f"bert-tf checkpoints hold the encoder as `bert` and each head under its attribute.")
    names = {id(variable): name for name, variable in original_variable_map(model).items()}
    floating = {key for key, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating}
    parts = model_parts(model)
    stack = [(parts.get(c.local_name), c.node_id, c.local_name) for c in graph.nodes[0].children
             if c.local_name in ("bert", *TASK_HEADS)]
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


def _check_encoder(report, config):
    """Raises if the checkpoint's encoder does not fit the model's: encoder variables missing or unused."""
    missing = [n for n in report.missing if n.startswith("bert/")]
    unused = [n for n in report.unused if n.startswith("bert/")]
    if not (missing or unused):
        return
    problems = [f"the checkpoint has {_describe(unused)}, which the model has no place for"] if unused else []
    problems += [f"it lacks {_describe(missing)}"] if missing else []
    raise ValueError(f"{report.checkpoint} does not fit the encoder of this bert_config.json (num_hidden_layers="
                     f"{config.num_hidden_layers}, hidden_size={config.hidden_size}): {'; '.join(problems)}. Use "
                     f"the bert_config.json the checkpoint was trained with.")


def restore(model, path, required_heads=(), strict=False):
    """Loads a checkpoint into `model` (a BertModel or a task model): the encoder and each head the model has.

    `path`: an original TF1 checkpoint (loaded by variable name) or one of ours (a tf.train.Checkpoint with the
    encoder under `bert` and heads under their attributes, as the Trainer writes it; matched through its object
    graph), as a prefix, one of its files, or a directory (see `resolve_checkpoint`).
    `required_heads`: head attributes (keys of TASK_HEADS) the checkpoint must provide in full.
    `strict`: also raise if any other variable of the model is missing.
    Raises ValueError if the encoder does not fit (missing or unused encoder variables, e.g. another
    num_hidden_layers), a shape differs (naming the config key), or a required head is missing (naming one of its
    original variables). Missing and unused head variables are logged as warnings.
    Returns: LoadReport (also logged).
    """
    parts = model_parts(model)
    unknown = [h for h in required_heads if h not in parts or h == "bert"]
    if unknown:
        raise ValueError(f"{type(model).__name__} has no {', '.join(unknown)} head; its heads: {list(parts)[1:]}.")
    prefix = resolve_checkpoint(path)
    reader = tf.train.load_checkpoint(prefix)
    ours = _OBJECT_GRAPH in reader.get_variable_to_shape_map()
    tensors = _object_graph_tensors(model, reader, prefix) if ours else _original_tensors(reader)
    report = assign_by_name(model, tensors, prefix, strict=strict)
    _check_encoder(report, parts["bert"].config)
    lacking = [h for h in required_heads if h in report.missing_heads]
    if lacking:
        raise ValueError(f"{prefix} has no trained {' and '.join(lacking)} head (e.g. variable "
                         f"{TASK_HEADS[lacking[0]][0][0]!r}): fine-tune first, or pass a fine-tuned checkpoint.")
    report.log()
    return report


def load_original_checkpoint(model, init_checkpoint, strict=False):
    """Loads an original TF1 BERT checkpoint (or one of ours) into `model`: `restore` with no required head.

    Optimizer slots (adam_m/adam_v, global_step) are skipped; missing and unused variables are reported.
    Returns: LoadReport (also logged).
    """
    return restore(model, init_checkpoint, strict=strict)


def save_original_checkpoint(model, checkpoint_prefix):
    """Writes the model's variables under the original TF1 names and shapes (the original code can load it).

    Writes `<prefix>.index`, `<prefix>.data-00000-of-00001` and a `checkpoint` state file naming the prefix
    relative to its directory (so that a copy of the directory loads its own files), each under a temporary name
    first and renamed when complete. Returns the prefix.
    """
    mapping = original_variable_map(model)
    directory = os.path.dirname(os.path.abspath(checkpoint_prefix))
    os.makedirs(directory, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".tmp_ckpt_", dir=directory)
    try:
        names = sorted(mapping)
        base = os.path.basename(checkpoint_prefix)
        tf.raw_ops.SaveV2(prefix=os.path.join(staging, base), tensor_names=names,
                          shape_and_slices=[""] * len(names),
                          tensors=[tf.convert_to_tensor(mapping[n].numpy(), tf.float32) for n in names])
        for filename in os.listdir(staging):
            os.replace(os.path.join(staging, filename), os.path.join(directory, filename))
        state = os.path.join(staging, "checkpoint")
        with open(state, "w", encoding="utf-8") as f:
            f.write(f"model_checkpoint_path: {json.dumps(base)}\nall_model_checkpoint_paths: {json.dumps(base)}\n")
        os.replace(state, os.path.join(directory, "checkpoint"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return checkpoint_prefix


def export_original(model, output_dir, vocab_file=None):
    """Writes a directory like a released BERT: bert_model.ckpt.*, bert_config.json and (optionally) vocab.txt."""
    bert = model if isinstance(model, BertModel) else model.bert
    os.makedirs(output_dir, exist_ok=True)
    save_original_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"))
    bert.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    if vocab_file:
        shutil.copyfile(vocab_file, os.path.join(output_dir, "vocab.txt.tmp"))
        os.replace(os.path.join(output_dir, "vocab.txt.tmp"), os.path.join(output_dir, "vocab.txt"))
    return output_dir


# --- Hugging Face ------------------------------------------------------------------------------------------

_HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                   "relu": "relu", "tanh": "tanh"}
_HF_LAYER = [  # (HF module path inside encoder.layer.N, original name inside layer_N, is a Linear weight)
    ("attention.self.query", "attention/self/query", True),
    ("attention.self.key", "attention/self/key", True),
    ("attention.self.value", "attention/self/value", True),
    ("attention.output.dense", "attention/output/dense", True),
    ("attention.output.LayerNorm", "attention/output/LayerNorm", False),
    ("intermediate.dense", "intermediate/dense", True),
    ("output.dense", "output/dense", True),
    ("output.LayerNorm", "output/LayerNorm", False),
]


def bert_config_from_hf(hf_config):
    """A Hugging Face BERT config.json (dict or path) -> BertConfig, mapping activation names to ours."""
    source = "Hugging Face config"
    if isinstance(hf_config, str):
        source = hf_config
        with open(hf_config, encoding="utf-8") as f:
            hf_config = json.load(f)
    act = hf_config.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{source}: unsupported hidden_act {act!r}; expected one of {sorted(_HF_ACTIVATIONS)}.")
    eps = hf_config.get("layer_norm_eps", 1e-12)
    if abs(eps - 1e-12) > 1e-15:
        raise ValueError(f"{source}: layer_norm_eps={eps}, but BERT uses 1e-12; this model is not a BERT.")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{source}: only absolute position embeddings are BERT's.")
    values = {k: hf_config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                        "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
                                        "max_position_embeddings", "type_vocab_size", "initializer_range")
              if k in hf_config}
    return BertConfig.from_dict({**values, "hidden_act": _HF_ACTIVATIONS[act]}, source=source)


def _hf_name_map(hf_names, num_layers):
    """HF tensor name -> (original name, transpose?) for a BertModel / BertForPreTraining state dict."""
    prefix = "bert." if any(n.startswith("bert.") for n in hf_names) else ""
    out = {}

    def norm(hf, orig):
        for w, b in (("weight", "bias"), ("gamma", "beta")):
            out[f"{hf}.{w}"], out[f"{hf}.{b}"] = (f"{orig}/gamma", False), (f"{orig}/beta", False)

    def linear(hf, orig, transpose=True):
        out[f"{hf}.weight"], out[f"{hf}.bias"] = (f"{orig}/kernel", transpose), (f"{orig}/bias", False)

    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        out[f"{prefix}embeddings.{name}.weight"] = (f"bert/embeddings/{name}", False)
    norm(f"{prefix}embeddings.LayerNorm", "bert/embeddings/LayerNorm")
    for i in range(num_layers):
        for hf, orig, is_linear in _HF_LAYER:
            (linear if is_linear else norm)(f"{prefix}encoder.layer.{i}.{hf}", f"bert/encoder/layer_{i}/{orig}")
    linear(f"{prefix}pooler.dense", "bert/pooler/dense")
    linear("cls.predictions.transform.dense", "cls/predictions/transform/dense")
    norm("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm")
    out["cls.predictions.bias"] = ("cls/predictions/output_bias", False)
    out["cls.seq_relationship.weight"] = ("cls/seq_relationship/output_weights", False)
    out["cls.seq_relationship.bias"] = ("cls/seq_relationship/output_bias", False)
    return out


def load_hf_safetensors(model, safetensors_file, strict=False):
    """Loads Hugging Face BERT weights (`model.safetensors`) into `model`. Returns a LoadReport (also logged).

    The tied MLM decoder (`cls.predictions.decoder.*`) is the word embedding table and is not reported unused.
    """
    try:
        from safetensors import safe_open
    except ImportError as e:  # pragma: no cover - safetensors is a core dependency
        raise ImportError("Importing Hugging Face weights needs `pip install safetensors`.") from e
    if not os.path.isfile(safetensors_file):
        raise FileNotFoundError(f"No safetensors file at {safetensors_file}")
    bert = model if isinstance(model, BertModel) else model.bert
    with safe_open(safetensors_file, framework="numpy") as f:
        names = list(f.keys())
        name_map = _hf_name_map(names, bert.config.num_hidden_layers)
        tensors = {}
        for hf_name in names:
            if hf_name in name_map:
                orig, transpose = name_map[hf_name]
                tensors[orig] = (lambda n=hf_name, t=transpose: f.get_tensor(n).T if t else f.get_tensor(n))
            elif not re.search(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$", hf_name):
                tensors["hf:" + hf_name] = None
        report = assign_by_name(model, tensors, safetensors_file, strict=strict)
    report.log()
    return report


def from_hf_directory(model_dir, dtype=None):
    """Builds a BertModel from a Hugging Face model directory (config.json + model.safetensors)."""
    config = bert_config_from_hf(os.path.join(model_dir, "config.json"))
    model = build_bert_model(config, dtype=dtype)
    load_hf_safetensors(model, os.path.join(model_dir, "model.safetensors"), strict=True)
    return model


def build_bert_model(config, dtype=None):
    """A BertModel with its variables created (called once on a dummy batch)."""
    model = BertModel(config, dtype=dtype)
    dummy = tf.zeros((1, 2), tf.int32)
    model({"input_ids": dummy, "input_mask": tf.ones_like(dummy), "segment_ids": dummy})
    return model


def check_vocab_size(config, vocab, vocab_file):
    """Raises if the vocabulary has more tokens than the model has embedding rows; warns if it has fewer
    (some configs pad vocab_size, e.g. to a multiple of 8)."""
    if len(vocab) > config.vocab_size:
        raise ValueError(f"{vocab_file} has {len(vocab)} tokens but bert_config.json says vocab_size="
                         f"{config.vocab_size}: the vocab does not belong to this model.")
    if len(vocab) < config.vocab_size:
        logging.warning("%s has %d tokens, fewer than vocab_size=%d in bert_config.json.", vocab_file, len(vocab),
                        config.vocab_size)


def convert_hf_to_original(hf_model_dir, output_dir):
    """Hugging Face BERT directory -> a directory like a released original BERT (ckpt, config, vocab)."""
    model = from_hf_directory(hf_model_dir)
    vocab = os.path.join(hf_model_dir, "vocab.txt")
    return export_original(model, output_dir, vocab_file=vocab if os.path.exists(vocab) else None)
