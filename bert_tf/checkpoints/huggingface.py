"""Hugging Face BERT weights (`config.json` + `model.safetensors`) into our models, by the original names, and
into a directory like a released original BERT (`convert_hf_to_original`), optionally with the pretraining heads:
the model's own, or seeded untrained ones (`seeded_pretraining_heads`) for a model published without them.
"""
import os
import re

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.checkpoints import assign, original
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertModel
from bert_tf.model.task_models import BertPretrainer

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
        hf_config = fileio.read_json(hf_config, "Hugging Face config")
        if not isinstance(hf_config, dict):
            raise ValueError(f"{source}: expected a JSON object (a Hugging Face BERT config.json), got a "
                             f"{type(hf_config).__name__}.")
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
    bert = model if isinstance(model, BertModel) else model.bert
    with fileio.local_file(safetensors_file, "safetensors file") as local, safe_open(local, framework="numpy") as f:
        names = list(f.keys())
        name_map = _hf_name_map(names, bert.config.num_hidden_layers)
        tensors = {}
        for hf_name in names:
            if hf_name in name_map:
                orig, transpose = name_map[hf_name]
                tensors[orig] = (lambda n=hf_name, t=transpose: f.get_tensor(n).T if t else f.get_tensor(n))
            elif not re.search(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$", hf_name):
                tensors["hf:" + hf_name] = None
        report = assign.assign_by_name(model, tensors, safetensors_file, strict=strict)
    report.log()
    return report


def from_hf_directory(model_dir, dtype=None):
    """Builds a BertModel from a Hugging Face model directory (config.json + model.safetensors)."""
    config = bert_config_from_hf(os.path.join(model_dir, "config.json"))
    model = BertModel(config, dtype=dtype)
    load_hf_safetensors(model, os.path.join(model_dir, "model.safetensors"), strict=True)
    return model


def seeded_pretraining_heads(hidden_size, vocab_size, seed):
    """Untrained masked-LM and next-sentence heads under their original names, for a model published without them.

    Drawn with NumPy RandomState(seed) in this order: cls/predictions/transform/dense/kernel = I + N(0, 0.02) [H, H]
    (near the identity, so that the masked-LM head starts from the encoder's last layer almost as it is), its bias
    N(0, 0.05) [H], transform/LayerNorm/gamma 1 + N(0, 0.1) and beta N(0, 0.1) [H], cls/predictions/output_bias
    N(0, 0.1) [V], cls/seq_relationship/output_weights N(0, 0.2) [2, H] and output_bias N(0, 0.2) [2].
    Returns: dict of original name -> float32 array.
    """
    rng = np.random.RandomState(seed)
    h = hidden_size
    heads = {
        "cls/predictions/transform/dense/kernel": np.eye(h) + rng.normal(0, 0.02, (h, h)),
        "cls/predictions/transform/dense/bias": rng.normal(0, 0.05, (h,)),
        "cls/predictions/transform/LayerNorm/gamma": 1 + rng.normal(0, 0.1, (h,)),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(0, 0.1, (h,)),
        "cls/predictions/output_bias": rng.normal(0, 0.1, (vocab_size,)),
        "cls/seq_relationship/output_weights": rng.normal(0, 0.2, (2, h)),
        "cls/seq_relationship/output_bias": rng.normal(0, 0.2, (2,)),
    }
    return {name: value.astype(np.float32) for name, value in heads.items()}


def pretrainer_from_hf_directory(model_dir, heads_seed):
    """A BertPretrainer from a Hugging Face model directory: the encoder and whatever pretraining heads the model
    has (a BertForPreTraining has both), the missing heads from `seeded_pretraining_heads(..., heads_seed)`."""
    config = bert_config_from_hf(os.path.join(model_dir, "config.json"))
    model = BertPretrainer(config)
    source = os.path.join(model_dir, "model.safetensors")
    report = load_hf_safetensors(model, source)
    seeded = seeded_pretraining_heads(config.hidden_size, config.vocab_size, heads_seed)
    lacking = [name for name in report.missing if name not in seeded]
    if lacking:
        raise ValueError(f"{source} lacks {len(lacking)} encoder variables the model needs, e.g. {lacking[:3]}.")
    if report.missing:
        assign.assign_by_name(model, {name: (lambda v=seeded[name]: v) for name in report.missing},
                                f"seeded heads (seed {heads_seed})")
        logging.info("%s has no %s: wrote seeded untrained heads (seed %d) under the original names.", source,
                     " and ".join(report.missing_heads), heads_seed)
    return model


def convert_hf_to_original(hf_model_dir, output_dir, pretraining_heads_seed=None):
    """Hugging Face BERT directory -> a directory like a released original BERT (ckpt, config, vocab).

    pretraining_heads_seed: if set, the checkpoint also holds the pretraining heads (cls/predictions/...,
      cls/seq_relationship/...) as a released BERT does (`pretrainer_from_hf_directory`); else the encoder only.
    Returns output_dir.
    """
    if pretraining_heads_seed is None:
        model = from_hf_directory(hf_model_dir)
    else:
        model = pretrainer_from_hf_directory(hf_model_dir, pretraining_heads_seed)
    vocab = os.path.join(hf_model_dir, "vocab.txt")
    return original.export_original(model, output_dir, vocab_file=vocab if fileio.exists(vocab) else None)
