import json
import os

import numpy as np
import numpy_bert
import pytest
import tensorflow as tf
import tiny_training

from bert_tf import checkpoints, fileio
from bert_tf.model import encoder
from bert_tf.model.config import BertConfig, check_vocab_size
from bert_tf.model.heads import ClassifierHead, SpanHead
from bert_tf.model.task_models import (
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)


class TaskModel:
    """A stand-in for a fine-tuning model: the attribute convention checkpoints.name_map documents."""
    heads = {**BertClassifier.heads, **BertSpanLabeler.heads}

    def __init__(self, config, num_labels):
        self.bert = encoder.BertModel(config)
        self.classifier = ClassifierHead(num_labels)
        self.classifier(np.zeros((1, config.hidden_size), np.float32))
        self.span = SpanHead()
        self.span(np.zeros((1, 2, config.hidden_size), np.float32))


@pytest.fixture
def original_checkpoint(tiny_config, tmp_path):
    """A TF1 checkpoint as the original scripts write it, with optimizer slots and global_step."""
    weights = numpy_bert.random_weights(tiny_config, seed=7, heads=True, num_labels=3)
    slots = {f"{name}/adam_m": np.zeros_like(v) for name, v in list(weights.items())[:4]}
    slots["global_step"] = np.array(1000, np.int64)
    prefix = numpy_bert.write_tf1_checkpoint({**weights, **slots}, str(tmp_path / "orig" / "bert_model.ckpt"))
    return prefix, weights


def test_an_original_checkpoint_restores_as_the_reference(tiny_config, tiny_batch, original_checkpoint):
    prefix, weights = original_checkpoint
    model = encoder.BertModel(tiny_config)
    report = checkpoints.restore(model, prefix)
    assert report.missing == []
    assert sorted(report.unused) == sorted(n for n in weights if not n.startswith("bert/"))  # heads, no slots
    ref = numpy_bert.forward(weights, tiny_config, **tiny_batch)
    np.testing.assert_allclose(model(tiny_batch)["sequence_output"], ref["sequence_output"], atol=2e-5)


def test_heads_load_by_their_original_names(tiny_config, original_checkpoint):
    prefix, weights = original_checkpoint
    task = TaskModel(tiny_config, num_labels=3)
    report = checkpoints.restore(task, os.path.dirname(prefix))  # a directory works too
    assert {"output_weights", "cls/squad/output_bias"} <= set(report.loaded)
    assert report.unused == sorted(n for n in weights if n.startswith("cls/") and "squad" not in n)
    np.testing.assert_array_equal(task.classifier.projection.output_weights.numpy(), weights["output_weights"])
    np.testing.assert_array_equal(task.span.projection.output_bias.numpy(), weights["cls/squad/output_bias"])
    pretrainer = BertPretrainer(tiny_config)
    pretrainer({"input_ids": np.zeros((1, 2), np.int32), "input_mask": np.ones((1, 2), np.int32),
                "segment_ids": np.zeros((1, 2), np.int32), "masked_lm_positions": np.zeros((1, 1), np.int32)})
    report = checkpoints.restore(pretrainer, prefix, strict=True)
    assert "cls/predictions/output_bias" in report.loaded and report.missing == []


def test_missing_head_is_reported(tiny_config, tmp_path):
    weights = numpy_bert.random_weights(tiny_config, seed=8)
    prefix = numpy_bert.write_tf1_checkpoint(weights, str(tmp_path / "bert_model.ckpt"))
    task = TaskModel(tiny_config, num_labels=2)
    report = checkpoints.restore(task, prefix)
    assert set(report.missing) == {"output_weights", "output_bias", "cls/squad/output_weights",
                                   "cls/squad/output_bias"}
    with pytest.raises(ValueError, match="lacks 4 variables"):
        checkpoints.restore(task, prefix, strict=True)


def test_saved_original_checkpoint_loads_in_a_tf1_graph(tiny_config, original_checkpoint, tmp_path):
    """What the original code does with an init_checkpoint: restore variables by name in a TF1 graph."""
    prefix, weights = original_checkpoint
    task = TaskModel(tiny_config, num_labels=3)
    checkpoints.restore(task, prefix)
    out = checkpoints.save_original_checkpoint(task, str(tmp_path / "out" / "model.ckpt"))
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("model.ckpt")
    assert not [f for f in os.listdir(tmp_path / "out") if fileio.TEMP_MARK in f]  # no staging directory left
    task_weights = {n: v for n, v in weights.items() if not n.startswith(("cls/predictions", "cls/seq"))}
    assert dict(tf.train.list_variables(out)) == {n: list(v.shape) for n, v in task_weights.items()}
    with tf.Graph().as_default():
        variables = {n: tf.compat.v1.get_variable(n, shape=v.shape, dtype=tf.float32)
                     for n, v in task_weights.items()}
        tf.compat.v1.train.init_from_checkpoint(out, {n: n for n in variables})
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for name, value in session.run(variables).items():
                np.testing.assert_array_equal(value, weights[name], err_msg=name)


def test_vocab_size_mismatch_is_named(tiny_config, original_checkpoint):
    prefix, _ = original_checkpoint
    bigger = BertConfig.from_dict({**tiny_config.to_dict(), "vocab_size": 120})
    with pytest.raises(ValueError, match="vocab_size mismatch: .* 99 rows but the model's config says "
                                         "vocab_size=120"):
        checkpoints.restore(encoder.BertModel(bigger), prefix)
    wider = BertConfig.from_dict({**tiny_config.to_dict(), "intermediate_size": 40})
    with pytest.raises(ValueError, match="Shape mismatch for bert/encoder/layer_0/intermediate/dense/kernel"):
        checkpoints.restore(encoder.BertModel(wider), prefix)


def test_missing_checkpoint_is_clear(tiny_config, tmp_path):
    model = encoder.BertModel(tiny_config)
    with pytest.raises(FileNotFoundError, match="No TensorFlow checkpoint at .*nowhere/bert_model.ckpt"):
        checkpoints.restore(model, str(tmp_path / "nowhere" / "bert_model.ckpt"))


def test_checkpoint_without_bert_variables_is_rejected(tiny_config, tmp_path):
    prefix = numpy_bert.write_tf1_checkpoint({"dense/kernel": np.zeros((2, 2), np.float32)},
                                             str(tmp_path / "other.ckpt"))
    with pytest.raises(ValueError, match="holds no variable of a BERT model"):
        checkpoints.restore(encoder.BertModel(tiny_config), prefix)


def test_check_vocab_size(tiny_config):
    with pytest.raises(ValueError, match="vocab.txt has 100 tokens but bert_config.json says vocab_size=99"):
        check_vocab_size(tiny_config, {str(i): i for i in range(100)}, "vocab.txt")
    check_vocab_size(tiny_config, {str(i): i for i in range(99)}, "vocab.txt")


def _hf_state_dict(weights, config):
    """The original-name weights renamed and laid out as a Hugging Face BertModel state dict."""
    out = {"embeddings.position_ids": np.arange(config.max_position_embeddings)[None]}
    for name, value in weights.items():
        hf = name.replace("bert/", "").replace("/", ".").replace("layer_", "layer.")
        if hf.endswith(".kernel"):
            out[hf[:-len("kernel")] + "weight"] = np.ascontiguousarray(value.T)
        elif hf.endswith(".gamma"):
            out[hf[:-len("gamma")] + "weight"] = value
        elif hf.endswith(".beta"):
            out[hf[:-len("beta")] + "bias"] = value
        elif hf.endswith("_embeddings"):
            out[hf + ".weight"] = value
        else:
            out[hf] = value
    return out


def test_hugging_face_safetensors_import(tiny_config, tiny_batch, tmp_path):
    from safetensors.numpy import save_file
    config = BertConfig.from_dict({**tiny_config.to_dict(), "hidden_act": "gelu_exact"})
    weights = numpy_bert.random_weights(config, seed=9)
    path = str(tmp_path / "model.safetensors")
    save_file(_hf_state_dict(weights, config), path)
    hf_config = {**config.to_dict(), "hidden_act": "gelu", "layer_norm_eps": 1e-12, "model_type": "bert"}
    assert checkpoints.bert_config_from_hf(hf_config) == config  # HF "gelu" is the exact erf form
    model = encoder.BertModel(config)
    report = checkpoints.load_hf_safetensors(model, path, strict=True)
    assert report.unused == []
    ref = numpy_bert.forward(weights, config, **tiny_batch)
    np.testing.assert_allclose(model(tiny_batch)["pooled_output"], ref["pooled_output"], atol=2e-5)


def _hf_model_dir(path, config, weights):
    """A Hugging Face model directory (config.json, model.safetensors) of `weights` by original names; pretraining
    heads among them get BertForPreTraining's names."""
    from safetensors.numpy import save_file
    renames = {"cls.predictions.output_bias": "cls.predictions.bias",
               "cls.seq_relationship.output_weights": "cls.seq_relationship.weight",
               "cls.seq_relationship.output_bias": "cls.seq_relationship.bias"}
    os.makedirs(path)
    save_file({renames.get(k, k): v for k, v in _hf_state_dict(weights, config).items()},
              os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**config.to_dict(), "hidden_act": "gelu", "layer_norm_eps": 1e-12}, f)
    return str(path)


def _exact_gelu(config):
    return BertConfig.from_dict({**config.to_dict(), "hidden_act": "gelu_exact"})


def test_seeded_pretraining_heads_are_reproducible_draws_near_the_identity():
    heads = checkpoints.seeded_pretraining_heads(64, 500, seed=5)
    again = checkpoints.seeded_pretraining_heads(64, 500, seed=5)
    other = checkpoints.seeded_pretraining_heads(64, 500, seed=6)
    shapes = {"cls/predictions/transform/dense/kernel": (64, 64), "cls/predictions/transform/dense/bias": (64,),
              "cls/predictions/transform/LayerNorm/gamma": (64,), "cls/predictions/transform/LayerNorm/beta": (64,),
              "cls/predictions/output_bias": (500,), "cls/seq_relationship/output_weights": (2, 64),
              "cls/seq_relationship/output_bias": (2,)}
    assert {name: value.shape for name, value in heads.items()} == shapes
    assert all(value.dtype == np.float32 for value in heads.values())
    for name in shapes:
        np.testing.assert_array_equal(heads[name], again[name])
        assert not np.array_equal(heads[name], other[name])
    noise = heads["cls/predictions/transform/dense/kernel"] - np.eye(64)
    assert abs(noise.mean()) < 0.002 and 0.018 < noise.std() < 0.022
    gamma = heads["cls/predictions/transform/LayerNorm/gamma"]
    assert abs(gamma.mean() - 1) < 0.05 and 0.07 < gamma.std() < 0.13
    assert 0.09 < heads["cls/predictions/output_bias"].std() < 0.11


def test_convert_adds_seeded_pretraining_heads_to_a_model_without_them(tiny_config, tiny_batch, tmp_path):
    config = _exact_gelu(tiny_config)
    weights = numpy_bert.random_weights(config, seed=9)  # the encoder only, as MiniLM is published
    source = _hf_model_dir(tmp_path / "hf", config, weights)
    out = checkpoints.convert_hf_to_original(source, str(tmp_path / "release"), pretraining_heads_seed=5)
    reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
    expected = {**weights, **checkpoints.seeded_pretraining_heads(config.hidden_size, config.vocab_size, 5)}
    assert set(reader.get_variable_to_shape_map()) == set(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    model = BertPretrainer(config)
    report = checkpoints.restore(model, out, required_heads=("masked_lm", "next_sentence"))
    assert report.missing == [] and report.heads == ["masked_lm", "next_sentence"]
    positions = np.array([[1, 2], [0, 5], [2, 1]], np.int32)
    ref = numpy_bert.forward(expected, config, **tiny_batch)["sequence_output"]
    np.testing.assert_allclose(model({**tiny_batch, "masked_lm_positions": positions})["masked_lm_logits"],
                               numpy_bert.masked_lm_logits(expected, config, ref, positions), atol=1e-4)


def test_convert_keeps_the_heads_a_model_has_and_seeds_the_others(tiny_config, tmp_path):
    config = _exact_gelu(tiny_config)
    weights = {name: value for name, value in numpy_bert.random_weights(config, seed=4, heads=True).items()
               if name.startswith(("bert/", "cls/predictions/"))}  # the masked-LM head only
    out = checkpoints.convert_hf_to_original(_hf_model_dir(tmp_path / "hf", config, weights),
                                             str(tmp_path / "release"), pretraining_heads_seed=5)
    reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
    seeded = checkpoints.seeded_pretraining_heads(config.hidden_size, config.vocab_size, 5)
    for name, value in weights.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    for name in ("cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"):
        np.testing.assert_array_equal(reader.get_tensor(name), seeded[name])


def test_convert_with_heads_still_needs_the_whole_encoder(tiny_config, tmp_path):
    config = _exact_gelu(tiny_config)
    weights = numpy_bert.random_weights(config, seed=4)
    del weights["bert/encoder/layer_1/output/dense/bias"]
    source = _hf_model_dir(tmp_path / "hf", config, weights)
    with pytest.raises(ValueError, match=r"lacks 1 encoder variables .*layer_1/output/dense/bias"):
        checkpoints.convert_hf_to_original(source, str(tmp_path / "release"), pretraining_heads_seed=5)


def test_convert_script_writes_the_pretraining_heads(tiny_config, tmp_path, run_main):
    config = _exact_gelu(tiny_config)
    source = _hf_model_dir(tmp_path / "hf", config, numpy_bert.random_weights(config, seed=3))
    out = str(tmp_path / "release")
    assert run_main("run_scripts/convert_checkpoint.py", [f"--hf_model_dir={source}", f"--output_dir={out}",
                                                          "--pretraining_heads", "--pretraining_heads_seed=7"],
                    [f"--hf_model_dir={source}", f"--output_dir={out}_plain"]) == [None, None]
    seeded = checkpoints.seeded_pretraining_heads(config.hidden_size, config.vocab_size, 7)
    reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
    for name, value in seeded.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    plain = tf.train.load_checkpoint(os.path.join(f"{out}_plain", "bert_model.ckpt"))
    assert not [name for name in plain.get_variable_to_shape_map() if name.startswith("cls/")]


def test_hugging_face_config_errors():
    with pytest.raises(ValueError, match="unsupported hidden_act 'silu'"):
        checkpoints.bert_config_from_hf({"vocab_size": 10, "hidden_act": "silu"})
    with pytest.raises(ValueError, match="layer_norm_eps=1e-05"):
        checkpoints.bert_config_from_hf({"vocab_size": 10, "layer_norm_eps": 1e-5})


def test_export_original_writes_a_release_directory(tiny_config, tmp_path, uncased_vocab_file):
    model = encoder.BertModel(tiny_config)
    out = checkpoints.export_original(model, str(tmp_path / "release"), vocab_file=uncased_vocab_file)
    assert sorted(os.listdir(out)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "checkpoint", "vocab.txt"]
    assert BertConfig.from_json_file(os.path.join(out, "bert_config.json")) == tiny_config
    again = encoder.BertModel(tiny_config)
    checkpoints.restore(again, out, strict=True)
    for a, b in zip(model.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("to", ["original", "model_garden"])
def test_a_conversion_keeps_the_vocabulary_beside_the_checkpoint(tiny_config, tmp_path, uncased_vocab_file, to):
    """A release converted without vocab_file keeps its vocab.txt, as the Hugging Face and KerasHub outputs do."""
    release = checkpoints.export_original(encoder.BertModel(tiny_config), str(tmp_path / "release"),
                                          vocab_file=uncased_vocab_file)
    out = checkpoints.convert_checkpoint(release, str(tmp_path / to), to=to)
    assert fileio.read_text(os.path.join(out, "vocab.txt")) == fileio.read_text(uncased_vocab_file)

# --- restore: one path for original checkpoints and ours ------------------------------------------------------

TASK_MODELS = {  # name -> (build the task model on the tiny config, its heads)
    "classifier": (lambda c: BertClassifier(c, 3), ("classifier",)),
    "span": (BertSpanLabeler, ("span",)),
    "tagger": (lambda c: BertTokenClassifier(c, 5), ("tagger",)),
    "choice": (lambda c: BertMultipleChoice(c, num_choices=2), ("choice",)),
    "pretraining": (BertPretrainer, ("masked_lm", "next_sentence")),
}


def _config(**changes):
    """The tiny config of conftest with one layer (the Trainer's first step traces faster), changed."""
    return BertConfig.from_dict({"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
                                 "intermediate_size": 37, "max_position_embeddings": 24, "type_vocab_size": 2,
                                 **changes})


@pytest.fixture(scope="module")
def trainer_checkpoints(tmp_path_factory):
    """Each task model trained one step by the Trainer: name -> the trainer (its output_dir holds ckpt-1)."""
    return {name: tiny_training.train_one_step(lambda b=build: b(_config()), tmp_path_factory.mktemp(name))
            for name, (build, _) in TASK_MODELS.items()}


def _values(model):
    return {name: v.numpy() for name, v in checkpoints.original_variable_map(model).items()}


@pytest.mark.parametrize("name", sorted(TASK_MODELS))
def test_trainer_checkpoints_restore_every_head(trainer_checkpoints, name):
    """The Trainer keys most variables under optimizer/_trainable_variables/N (no key names the head); restore
    finds every head through the object graph, from the output_dir as from the ckpt-1 prefix."""
    build, heads = TASK_MODELS[name]
    trained = _values(trainer_checkpoints[name].model)
    for path in (trainer_checkpoints[name].output_dir, os.path.join(trainer_checkpoints[name].output_dir, "ckpt-1")):
        model = build(_config())
        assert any(not np.array_equal(v, trained[n]) for n, v in _values(model).items())
        report = checkpoints.restore(model, path, required_heads=heads)
        assert (report.heads, report.missing_heads, report.missing, report.unused) == (list(heads), [], [], [])
        assert report.checkpoint.endswith("ckpt-1") and sorted(report.loaded) == sorted(trained)
        for n, v in _values(model).items():
            np.testing.assert_array_equal(v, trained[n], err_msg=n)


def test_a_head_the_checkpoint_lacks_is_reported_or_refused(trainer_checkpoints):
    span_dir = trainer_checkpoints["span"].output_dir
    classifier = BertClassifier(_config(), 3)
    report = checkpoints.restore(classifier, span_dir)
    assert (report.heads, report.missing_heads) == ([], ["classifier"])
    assert report.missing == ["output_weights", "output_bias"]
    assert report.unused == ["span/projection/output_bias", "span/projection/output_weights"]
    np.testing.assert_array_equal(classifier.bert.get_embedding_table().numpy(),
                                  trainer_checkpoints["span"].model.bert.get_embedding_table().numpy())
    with pytest.raises(ValueError, match="has no trained classifier head \\(e.g. variable 'output_weights'\\)"):
        checkpoints.restore(classifier, span_dir, required_heads=("classifier",))
    with pytest.raises(ValueError, match="BertClassifier has no span head"):
        checkpoints.restore(classifier, span_dir, required_heads=("span",))


def test_an_encoder_that_does_not_fit_is_an_error(tmp_path):
    """A 1-layer config with a 3-layer checkpoint (and the reverse), original and ours: an error naming the layers."""
    deep, shallow = _config(num_hidden_layers=3), _config()
    original = numpy_bert.write_tf1_checkpoint(numpy_bert.random_weights(deep, seed=3), str(tmp_path / "o" / "ckpt"))
    ours = tf.train.Checkpoint(bert=encoder.BertModel(deep)).save(str(tmp_path / "ours" / "ckpt"))
    for prefix, unused in ((original, "bert/encoder/layer_1..2 \\(32 variables\\)"), (ours, "\\(32 variables\\)")):
        with pytest.raises(ValueError, match=f"does not fit the encoder of this bert_config.json \\(num_hidden_layers"
                                             f"=1, hidden_size=32\\): the checkpoint has .*{unused}, which the model"):
            checkpoints.restore(encoder.BertModel(shallow), prefix)
    small = numpy_bert.write_tf1_checkpoint(numpy_bert.random_weights(shallow, seed=3), str(tmp_path / "s" / "ckpt"))
    with pytest.raises(ValueError, match="it lacks bert/encoder/layer_1..2 \\(32 variables\\)"):
        checkpoints.restore(encoder.BertModel(deep), small)


def test_hidden_size_mismatch_is_named(original_checkpoint, tmp_path):
    prefix, _ = original_checkpoint
    ours = tf.train.Checkpoint(bert=encoder.BertModel(_config())).save(str(tmp_path / "ours" / "ckpt"))
    for path in (prefix, ours):
        with pytest.raises(ValueError, match="hidden_size mismatch: .* has bert/embeddings/word_embeddings with 32 "
                                             "columns but the model's config says hidden_size=48"):
            checkpoints.restore(encoder.BertModel(_config(hidden_size=48)), path)
    with pytest.raises(ValueError, match="Shape mismatch for output_weights \\(check `num_labels`\\)"):
        checkpoints.restore(TaskModel(_config(), num_labels=2), prefix)


def test_checkpoint_file_paths_are_accepted(tiny_config, original_checkpoint):
    prefix, weights = original_checkpoint
    for path in (prefix + ".index", prefix + ".data-00000-of-00001"):
        model = encoder.BertModel(tiny_config)
        assert checkpoints.restore(model, path).checkpoint == prefix
        np.testing.assert_array_equal(model.get_embedding_table().numpy(), weights["bert/embeddings/word_embeddings"])
    with pytest.raises(FileNotFoundError, match="expected a prefix with a 'nowhere.ckpt.index' file"):
        checkpoints.resolve_checkpoint(os.path.join(os.path.dirname(prefix), "nowhere.ckpt.index"))


def test_a_directory_loads_its_own_files(tmp_path, trainer_checkpoints):
    """A copied directory whose `checkpoint` file records an absolute path (as TF1's Saver writes it) loads the
    copy's weights, and the state files we write hold relative paths."""
    first, second = (encoder.BertModel(_config()) for _ in range(2))
    checkpoints.save_original_checkpoint(first, str(tmp_path / "first" / "bert_model.ckpt"))
    checkpoints.save_original_checkpoint(second, str(tmp_path / "copy" / "bert_model.ckpt"))
    trainer_state = os.path.join(trainer_checkpoints["span"].output_dir, "checkpoint")
    assert open(tmp_path / "first" / "checkpoint").read().startswith('model_checkpoint_path: "bert_model.ckpt"\n')
    assert open(trainer_state).read().startswith('model_checkpoint_path: "ckpt-1"\n')
    (tmp_path / "copy" / "checkpoint").write_text(f'model_checkpoint_path: "{tmp_path}/first/bert_model.ckpt"\n')
    model = encoder.BertModel(_config())
    assert checkpoints.restore(model, str(tmp_path / "copy")).checkpoint == str(tmp_path / "copy" / "bert_model.ckpt")
    np.testing.assert_array_equal(model.get_embedding_table().numpy(), second.get_embedding_table().numpy())
    (tmp_path / "copy" / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-7"\n')
    with pytest.raises(FileNotFoundError, match="names '.*model.ckpt-7', but .*copy holds no model.ckpt-7.index"):
        checkpoints.resolve_checkpoint(str(tmp_path / "copy"))


def test_an_object_checkpoint_without_an_encoder_is_rejected(tmp_path):
    prefix = tf.train.Checkpoint(model=encoder.BertModel(_config())).save(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError, match="without a `bert` object \\(it holds \\['model', 'save_counter'\\]\\)"):
        checkpoints.restore(encoder.BertModel(_config()), prefix)
