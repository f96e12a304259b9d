"""benchmarks/encoder_benchmark.py's --dense_layers_only: bert-tf's side runs the encoder's dense layers on the
model's own weights, in the order the module docstring states (checked against NumPy on a tiny model)."""

import benchmark_modules
import numpy as np
import numpy_bert

from bert_tf import checkpoints
from bert_tf.model import encoder

encoder_benchmark = benchmark_modules.load("encoder_benchmark")


def numpy_dense_layers(weights, config, x, seq_length):
    """The chain of encoder_benchmark's docstring, from the original variable names."""
    def dense(t, name):
        return t @ weights[name + "/kernel"] + weights[name + "/bias"]
    for layer in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{layer}/"
        qkv = sum(dense(x, p + f"attention/self/{name}") for name in ("query", "key", "value"))
        x = dense(numpy_bert.gelu_tanh(dense(dense(qkv, p + "attention/output/dense"), p + "intermediate/dense")),
                  p + "output/dense")
    x = x.reshape(-1, seq_length, x.shape[-1])
    return x, np.tanh(dense(x[:, 0], "bert/pooler/dense"))


def test_dense_layers_only_runs_the_encoders_dense_layers_in_order(tiny_config, tiny_batch):
    model = encoder.BertModel(tiny_config)
    weights = numpy_bert.random_weights(tiny_config, seed=3)
    checkpoints.assign_by_name(model, {k: (lambda v=v: v) for k, v in weights.items()}, "random", strict=True)
    seq_length = tiny_batch["input_ids"].shape[1]
    x = encoder_benchmark.dense_layers_input(tiny_batch, tiny_config.hidden_size, seed=7)
    assert x.shape == (tiny_batch["input_ids"].size, tiny_config.hidden_size) and x.dtype == np.float32
    np.testing.assert_array_equal(x, encoder_benchmark.dense_layers_input(tiny_batch, tiny_config.hidden_size, 7))
    ours = encoder_benchmark.tf_dense_layers(model, x, seq_length)
    ref = numpy_dense_layers(weights, tiny_config, x.astype(np.float64), seq_length)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_dense_layers_flops_leave_out_the_attention_matmuls(tiny_config):
    full = encoder_benchmark.encoder_flops(tiny_config.to_dict(), 9)
    dense = encoder_benchmark.encoder_flops(tiny_config.to_dict(), 9, attention=False)
    h, layers = tiny_config.hidden_size, tiny_config.num_hidden_layers
    assert full - dense == layers * 2 * 2 * 9 * 9 * h  # QK^T and PV: 2 FLOPs per multiply-add, S x S x H each
