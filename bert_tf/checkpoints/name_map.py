"""The names of our models' variables: the original TF1 names, with our attribute paths and the names of Model
Garden and KerasHub (`encoder_rows`; Hugging Face's follow from the original names: `huggingface.hf_name_map`) for the
encoder; a task model's heads in its class's `heads` (bert_tf.model.task_models). A model is a `BertModel`, or has a
`.bert` BertModel and the heads its `heads` names.
"""
import collections
import re

from bert_tf.model.encoder import BertModel

# One encoder variable: its original name, our attribute path, Model Garden's variable name and object path inside its
# BertEncoder, KerasHub's variable path, and the layout of the last three (`model_garden.to_original`).
Row = collections.namedtuple("Row", ["original", "ours", "model_garden", "model_garden_path", "keras_hub", "layout"])
_EMBEDDINGS = [
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings", "word_embeddings/embeddings",
     "_embedding_layer/embeddings", "token_embedding/embeddings", None),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings", "type_embeddings/embeddings",
     "_type_embedding_layer/embeddings", "segment_embedding/embeddings", None),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings", "position_embedding/embeddings",
     "_position_embedding_layer/embeddings", "position_embedding/embeddings", None),
    *[(f"bert/embeddings/LayerNorm/{w}", f"embeddings.layer_norm.{w}", f"embeddings/layer_norm/{w}",
       f"_embedding_norm_layer/{w}", f"embeddings_layer_norm/{w}", None) for w in ("gamma", "beta")],
]
_POOLER = [(f"bert/pooler/dense/{w}", f"pooler.dense.{w}", f"pooler_transform/{w}", f"_pooler_layer/{w}",
            f"pooled_dense/{w}", None) for w in ("kernel", "bias")]
_LAYER = [  # inside layer i (`encoder_rows`)
    *[(f"attention/self/{p}/{w}", f"attention.{p}.{w}", f"self_attention/{p}/{w}", f"_attention_layer/_{p}_dense/{w}",
       f"self_attention_layer/{p}/{w}", f"heads_{w}") for p in ("query", "key", "value") for w in ("kernel", "bias")],
    *[(f"attention/output/dense/{w}", f"attention.output_dense.{w}", f"self_attention/attention_output/{w}",
       f"_attention_layer/_output_dense/{w}", f"self_attention_layer/attention_output/{w}", layout)
      for w, layout in (("kernel", "heads_output"), ("bias", None))],
    *[(f"attention/output/LayerNorm/{w}", f"attention.layer_norm.{w}", f"self_attention_layer_norm/{w}",
       f"_attention_layer_norm/{w}", f"self_attention_layer_norm/{w}", None) for w in ("gamma", "beta")],
    *[(f"intermediate/dense/{w}", f"intermediate.{w}", f"intermediate/{w}", f"_intermediate_dense/{w}",
       f"feedforward_intermediate_dense/{w}", None) for w in ("kernel", "bias")],
    *[(f"output/dense/{w}", f"output_dense.{w}", f"output/{w}", f"_output_dense/{w}", f"feedforward_output_dense/{w}",
       None) for w in ("kernel", "bias")],
    *[(f"output/LayerNorm/{w}", f"layer_norm.{w}", f"output_layer_norm/{w}", f"_output_layer_norm/{w}",
       f"feedforward_layer_norm/{w}", None) for w in ("gamma", "beta")],
]
# Variables that only optimizers and loss scaling write: never reported as unused.
OPTIMIZER_NAME = re.compile(r"(/adam_[mv]$|/(Adam|Adam_1|Momentum|LAMB|lamb_[mv])$|^global_step$|"
                             r"^(good_steps|current_loss_scale|loss_scale)$|/ExponentialMovingAverage$)")
# Which config key each dimension of a variable comes from, for shape errors (else a head's output_weights
# [num_labels, H] and output_bias [num_labels]; else hidden_size / intermediate_size).
SHAPE_KEYS = {
    "bert/embeddings/word_embeddings": ("vocab_size", "hidden_size"),
    "bert/embeddings/position_embeddings": ("max_position_embeddings", "hidden_size"),
    "bert/embeddings/token_type_embeddings": ("type_vocab_size", "hidden_size"),
    "cls/predictions/output_bias": ("vocab_size",),
}
ENCODER_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")


def _resolve_attr(obj, path):
    """Follows a dotted attribute path; numeric parts index lists ("encoder_layers.3.attention")."""
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def model_parts(model):
    """{"bert": the encoder, head attribute: head} for a BertModel or a task model (see the module docstring)."""
    bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(f"Expected a BertModel or a model with a `.bert` BertModel, got {type(model).__name__}.")
    heads = {} if model is bert else {h: getattr(model, h) for h in model.heads if getattr(model, h, None) is not None}
    return {"bert": bert, **heads}


def encoder_rows(num_layers):
    """A Row for every variable of a `num_layers` encoder."""
    rows = [Row(*row) for row in _EMBEDDINGS + _POOLER]
    for i in range(num_layers):
        prefixes = (f"bert/encoder/layer_{i}/", f"encoder_layers.{i}.", f"transformer/layer_{i}/",
                    f"_transformer_layers/{i}/", f"transformer_layer_{i}/")
        rows += [Row(*(prefix + name for prefix, name in zip(prefixes, row)), row[-1]) for row in _LAYER]
    return rows


def original_variable_map(model):
    """Original TF1 variable name -> our Keras variable, for every variable of `model` (a BertModel or task model)."""
    parts = model_parts(model)
    bert = parts.pop("bert")
    if not bert.built or not bert.weights:
        raise ValueError(f"Model {bert.name!r} must be built (called once) before its variables can be mapped.")
    mapping = {row.original: _resolve_attr(bert, row.ours) for row in encoder_rows(len(bert.encoder_layers))}
    for attr, head in parts.items():
        mapping.update({name: _resolve_attr(head, path) for name, path in model.heads[attr]})
    return mapping


def model_tensors(model, names=None):
    """Original name -> array of `model`'s variables (`names`: of those only)."""
    mapping = original_variable_map(model)
    return {name: mapping[name].numpy() for name in (mapping if names is None else names)}
