"""A tiny, learnable classification task for trainer tests: the label is whether token 1 is in the top half."""
import numpy as np
import tensorflow as tf

from bert_tf.model.config import BertConfig


def config(dropout_prob=0.0, num_hidden_layers=2):
    """L=2 (unless asked), H=32; no dropout unless asked (so that different batchings give the same updates)."""
    return BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=num_hidden_layers, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=16, type_vocab_size=2,
                      hidden_dropout_prob=dropout_prob, attention_probs_dropout_prob=dropout_prob)


CONFIG = config()
_rng = np.random.RandomState(0)
IDS = _rng.randint(5, 50, (64, 8)).astype(np.int32)
LABELS = (IDS[:, 1] > 27).astype(np.int32)


def features(ids=IDS):
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def dataset_fn(batch_size, ctx=None, seed=None):
    """The 64 examples, sharded per input pipeline, shuffled each epoch (order drawn from `seed`), repeated. Without
    tf.data's autotuner: deleting an autotuned iterator waits for the autotuner's next period (seconds once it has
    run a while), which a test module's garbage collection would pay for every Trainer it made."""
    ds = tf.data.Dataset.from_tensor_slices((features(), {"label_ids": LABELS}))
    if ctx is not None and ctx.num_input_pipelines > 1:
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.shuffle(len(LABELS), seed=seed).repeat().batch(batch_size, drop_remainder=True).with_options(options)


def loss_fn(labels, outputs):
    return tf.keras.losses.sparse_categorical_crossentropy(labels["label_ids"], outputs["logits"], from_logits=True)
