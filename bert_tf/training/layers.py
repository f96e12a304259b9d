"""Which weights of a task model train, and at which rate: --layerwise_lr_decay and --freeze_layers.

Depth in an encoder of L layers: the embeddings 0, layer i (0 the lowest) i + 1. Under decay RHO a variable at depth
d trains at lr x RHO^(L + 1 - d); the pooler and the heads at lr. Freezing K layers fixes the embeddings and layers
0 to K - 1 (`FREEZE_ENCODER`: the whole encoder, pooler included); they still load, save and export.
"""
from bert_tf.checkpoints import model_parts

FREEZE_ENCODER = -1


def _encoder(model):
    """(the BertModel of `model`, its parts in depth order: the embeddings, then the transformer layers)."""
    bert = model_parts(model)["bert"]
    return bert, [bert.embeddings, *bert.encoder_layers]


def learning_rate_multipliers(model, decay):
    """{variable path: RHO^(L + 1 - depth)} for the encoder variables of `model` (a BertModel or a task model); the
    others' multiplier is 1."""
    _, parts = _encoder(model)
    return {v.path: decay ** (len(parts) - depth) for depth, part in enumerate(parts) for v in part.weights}


def freeze(model, num_layers):
    """Makes the embeddings and the `num_layers` lowest transformer layers of `model` not trainable (no gradient,
    no optimizer slots); `FREEZE_ENCODER`: the whole encoder; 0: nothing."""
    if not num_layers:
        return
    bert, parts = _encoder(model)
    count = len(bert.encoder_layers)
    if not FREEZE_ENCODER <= num_layers <= count:
        raise ValueError(f"--freeze_layers={num_layers}: the model has {count} transformer layers "
                         f"(num_hidden_layers); expected {FREEZE_ENCODER} (the whole encoder) to {count}.")
    for part in parts[:num_layers + 1] if num_layers != FREEZE_ENCODER else [*parts, bert.pooler]:
        part.trainable = False
