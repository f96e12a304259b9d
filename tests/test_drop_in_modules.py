"""bert_tf.modeling and bert_tf.tokenization: the original modules' APIs, for code written against
google-research/bert. modeling's BertModel is checked against the original extract_features.py's golden output
(real MiniLM weights) and an independent NumPy forward pass; its functions against NumPy and the library's encoder."""
import gzip
import json
import os
import subprocess
import sys

import keras
import numpy as np
import numpy_bert
import pytest
import tensorflow as tf

from bert_tf import checkpoints, modeling, tokenization
from bert_tf.inference import extract_features
from bert_tf.model import activations, config, encoder
from bert_tf.text import tokenization as text_tokenization

# The names the original tokenization.py defines and its own tests use (the three private helpers included).
TOKENIZATION_NAMES = ["FullTokenizer", "BasicTokenizer", "WordpieceTokenizer", "load_vocab", "convert_to_unicode",
                      "printable_text", "convert_by_vocab", "convert_tokens_to_ids", "convert_ids_to_tokens",
                      "whitespace_tokenize", "validate_case_matches_checkpoint", "_is_whitespace", "_is_control",
                      "_is_punctuation"]
# Every public name the original modeling.py defines, and the getters of its BertModel.
MODELING_NAMES = ["BertConfig", "BertModel", "gelu", "get_activation", "get_assignment_map_from_checkpoint",
                  "dropout", "layer_norm", "layer_norm_and_dropout", "create_initializer", "embedding_lookup",
                  "embedding_postprocessor", "create_attention_mask_from_input_mask", "attention_layer",
                  "transformer_model", "get_shape_list", "reshape_to_matrix", "reshape_from_matrix", "assert_rank"]
BERT_MODEL_GETTERS = ["get_pooled_output", "get_sequence_output", "get_all_encoder_layers", "get_embedding_output",
                      "get_embedding_table"]
# The names bert_tf.modeling leaves out (its docstring says why).
MODELING_ABSENT = ["embedding_lookup", "embedding_postprocessor", "attention_layer"]


def test_tokenization_names_are_the_implementation():
    for name in TOKENIZATION_NAMES:
        assert getattr(tokenization, name) is getattr(text_tokenization, name), name


def test_modeling_has_the_originals_names_but_the_documented_absent_ones():
    for name in MODELING_NAMES:
        assert hasattr(modeling, name) == (name not in MODELING_ABSENT), name
        assert f"`{name}`" in modeling.__doc__, name
    for getter in BERT_MODEL_GETTERS:
        assert callable(getattr(modeling.BertModel, getter)), getter
    assert modeling.BertConfig is config.BertConfig
    assert modeling.gelu is activations.gelu and modeling.create_initializer is encoder.create_initializer
    assert modeling.KerasBertModel is encoder.BertModel


def test_get_activation_follows_the_original():
    assert modeling.get_activation("GELU") is activations.gelu
    assert modeling.get_activation("gelu_exact") is activations.gelu_exact
    assert all(modeling.get_activation(name) is None for name in (None, "", "linear"))
    assert modeling.get_activation(tf.tanh) is tf.tanh
    with pytest.raises(ValueError, match="swish"):
        modeling.get_activation("swish")


@pytest.fixture
def tiny_checkpoint(tiny_config, tmp_path):
    """(weights by original name, the prefix of an original-format checkpoint holding them) for tiny_config."""
    weights = numpy_bert.random_weights(tiny_config, seed=3)
    return weights, checkpoints.save_tensors(weights, str(tmp_path / "bert_model.ckpt"))


def _bert(tiny_config, tiny_batch, is_training=False, **kwargs):
    return modeling.BertModel(tiny_config, is_training, tiny_batch["input_ids"], tiny_batch["input_mask"],
                              tiny_batch["segment_ids"], **kwargs)


def test_bert_model_getters_give_the_restored_weights_outputs(tiny_config, tiny_batch, tiny_checkpoint):
    weights, prefix = tiny_checkpoint
    model = _bert(tiny_config, tiny_batch)
    reference = numpy_bert.forward(weights, tiny_config, **tiny_batch)
    assert np.abs(model.get_sequence_output() - reference["sequence_output"]).max() > 0.1  # random initial weights
    report = model.restore(prefix)
    assert len(report.loaded) == len(weights) and not report.missing
    layers = model.get_all_encoder_layers()
    assert len(layers) == tiny_config.num_hidden_layers
    for ours, theirs in zip(layers, reference["encoder_outputs"]):
        np.testing.assert_allclose(ours, theirs, atol=2e-5)
    for getter, key in [("get_sequence_output", "sequence_output"), ("get_pooled_output", "pooled_output"),
                        ("get_embedding_output", "embedding_output")]:
        np.testing.assert_allclose(getattr(model, getter)(), reference[key], atol=2e-5, err_msg=getter)
    np.testing.assert_array_equal(model.get_sequence_output(), layers[-1])
    np.testing.assert_array_equal(model.get_embedding_table(), weights["bert/embeddings/word_embeddings"])
    assert model.get_pooled_output().shape == (3, tiny_config.hidden_size)


def test_bert_model_defaults_and_dropout(tiny_config, tiny_batch, tiny_checkpoint):
    _, prefix = tiny_checkpoint
    ids = tiny_batch["input_ids"]
    explicit = modeling.BertModel(tiny_config, False, ids, np.ones_like(ids), np.zeros_like(ids))
    default = modeling.BertModel(tiny_config, False, ids)
    training = modeling.BertModel(tiny_config, True, ids)
    for model in (explicit, default, training):
        model.restore(prefix)
    assert tiny_config.hidden_dropout_prob == 0.1  # is_training=False zeroes the dropout of a copy
    np.testing.assert_array_equal(default.get_sequence_output(), explicit.get_sequence_output())
    first = default.get_sequence_output().numpy()
    default.restore(prefix)  # computes the outputs again: without dropout, the same
    np.testing.assert_array_equal(default.get_sequence_output(), first)
    assert np.abs(training.get_sequence_output() - first).max() > 1e-3  # dropout


def test_bert_model_refuses_what_the_original_refuses_or_cannot_name(tiny_config, tiny_batch):
    with pytest.raises(ValueError, match="expected rank `2`"):
        modeling.BertModel(tiny_config, False, tiny_batch["input_ids"][None])
    with pytest.raises(ValueError, match="scope='student'"):
        _bert(tiny_config, tiny_batch, scope="student")


def test_bert_model_matches_the_originals_golden_features(golden_checkpoint, data_dir):
    """The original extract_features.py's output (layers -1..-4, values rounded to 6 digits) for the first three
    lines of its input, with the same checkpoint and feature conversion."""
    bert_config = modeling.BertConfig.from_json_file(os.path.join(golden_checkpoint, "bert_config.json"))
    tokenizer = tokenization.FullTokenizer(os.path.join(golden_checkpoint, "vocab.txt"), do_lower_case=True)
    examples = extract_features.read_examples(os.path.join(data_dir, "extract_input.txt"))[:3]
    features = extract_features.convert_examples_to_features(examples, 128, tokenizer)
    inputs = [tf.constant([getattr(f, key) for f in features]) for key in ("input_ids", "input_mask",
                                                                          "input_type_ids")]
    model = modeling.BertModel(bert_config, False, *inputs)
    model.restore(os.path.join(golden_checkpoint, "bert_model.ckpt"))
    with gzip.open(os.path.join(data_dir, "extract_features_minilm.jsonl.gz"), "rt") as f:
        golden = [json.loads(line) for line in f][:3]
    layers = [layer.numpy() for layer in model.get_all_encoder_layers()]
    worst = 0.0
    for row, (feature, example) in enumerate(zip(features, golden)):
        assert [token["token"] for token in example["features"]] == feature.tokens
        for position, token in enumerate(example["features"]):
            assert [layer["index"] for layer in token["layers"]] == [-1, -2, -3, -4]
            for layer in token["layers"]:
                worst = max(worst, np.abs(layers[layer["index"]][row, position] - layer["values"]).max())
    assert worst <= 2e-5, worst  # as tests/tasks/test_extract_features.py: 6-digit rounding and float32
    np.testing.assert_array_equal(model.get_sequence_output(), layers[-1])
    pooled = model.get_pooled_output().numpy()
    assert pooled.shape == (3, 384) and np.abs(pooled).max() < 1.0
    assert model.get_embedding_output().shape == (3, 128, 384)


def test_assignment_map_names_the_checkpoints_variables(tiny_config, tiny_batch, tiny_checkpoint, tmp_path):
    weights, _ = tiny_checkpoint
    without_pooler = {name: value for name, value in weights.items() if not name.startswith("bert/pooler/")}
    prefix = checkpoints.save_tensors(without_pooler, str(tmp_path / "partial" / "bert_model.ckpt"))
    model = _bert(tiny_config, tiny_batch)
    tf1_variable = tf.Variable(np.zeros(3, np.float32), name="cls/predictions/output_bias")
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        model.keras_model.variables + [tf1_variable], prefix)
    by_name = checkpoints.original_variable_map(model.keras_model)
    assert list(assignment_map) == [name for name, _ in tf.train.list_variables(prefix) if name in by_name]
    assert set(assignment_map) == set(without_pooler)
    assert all(assignment_map[name] is by_name[name] for name in assignment_map)
    assert set(initialized) == set(without_pooler) | {name + ":0" for name in without_pooler}
    heads = {"cls/predictions/output_bias": np.ones(3, np.float32), "output_bias": np.ones(3, np.float32)}
    with_heads = checkpoints.save_tensors({**without_pooler, **heads}, str(tmp_path / "heads" / "bert_model.ckpt"))
    other_keras_variable = keras.Variable(np.zeros(3, np.float32), name="output_bias")
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint([tf1_variable, other_keras_variable], with_heads)
    assert list(assignment_map) == ["cls/predictions/output_bias"]  # a TF1 variable by its own name; not "output_bias"


def test_attention_mask_from_input_mask(tiny_batch):
    mask = tiny_batch["input_mask"]
    for from_tensor in (tiny_batch["input_ids"][:, :5], np.zeros((3, 5, 4), np.float32)):
        ours = modeling.create_attention_mask_from_input_mask(tf.constant(from_tensor), tf.constant(mask))
        assert ours.dtype == tf.float32
        np.testing.assert_array_equal(ours, np.ones((3, 5, 1)) * mask[:, None, :])


def _variables_started_at(values):
    """A scope within which each new variable named in `values` (name without ":0" -> array) takes that value."""
    def creator(next_creator, **kwargs):
        variable = next_creator(**kwargs)
        name = variable.name.rsplit(":", 1)[0]
        if name in values:
            variable.assign(values[name])
        return variable
    return tf.variable_creator_scope(creator)


def test_transformer_model_is_the_encoders_blocks(tiny_config, tiny_batch, tiny_checkpoint):
    model = _bert(tiny_config, tiny_batch)
    model.restore(tiny_checkpoint[1])
    mask = modeling.create_attention_mask_from_input_mask(tf.constant(tiny_batch["input_ids"]),
                                                          tf.constant(tiny_batch["input_mask"]))
    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    block_weights = {v.path: v.numpy() for v in model.keras_model.weights if v.path.startswith("layer_")}
    with _variables_started_at(block_weights):
        layers = modeling.transformer_model(model.get_embedding_output(), mask, do_return_all_layers=True, **sizes)
    assert len(layers) == 2
    for ours, encoder_layer in zip(layers, model.get_all_encoder_layers()):
        np.testing.assert_allclose(ours, encoder_layer, atol=1e-5)
    last = modeling.transformer_model(model.get_embedding_output(), mask, **sizes)
    assert last.shape == (3, 9, 32)


def test_transformer_model_attends_only_where_the_mask_allows():
    rng = np.random.RandomState(0)
    x = np.repeat(rng.normal(size=(1, 6, 16)).astype(np.float32), 2, axis=0)
    x[1, 4:] = rng.normal(size=(2, 16))  # the rows differ only where the mask hides them
    mask = modeling.create_attention_mask_from_input_mask(tf.constant(x), tf.constant([[1, 1, 1, 1, 0, 0]] * 2))
    out = modeling.transformer_model(tf.constant(x), mask, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=24, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0).numpy()
    np.testing.assert_allclose(out[0, :4], out[1, :4], atol=1e-6)
    assert np.abs(out[0, 4:] - out[1, 4:]).max() > 1e-3
    unmasked = modeling.transformer_model(tf.constant(x), hidden_size=16, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=24, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0).numpy()
    assert np.abs(unmasked[0, :4] - unmasked[1, :4]).max() > 1e-3  # without a mask, every position is attended
    with pytest.raises(ValueError, match="not a multiple"):
        modeling.transformer_model(tf.constant(x), hidden_size=16, num_attention_heads=3)
    with pytest.raises(ValueError, match="width of the input tensor"):
        modeling.transformer_model(tf.constant(x), hidden_size=24, num_attention_heads=2)


def test_shape_helpers():
    shapes = []

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 4], tf.float32)])
    def shape_of(x):
        shapes.append(modeling.get_shape_list(x, expected_rank=3))
        return shapes[-1][0]

    assert shape_of(tf.zeros((2, 5, 4))) == 2 and shapes[0][1:] == [5, 4] and tf.is_tensor(shapes[0][0])
    x = tf.reshape(tf.range(24.0), (2, 3, 4))
    matrix = modeling.reshape_to_matrix(x)
    assert matrix.shape == (6, 4) and modeling.reshape_to_matrix(matrix) is matrix
    np.testing.assert_array_equal(modeling.reshape_from_matrix(matrix, [2, 3, 4]), x)
    with pytest.raises(ValueError, match="at least rank 2"):
        modeling.reshape_to_matrix(tf.zeros(3))
    modeling.assert_rank(x, [2, 3])
    with pytest.raises(ValueError, match="`x`, the actual rank `3`"):
        modeling.assert_rank(x, 2, name="x")


def test_dropout_and_layer_norm():
    x = tf.constant(np.random.RandomState(1).normal(3.0, 2.0, (4, 8)).astype(np.float32))
    assert modeling.dropout(x, 0.0) is x and modeling.dropout(x, None) is x
    dropped = modeling.dropout(tf.ones((100, 100)), 0.5).numpy()
    assert set(np.unique(dropped)) == {0.0, 2.0} and 0.4 < (dropped == 0).mean() < 0.6
    normed = modeling.layer_norm(x).numpy()
    np.testing.assert_allclose(normed, numpy_bert.layer_norm(x.numpy(), 1.0, 0.0), atol=1e-5)
    np.testing.assert_array_equal(modeling.layer_norm_and_dropout(x, 0.0), normed)


def test_the_python_tokenizer_imports_without_tensorflow():
    code = ("import sys; from bert_tf import tokenization; tokenization.BasicTokenizer().tokenize('Hi there'); "
            "print(sorted(m for m in ('tensorflow', 'keras', 'tensorflow_text') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
