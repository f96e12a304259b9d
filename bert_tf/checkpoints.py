"""Checkpoints: original TF1 BERT checkpoints in and out by the original variable names; Hugging Face import.

The name map is a table: each row pairs an original variable name with the path of our variable. A model
provides its parts by attribute: a `BertModel` itself, or any model with `.bert` (a BertModel) and optional heads
`.masked_lm` (MaskedLMHead), `.next_sentence` (OutputProjection), `.classifier` (ClassifierHead),
`.span` (SpanHead), `.tagger` (NER) and `.choice` (multiple choice): the task models of `bert_tf.heads`.
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
# Heads: attribute of the task model -> rows.
_HEADS = {
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
# Which config key a mismatching shape points at.
_SHAPE_HINTS = {
    "bert/embeddings/word_embeddings": "vocab_size",
    "cls/predictions/output_bias": "vocab_size",
    "bert/embeddings/position_embeddings": "max_position_embeddings",
    "bert/embeddings/token_type_embeddings": "type_vocab_size",
    "output_weights": "num_labels",
    "output_bias": "num_labels",
}


def _resolve_attr(obj, path):
    """Follows a dotted attribute path; numeric parts index lists ("encoder_layers.3.attention")."""
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def _ensure_built(model):
    if not model.built or not model.weights:
        raise ValueError(f"Model {model.name!r} must be built (called once) before its variables can be mapped.")


def original_variable_map(model):
    """Original TF1 variable name -> our Keras variable, for every variable the model has.

    `model`: a BertModel, or a model with `.bert` and optional head attributes (see the module docstring).
    """
    bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(f"Expected a BertModel or a model with a `.bert` BertModel, got {type(model).__name__}.")
    _ensure_built(bert)
    rows = list(_EMBEDDINGS) + list(_POOLER)
    for i in range(len(bert.encoder_layers)):
        rows += [(f"bert/encoder/layer_{i}/{name}", f"encoder_layers.{i}.{path}") for name, path in _LAYER]
    mapping = {name: _resolve_attr(bert, path) for name, path in rows}
    for attr, head_rows in _HEADS.items():
        head = getattr(model, attr, None) if model is not bert else None
        if head is not None:
            mapping.update({name: _resolve_attr(head, path) for name, path in head_rows})
    return mapping


def resolve_checkpoint(path):
    """A checkpoint prefix from what users pass: a prefix (`.../bert_model.ckpt`) or a directory."""
    if not path:
        raise ValueError("No checkpoint given (init_checkpoint is empty).")
    if tf.io.gfile.exists(path + ".index"):
        return path
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        default = os.path.join(path, "bert_model.ckpt")
        if tf.io.gfile.exists(default + ".index"):
            return default
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path!r}: expected a prefix with a '{os.path.basename(path)}.index' file "
        f"beside it (e.g. .../bert_model.ckpt) or a directory holding one.")


@dataclasses.dataclass
class LoadReport:
    """What a checkpoint load did, by original variable name."""
    checkpoint: str
    loaded: list
    missing: list  # variables of the model that the checkpoint lacks (left at their initial values)
    unused: list  # checkpoint variables the model has no place for (optimizer slots excluded)

    def log(self):
        logging.info("Loaded %d variables from %s", len(self.loaded), self.checkpoint)
        for name in self.missing:
            logging.info("  not in checkpoint (newly initialized): %s", name)
        for name in self.unused:
            logging.info("  in checkpoint but unused: %s", name)


def _shape_error(name, source, ckpt_shape, model_shape):
    hint = _SHAPE_HINTS.get(name) or ("hidden_size / intermediate_size" if name.startswith("bert/") else None)
    what = f" (check `{hint}`)" if hint else ""
    if name == "bert/embeddings/word_embeddings":
        return ValueError(f"vocab_size mismatch: {source} has {name} with {ckpt_shape[0]} rows but the model's "
                          f"config says vocab_size={model_shape[0]}; use the bert_config.json and vocab.txt that "
                          f"came with the checkpoint.")
    return ValueError(f"Shape mismatch for {name}{what}: {source} has {list(ckpt_shape)}, the model expects "
                      f"{list(model_shape)}.")


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
    report = LoadReport(source, loaded, missing, unused)
    if strict and missing:
        raise ValueError(f"{source} lacks {len(missing)} variables the model needs, e.g. {missing[:3]}.")
    if not loaded:
        raise ValueError(f"{source} holds no variable of a BERT model under the original names "
                         f"(found e.g. {sorted(tensors)[:3]}).")
    return report


def load_original_checkpoint(model, init_checkpoint, strict=False):
    """Loads an original TF1 BERT checkpoint (or one written by `save_original_checkpoint`) into `model`.

    Optimizer slots (adam_m/adam_v, global_step) are skipped; missing and unused variables are reported.
    Returns: LoadReport (also logged).
    """
    prefix = resolve_checkpoint(init_checkpoint)
    reader = tf.train.load_checkpoint(prefix)
    tensors = {name: (lambda n=name: reader.get_tensor(n)) for name in reader.get_variable_to_shape_map()}
    report = assign_by_name(model, tensors, prefix, strict=strict)
    report.log()
    return report


def save_original_checkpoint(model, checkpoint_prefix):
    """Writes the model's variables under the original TF1 names and shapes (the original code can load it).

    Writes `<prefix>.index`, `<prefix>.data-00000-of-00001` and a `checkpoint` state file in the same directory,
    each under a temporary name first and renamed when complete. Returns the prefix.
    """
    mapping = original_variable_map(model)
    directory = os.path.dirname(os.path.abspath(checkpoint_prefix))
    os.makedirs(directory, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".tmp_ckpt_", dir=directory)
    try:
        names = sorted(mapping)
        staged = os.path.join(staging, os.path.basename(checkpoint_prefix))
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.convert_to_tensor(mapping[n].numpy(), tf.float32) for n in names])
        for filename in os.listdir(staging):
            os.replace(os.path.join(staging, filename), os.path.join(directory, filename))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    tf.compat.v1.train.update_checkpoint_state(directory, os.path.basename(checkpoint_prefix))
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
