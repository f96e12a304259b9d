"""An independent NumPy forward pass of the original BERT, written from the paper and the original modeling.py
math, keyed by the original TF1 variable names. Tests compare the Keras model against it."""
import math

import numpy as np


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


ACTIVATIONS = {"gelu": gelu_tanh, "gelu_exact": gelu_erf, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh}


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def random_weights(config, seed=0, heads=False, num_labels=3):
    """Random float32 weights for every original variable name of `config` (a BertConfig)."""
    rng = np.random.RandomState(seed)
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size

    def w(*shape):
        return rng.normal(0, 0.3, shape).astype(np.float32)

    out = {"bert/embeddings/word_embeddings": w(v, h),
           "bert/embeddings/token_type_embeddings": w(config.type_vocab_size, h),
           "bert/embeddings/position_embeddings": w(config.max_position_embeddings, h),
           "bert/embeddings/LayerNorm/gamma": 1 + w(h), "bert/embeddings/LayerNorm/beta": w(h),
           "bert/pooler/dense/kernel": w(h, h), "bert/pooler/dense/bias": w(h)}
    for n in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{n}/"
        for name in ("query", "key", "value"):
            out[p + f"attention/self/{name}/kernel"] = w(h, h)
            out[p + f"attention/self/{name}/bias"] = w(h)
        out[p + "attention/output/dense/kernel"], out[p + "attention/output/dense/bias"] = w(h, h), w(h)
        out[p + "attention/output/LayerNorm/gamma"], out[p + "attention/output/LayerNorm/beta"] = 1 + w(h), w(h)
        out[p + "intermediate/dense/kernel"], out[p + "intermediate/dense/bias"] = w(h, i), w(i)
        out[p + "output/dense/kernel"], out[p + "output/dense/bias"] = w(i, h), w(h)
        out[p + "output/LayerNorm/gamma"], out[p + "output/LayerNorm/beta"] = 1 + w(h), w(h)
    if heads:
        out.update({"cls/predictions/transform/dense/kernel": w(h, h), "cls/predictions/transform/dense/bias": w(h),
                    "cls/predictions/transform/LayerNorm/gamma": 1 + w(h),
                    "cls/predictions/transform/LayerNorm/beta": w(h), "cls/predictions/output_bias": w(v),
                    "cls/seq_relationship/output_weights": w(2, h), "cls/seq_relationship/output_bias": w(2),
                    "output_weights": w(num_labels, h), "output_bias": w(num_labels),
                    "cls/squad/output_weights": w(2, h), "cls/squad/output_bias": w(2)})
    return out


def forward(weights, config, input_ids, input_mask, segment_ids):
    """Returns dict: embedding_output, encoder_outputs (list), sequence_output [B,S,H], pooled_output [B,H]."""
    act = ACTIVATIONS[config.hidden_act]
    g = weights.__getitem__
    b, s = input_ids.shape
    n, d = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    x = (g("bert/embeddings/word_embeddings")[input_ids] + g("bert/embeddings/token_type_embeddings")[segment_ids]
         + g("bert/embeddings/position_embeddings")[:s][None])
    x = layer_norm(x, g("bert/embeddings/LayerNorm/gamma"), g("bert/embeddings/LayerNorm/beta"))
    embedding_output, layers = x, []
    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    for layer in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{layer}/"

        def dense(t, name, p=p):
            return t @ g(p + name + "/kernel") + g(p + name + "/bias")

        def heads(t):
            return t.reshape(b, s, n, d).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, f"attention/self/{name}")) for name in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, n * d)
        attention = layer_norm(dense(context, "attention/output/dense") + x,
                               g(p + "attention/output/LayerNorm/gamma"), g(p + "attention/output/LayerNorm/beta"))
        ffn = dense(act(dense(attention, "intermediate/dense")), "output/dense")
        x = layer_norm(ffn + attention, g(p + "output/LayerNorm/gamma"), g(p + "output/LayerNorm/beta"))
        layers.append(x)
    pooled = np.tanh(x[:, 0] @ g("bert/pooler/dense/kernel") + g("bert/pooler/dense/bias"))
    return {"embedding_output": embedding_output, "encoder_outputs": layers, "sequence_output": x,
            "pooled_output": pooled}


def masked_lm_logits(weights, config, sequence_output, positions):
    """[B,S,H], positions [B,P] -> [B,P,V] logits of the original's masked LM head."""
    g = weights.__getitem__
    x = np.take_along_axis(sequence_output, positions[..., None], axis=1)
    x = ACTIVATIONS[config.hidden_act](x @ g("cls/predictions/transform/dense/kernel")
                                       + g("cls/predictions/transform/dense/bias"))
    x = layer_norm(x, g("cls/predictions/transform/LayerNorm/gamma"), g("cls/predictions/transform/LayerNorm/beta"))
    return x @ g("bert/embeddings/word_embeddings").T + g("cls/predictions/output_bias")


def write_tf1_checkpoint(weights, prefix):
    """Writes `weights` as a TF1 checkpoint with a tf.compat.v1 graph and Saver, as the original code saved them."""
    import tensorflow as tf
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(value, name=name) for name, value in weights.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, write_meta_graph=False)
    return prefix
