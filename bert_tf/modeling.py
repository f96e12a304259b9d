"""The original `modeling.py`'s public names, for code written against google-research/bert.

    from bert_tf import modeling
    config = modeling.BertConfig.from_json_file("bert_config.json")
    model = modeling.BertModel(config)

The implementation lives in `bert_tf.model` (config, activations, encoder); this module only re-exports it.
"""
from bert_tf.model.activations import gelu
from bert_tf.model.activations import get as get_activation
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import (
    LAYER_NORM_EPSILON,
    BertAttention,
    BertEmbeddings,
    BertModel,
    BertPooler,
    TransformerBlock,
    attention_mask_adder,
    build_bert_model,
    create_initializer,
)

__all__ = [
    "BertConfig", "BertModel", "BertEmbeddings", "BertAttention", "TransformerBlock", "BertPooler",
    "LAYER_NORM_EPSILON", "attention_mask_adder", "build_bert_model", "create_initializer", "gelu", "get_activation",
]
