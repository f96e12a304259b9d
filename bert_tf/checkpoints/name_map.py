"""The original BERT variable names of our models, as (original TF1 name, attribute path of our Keras variable)
rows: the encoder's here; a task model's heads in its class's `heads` (bert_tf.model.task_models). A model is a
`BertModel`, or has a `.bert` BertModel and the heads its `heads` names.
"""
import re

from bert_tf.model.encoder import BertModel

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


def _ensure_built(model):
    if not model.built or not model.weights:
        raise ValueError(f"Model {model.name!r} must be built (called once) before its variables can be mapped.")


def model_parts(model):
    """{"bert": the encoder, head attribute: head} for a BertModel or a task model (see the module docstring)."""
    bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(f"Expected a BertModel or a model with a `.bert` BertModel, got {type(model).__name__}.")
    heads = {} if model is bert else {h: getattr(model, h) for h in model.heads if getattr(model, h, None) is not None}
    return {"bert": bert, **heads}


def original_variable_map(model):
    """Original TF1 variable name -> our Keras variable, for every variable of `model` (a BertModel or task model)."""
    parts = model_parts(model)
    bert = parts.pop("bert")
    _ensure_built(bert)
    rows = list(_EMBEDDINGS) + list(_POOLER)
    for i in range(len(bert.encoder_layers)):
        rows += [(f"bert/encoder/layer_{i}/{name}", f"encoder_layers.{i}.{path}") for name, path in _LAYER]
    mapping = {name: _resolve_attr(bert, path) for name, path in rows}
    for attr, head in parts.items():
        mapping.update({name: _resolve_attr(head, path) for name, path in model.heads[attr]})
    return mapping
