"""Hugging Face BERT directories (config.json + model.safetensors + vocab.txt) both ways, by the original variable
names: read into our models (`task_model_from_hf_directory`) or into a directory like a released original BERT
(`convert_hf_to_original`), and written from original tensors as transformers writes its own (`write_hf_directory`).

One map of Hugging Face names (`hf_name_map`) serves both ways, so reading and writing cannot disagree; a task's
transformers class is in `ARCHITECTURES`. Activations: Hugging Face "gelu" is our `gelu_exact` (erf); "gelu_new"
is our (and the original's) `gelu` (tanh).
"""
import json
import os
import re

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.checkpoints import assign, name_map, original
from bert_tf.model import task_models
from bert_tf.model.config import DEFAULTS, BertConfig, check_exact_vocab_size
from bert_tf.model.encoder import LAYER_NORM_EPSILON, BertModel
from bert_tf.model.task_models import BertPretrainer
from bert_tf.text import tokenization

_HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                   "relu": "relu", "tanh": "tanh", "linear": "linear"}
# Ours (every `activations.NAMES`) -> transformers' name of the same function.
_TO_HF_ACTIVATION = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_tanh": "gelu_new", "gelu_exact": "gelu",
                     "gelu_erf": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# Our task (`task_models.REGISTRY`) -> the transformers class of its model (config.json's `architectures`).
ARCHITECTURES = {"encoder": "BertModel", "classifier": "BertForSequenceClassification",
                 "regression": "BertForSequenceClassification", "multi_label": "BertForSequenceClassification",
                 "squad": "BertForQuestionAnswering",
                 "ner": "BertForTokenClassification", "swag": "BertForMultipleChoice",
                 "pretraining": "BertForPreTraining", "masked_lm": "BertForMaskedLM"}
# The tasks of a BertForSequenceClassification other than the classifier -> its config.json's problem_type.
PROBLEM_TYPES = {"regression": "regression", "multi_label": "multi_label_classification"}
# Head attribute -> the transformers module of its output_weights [K, H] and output_bias [K] (a Linear's weight and
# bias). The masked LM's decoder is the tied word embedding table: transformers writes no cls.predictions.decoder.*.
HF_HEADS = {"masked_lm": "cls.predictions", "next_sentence": "cls.seq_relationship", "classifier": "classifier",
            "tagger": "classifier", "choice": "classifier", "span": "qa_outputs"}
# The last part of an original name -> (that of its Hugging Face name, transposed?); an embedding table adds "weight".
_HF_LEAVES = {"kernel": ("weight", True), "bias": ("bias", False), "gamma": ("weight", False), "beta": ("bias", False),
              "output_weights": ("weight", False), "output_bias": ("bias", False)}
# The transformers classes built without the pooler: their directories lack bert.pooler.*; bert-tf writes it
# anyway, so that a round trip keeps every variable.
_WITHOUT_POOLER = ("BertForMaskedLM", "BertForTokenClassification", "BertForQuestionAnswering")
# Files transformers would read instead of ours (other weights, another tokenizer.json): removed when writing.
_REPLACED = (r"(model-\d+-of-\d+\.safetensors|model\.safetensors\.index\.json|pytorch_model.*\.bin(\.index\.json)?|"
             r"tf_model\.h5|flax_model\.msgpack|tokenizer\.json|added_tokens\.json)")
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                   "mask_token": "[MASK]"}
_CONFIG_KEYS = [key for key in DEFAULTS if key != "hidden_act"]  # the same in config.json (hidden_act: mapped)


def _read_hf_config(path):
    """The JSON object of the Hugging Face config.json `path`; ValueError naming it if it is not a BERT's."""
    hf_config = fileio.read_json(path, "Hugging Face config")
    if not isinstance(hf_config, dict):
        raise ValueError(f"{path}: expected a JSON object (a Hugging Face BERT config.json), got a "
                         f"{type(hf_config).__name__}.")
    if hf_config.get("model_type", "bert") != "bert":
        raise ValueError(f"{path}: model_type is {hf_config['model_type']!r}, not 'bert': not a BERT model.")
    return hf_config


def bert_config_from_hf(hf_config):
    """A Hugging Face BERT config.json (dict or path) -> BertConfig, mapping activation names to ours."""
    source = "Hugging Face config"
    if isinstance(hf_config, str):
        source = hf_config
        hf_config = _read_hf_config(hf_config)
    act = hf_config.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{source}: unsupported hidden_act {act!r}; expected one of {sorted(_HF_ACTIVATIONS)}.")
    eps = hf_config.get("layer_norm_eps", LAYER_NORM_EPSILON)
    if abs(eps - LAYER_NORM_EPSILON) > 1e-15:
        raise ValueError(f"{source}: layer_norm_eps={eps}, but BERT uses 1e-12; this model is not a BERT.")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{source}: only absolute position embeddings are BERT's.")
    values = {k: hf_config[k] for k in _CONFIG_KEYS if k in hf_config}
    return BertConfig.from_dict({**values, "hidden_act": _HF_ACTIVATIONS[act]}, source=source)


def hf_config(config, spec, labels=None):
    """The Hugging Face config.json (a dict) of `config` as the transformers class of `spec`: the BERT keys, hidden_act
    in transformers' names, id2label / label2id for a labelled head, problem_type for regression and multi_label."""
    out = {"architectures": [ARCHITECTURES[spec.name]], "model_type": "bert", "dtype": "float32",
           **{key: getattr(config, key) for key in _CONFIG_KEYS},
           "hidden_act": _TO_HF_ACTIVATION[config.hidden_act.lower()], "layer_norm_eps": LAYER_NORM_EPSILON,
           "pad_token_id": 0, "position_embedding_type": "absolute", "tie_word_embeddings": True}
    if spec.name in PROBLEM_TYPES:
        out["problem_type"] = PROBLEM_TYPES[spec.name]
    if spec.kwargs.get("regression"):
        labels = ["LABEL_0"]
    if labels:
        out["num_labels"] = len(labels)
        out["id2label"] = {str(i): label for i, label in enumerate(labels)}
        out["label2id"] = {label: i for i, label in enumerate(labels)}
    return out


def hf_name_map(num_layers, heads=None, prefix="bert."):
    """Hugging Face tensor name -> (original name, transposed?) for an encoder of `num_layers` under `prefix` ("bert."
    in a task model's directory, "" in a BertModel's) and the task model's `heads`: the original name with "." for "/"
    and layer.N for layer_N, its last part by `_HF_LEAVES`; a head's output_* are those of its `HF_HEADS` module."""
    paths = [(row.original, prefix + row.original[len("bert/"):]) for row in name_map.encoder_rows(num_layers)]
    for attribute, rows in (heads or {}).items():
        if attribute not in HF_HEADS:
            raise ValueError(f"The .{attribute} head has no Hugging Face tensor names (huggingface.HF_HEADS has "
                             f"{', '.join(HF_HEADS)}).")
        module = HF_HEADS[attribute].replace(".", "/")
        paths += [(name, re.sub(r"^(.*/)?(output_\w+)$", module + r"/\2", name)) for name, _ in rows]
    out = {}
    for name, path in paths:
        *module, leaf = re.sub(r"layer_(\d+)", r"layer.\1", path).split("/")
        hf_leaf, transpose = _HF_LEAVES.get(leaf, (None, False))
        out[".".join(module + ([hf_leaf] if hf_leaf else [leaf, "weight"]))] = (name, transpose)
    return out


def load_hf_safetensors(model, safetensors_file, strict=False):
    """Loads `model.safetensors` into `model` (a BertModel or a task model) by `hf_name_map`; returns a LoadReport (also
    logged). The tied MLM decoder and the position_ids buffer are not reported unused."""
    from safetensors import safe_open

    parts = name_map.model_parts(model)
    heads = {attribute: model.heads[attribute] for attribute in parts if attribute != "bert"}
    with fileio.local_file(safetensors_file, "safetensors file") as local, safe_open(local, framework="numpy") as f:
        names = list(f.keys())
        prefix = "bert." if any(n.startswith("bert.") for n in names) else ""
        tensor_map = hf_name_map(parts["bert"].config.num_hidden_layers, heads, prefix)
        tensors = {}
        for hf_name in names:
            if hf_name in tensor_map:
                orig, transpose = tensor_map[hf_name]
                tensors[orig] = (lambda n=hf_name, t=transpose: f.get_tensor(n).T if t else f.get_tensor(n))
            elif not re.search(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$", hf_name):
                tensors["hf:" + hf_name] = None
        report = assign.assign_by_name(model, tensors, safetensors_file, strict=strict)
    report.log()
    return report


def from_hf_directory(model_dir):
    """Builds a BertModel from a Hugging Face model directory (config.json + model.safetensors)."""
    model = BertModel(bert_config_from_hf(os.path.join(model_dir, "config.json")))
    load_hf_safetensors(model, os.path.join(model_dir, "model.safetensors"), strict=True)
    return model


def task_model_from_hf_directory(hf_model_dir):
    """(TaskSpec, the task model with weights loaded, label names or None) of a Hugging Face BERT
    directory: the class its config.json's `architectures` names (none: the encoder) and
    problem_type, labels from id2label. ValueError naming config.json for another class; a class
    without a pooler (`_WITHOUT_POOLER`) may lack bert.pooler.* (a warning), any other missing
    variable is a ValueError naming the file."""
    path = os.path.join(hf_model_dir, "config.json")
    hf = _read_hf_config(path)
    architecture = (hf.get("architectures") or ["BertModel"])[0]
    specs = [task_models.REGISTRY[task] for task, name in ARCHITECTURES.items() if name == architecture]
    if not specs:
        known = sorted(set(ARCHITECTURES.values()))
        raise ValueError(f"{path}: architectures names {architecture!r}; bert-tf reads {', '.join(known)}.")
    spec = next((s for s in specs if PROBLEM_TYPES.get(s.name) == hf.get("problem_type")), specs[0])
    labels = num_labels = None
    if spec.labelled:
        id2label = hf.get("id2label") or {}
        labels = [id2label[key] for key in sorted(id2label, key=int)] or None
        num_labels = len(labels) if labels else int(hf.get("num_labels", 2))
    model = spec.build(bert_config_from_hf(path), num_labels)
    source = os.path.join(hf_model_dir, "model.safetensors")
    report = load_hf_safetensors(model, source)
    pooler = [name for name in report.missing if name.startswith("bert/pooler/")]
    lacking = [name for name in report.missing if name not in pooler or architecture not in _WITHOUT_POOLER]
    if lacking:
        raise ValueError(f"{source} lacks {assign.describe_variables(lacking)} of the {architecture} model "
                         f"its config.json names.")
    if pooler:
        logging.warning("%s has no pooler (transformers' %s has none): bert/pooler/dense keeps its initial values.",
                        source, architecture)
    return spec, model, labels


def seeded_pretraining_heads(hidden_size, vocab_size, seed):
    """Untrained masked-LM and next-sentence heads (original name -> float32 array) drawn from RandomState(`seed`), for
    a model published without them; the transform dense starts near the identity."""
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


def convert_hf_to_original(hf_model_dir, output_dir, pretraining_heads_seed=None):
    """Hugging Face BERT directory -> a directory like a released original BERT (ckpt, config,
    vocab); returns output_dir. The model is the class config.json names, or with a
    `pretraining_heads_seed` a BertPretrainer, its missing heads `seeded_pretraining_heads`'."""
    if pretraining_heads_seed is None:
        model = task_model_from_hf_directory(hf_model_dir)[1]
    else:
        config = bert_config_from_hf(os.path.join(hf_model_dir, "config.json"))
        model = BertPretrainer(config)
        source = os.path.join(hf_model_dir, "model.safetensors")
        report = load_hf_safetensors(model, source)
        seed = pretraining_heads_seed
        seeded = seeded_pretraining_heads(config.hidden_size, config.vocab_size, seed)
        lacking = [name for name in report.missing if name not in seeded]
        if lacking:
            raise ValueError(f"{source} lacks {len(lacking)} encoder variables the model needs, "
                             f"e.g. {lacking[:3]}.")
        if report.missing:
            heads = {name: (lambda v=seeded[name]: v) for name in report.missing}
            assign.assign_by_name(model, heads, f"seeded heads (seed {seed})")
            logging.info("%s has no %s: wrote seeded untrained heads (seed %d) under the original "
                         "names.", source, " and ".join(report.missing_heads), seed)
    vocab = os.path.join(hf_model_dir, "vocab.txt")
    return original.export_original(model, output_dir, vocab_file=vocab if fileio.exists(vocab) else None)


def check_vocab(vocab_file, config):
    """Raises unless `vocab_file` is given and has one token per embedding row."""
    if not vocab_file:
        raise ValueError("A Hugging Face directory needs the model's vocab.txt: pass vocab_file (--vocab_file), or "
                         "keep it beside the checkpoint.")
    check_exact_vocab_size(config, tokenization.load_vocab(vocab_file), vocab_file, "a Hugging Face directory")


def check_hf_output_dir(output_dir):
    """Raises if `output_dir` cannot become a Hugging Face model directory (it is a file)."""
    if not output_dir:
        raise ValueError("No output_dir given for the Hugging Face model directory.")
    if fileio.isfile(output_dir):
        raise FileExistsError(f"output_dir {output_dir} is a file; a Hugging Face model is a directory.")


def write_hf_directory(tensors, config, spec, output_dir, vocab_file, do_lower_case=True, labels=None):
    """Writes `tensors` (original name -> array; every tensor of `spec`'s model, as a strict restore gives them) into
    output_dir as a transformers directory of `spec`'s class (config.json, model.safetensors, vocab.txt, tokenizer
    files; `labels`: one per head output, as convert checks them, None: LABEL_i), checked before writing,
    model.safetensors committed last; returns output_dir."""
    from safetensors.numpy import save

    check_hf_output_dir(output_dir)
    architecture = ARCHITECTURES[spec.name]
    check_vocab(vocab_file, config)
    prefix = "" if architecture == "BertModel" else "bert."
    heads = {attribute: spec.model.heads[attribute] for attribute in spec.head_names}
    tensor_map = hf_name_map(config.num_hidden_layers, heads, prefix)
    hf_tensors = {hf: np.ascontiguousarray(np.asarray(tensors[orig], np.float32).T if transpose
                                           else np.asarray(tensors[orig], np.float32))
                  for hf, (orig, transpose) in tensor_map.items()}
    if spec.labelled:  # the head's output_weights [num_labels, H]
        labels = labels or [f"LABEL_{i}" for i in range(len(tensors[heads[spec.head_names[0]][0][0]]))]
    else:
        labels = None
    tokenizer = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case), "do_basic_tokenize": True,
                 "never_split": None, "tokenize_chinese_chars": True, "strip_accents": None,
                 "model_max_length": config.max_position_embeddings, **_SPECIAL_TOKENS}
    with fileio.staged_directory(output_dir, key="model.safetensors", remove=_REPLACED, label="hf") as staging:
        fileio.write_text_atomically(os.path.join(staging, "config.json"),
                                     json.dumps(hf_config(config, spec, labels), indent=2, sort_keys=True) + "\n")
        fileio.copy_file(vocab_file, os.path.join(staging, "vocab.txt"))
        for name, content in (("tokenizer_config.json", tokenizer), ("special_tokens_map.json", _SPECIAL_TOKENS)):
            fileio.write_text_atomically(os.path.join(staging, name), json.dumps(content, indent=2) + "\n")
        fileio.write_bytes_atomically(os.path.join(staging, "model.safetensors"),
                                      save(hf_tensors, metadata={"format": "pt"}))
    logging.info("Wrote a Hugging Face %s (%d tensors, hidden_act %s) to %s", architecture, len(hf_tensors),
                 _TO_HF_ACTIVATION[config.hidden_act.lower()], output_dir)
    return output_dir
