"""Hugging Face BERT weights (`config.json` + `model.safetensors`) into our models, by the original names."""
import json
import os
import re

from bert_tf.checkpoints import original
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertModel, build_bert_model

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
        report = original.assign_by_name(model, tensors, safetensors_file, strict=strict)
    report.log()
    return report


def from_hf_directory(model_dir, dtype=None):
    """Builds a BertModel from a Hugging Face model directory (config.json + model.safetensors)."""
    config = bert_config_from_hf(os.path.join(model_dir, "config.json"))
    model = build_bert_model(config, dtype=dtype)
    load_hf_safetensors(model, os.path.join(model_dir, "model.safetensors"), strict=True)
    return model


def convert_hf_to_original(hf_model_dir, output_dir):
    """Hugging Face BERT directory -> a directory like a released original BERT (ckpt, config, vocab)."""
    model = from_hf_directory(hf_model_dir)
    vocab = os.path.join(hf_model_dir, "vocab.txt")
    return original.export_original(model, output_dir, vocab_file=vocab if os.path.exists(vocab) else None)
