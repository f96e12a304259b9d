"""Model Garden TF2 checkpoints and TF Hub BERT SavedModels in, Model Garden checkpoints out.

The Model Garden files are made by Model Garden itself (tests/tiny_model_garden.py: tf-models-official's TF1 -> TF2
converter and TF Hub exporter; its BertEncoder / BertPretrainerV2 under tf_keras); those tests skip with a reason
where it is absent.
"""
import json
import os

import numpy as np
import numpy_bert
import pytest
import tensorflow as tf
from tiny_model_garden import model_garden_files as make_model_garden_files
from tiny_model_garden import require_official

from bert_tf import checkpoints
from bert_tf.model import encoder, task_models
from bert_tf.model.config import BertConfig

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=24, type_vocab_size=2)


def _batch(config, seed=5):
    """input_ids, input_mask, segment_ids [3, 9] with padding; masked_lm_positions [3, 2]."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, config.vocab_size, size=(3, 9)).astype(np.int32)
    mask = np.ones((3, 9), np.int32)
    mask[1, 6:], mask[2, 3:] = 0, 0
    segments = np.zeros((3, 9), np.int32)
    segments[0, 5:] = 1
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments,
            "masked_lm_positions": np.array([[1, 4], [0, 5], [2, 1]], np.int32)}


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    """An original checkpoint of the TINY config with pretraining heads, its weights, config and vocab."""
    directory = str(tmp_path_factory.mktemp("tiny_release"))
    config = BertConfig(**TINY)
    weights = numpy_bert.random_weights(config, seed=7, heads=True)
    weights = {k: v for k, v in weights.items() if k.startswith(("bert/", "cls/predictions", "cls/seq_"))}
    prefix = numpy_bert.write_tf1_checkpoint(weights, os.path.join(directory, "bert_model.ckpt"))
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    vocab = os.path.join(directory, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("".join(f"[unused{i}]\n" for i in range(config.vocab_size)))
    return {"dir": directory, "prefix": prefix, "weights": weights, "config": config, "vocab": vocab}


@pytest.fixture(scope="module")
def model_garden_files(tiny_release, tmp_path_factory):
    """(encoder checkpoint, pretrainer checkpoint, TF Hub SavedModel) that Model Garden made from tiny_release."""
    return make_model_garden_files(str(tmp_path_factory.mktemp("mg")), tiny_release["prefix"], tiny_release["config"],
                               tiny_release["vocab"])


def _reference(tiny_release):
    weights, config = tiny_release["weights"], tiny_release["config"]
    batch = _batch(config)
    ref = numpy_bert.forward(weights, config, batch["input_ids"], batch["input_mask"], batch["segment_ids"])
    ref["masked_lm_logits"] = numpy_bert.masked_lm_logits(weights, config, ref["sequence_output"],
                                                          batch["masked_lm_positions"])
    return batch, ref


def test_model_garden_encoder_checkpoint_loads(tiny_release, model_garden_files):
    model = encoder.BertModel(tiny_release["config"])
    report = checkpoints.restore(model, model_garden_files[0])
    assert report.missing == [] and report.unused == []
    batch, ref = _reference(tiny_release)
    outputs = model({k: v for k, v in batch.items() if k != "masked_lm_positions"})
    from_original = encoder.BertModel(tiny_release["config"])
    checkpoints.restore(from_original, tiny_release["prefix"])
    expected = from_original({k: v for k, v in batch.items() if k != "masked_lm_positions"})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[key], expected[key], atol=1e-5)
        np.testing.assert_allclose(outputs[key], ref[key], atol=2e-5)


def test_model_garden_pretrainer_checkpoint_and_hub_model_load_the_masked_lm(tiny_release, model_garden_files):
    batch, ref = _reference(tiny_release)
    for source in model_garden_files[1:]:
        model = task_models.BertPretrainer(tiny_release["config"])
        report = checkpoints.restore(model, source)
        # Model Garden's converter drops the next-sentence head (its BertPretrainerV2 has none).
        assert report.missing == ["cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"], source
        assert report.unused == [] and report.missing_heads == ["next_sentence"]
        outputs = model(batch)
        for key in ("sequence_output", "pooled_output", "masked_lm_logits"):
            np.testing.assert_allclose(outputs[key], ref[key], atol=5e-5, err_msg=f"{source}: {key}")


def test_hub_model_files_vocab_casing_and_inferred_config(tiny_release, model_garden_files, caplog):
    hub_dir = model_garden_files[2]
    caplog.set_level("INFO", logger="absl")
    files = checkpoints.model_files(hub_dir)
    assert files.config.to_dict() == tiny_release["config"].to_dict()  # gelu: the tanh form, no Erf in the graph
    assert "inferred vocab_size=99, hidden_size=32, num_hidden_layers=2" in caplog.text
    with open(files.vocab_file) as f, open(tiny_release["vocab"]) as g:
        assert f.read() == g.read()
    assert files.do_lower_case is True


def test_pretrainer_v2_heads_land_in_the_pretraining_heads(tmp_path):
    """A BertPretrainerV2 with the next-sentence classification head, checkpointed as Model Garden's trainer does:
    bert-tf's masked-LM and next-sentence logits equal Model Garden's."""
    require_official()
    import tf_keras
    from official.modeling import tf_utils
    from official.nlp.modeling import layers, models, networks

    config = BertConfig(**TINY)
    tf_keras.utils.set_random_seed(3)
    mg_encoder = networks.BertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        activation=tf_utils.get_activation("gelu"), max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dict_outputs=True)
    pretrainer = models.BertPretrainerV2(
        encoder_network=mg_encoder, mlm_activation=tf_utils.get_activation("gelu"),
        classification_heads=[layers.ClassificationHead(inner_dim=config.hidden_size, num_classes=2,
                                                        name="next_sentence")])
    batch = _batch(config)
    mg_inputs = {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                 "input_type_ids": batch["segment_ids"], "masked_lm_positions": batch["masked_lm_positions"]}
    for variable in pretrainer.trainable_variables:  # LayerNorm and biases away from their 1 / 0 initial values
        variable.assign(variable + tf.random.normal(variable.shape, stddev=0.1, seed=1))
    expected = pretrainer(mg_inputs, training=False)
    prefix = tf.train.Checkpoint(model=pretrainer, **pretrainer.checkpoint_items).save(str(tmp_path / "ckpt"))

    model = task_models.BertPretrainer(config)
    report = checkpoints.restore(model, prefix)
    assert report.missing == [] and report.heads == ["masked_lm", "next_sentence"]
    # The encoder's own pooler (_pooler_layer), which Model Garden's pretraining leaves untrained, is the one unused
    # pair, under its checkpoint key's path.
    assert report.unused == ["model_garden:encoder/layer_with_weights-6/bias",
                             "model_garden:encoder/layer_with_weights-6/kernel"]
    outputs = model(batch)
    np.testing.assert_allclose(outputs["masked_lm_logits"], expected["mlm_logits"], atol=1e-5)
    np.testing.assert_allclose(outputs["next_sentence_logits"], expected["next_sentence"], atol=1e-5)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=1e-5)


def test_model_garden_bert_encoder_v2_checkpoint_loads(tmp_path):
    """Model Garden's Keras-layer encoder (BertEncoderV2, its `encoder.type: bert_v2`): bert-tf's outputs from its
    checkpoint equal Model Garden's own."""
    require_official()
    from official.modeling import tf_utils
    from official.nlp.modeling import networks

    config = BertConfig(**TINY)
    mg_encoder = networks.BertEncoderV2(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, inner_dim=config.intermediate_size,
        inner_activation=tf_utils.get_activation("gelu"), max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size)
    batch = {k: v for k, v in _batch(config).items() if k != "masked_lm_positions"}
    mg_encoder({"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                "input_type_ids": batch["segment_ids"]})
    for variable in mg_encoder.trainable_variables:
        variable.assign(variable + tf.random.normal(variable.shape, stddev=0.1, seed=2))
    expected = mg_encoder({"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                           "input_type_ids": batch["segment_ids"]}, training=False)
    prefix = tf.train.Checkpoint(encoder=mg_encoder).write(str(tmp_path / "v2"))
    model = encoder.BertModel(config)
    report = checkpoints.restore(model, prefix)
    assert report.missing == [] and report.unused == []
    outputs = model(batch)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[key], expected[key], atol=1e-5)


def _model_garden_encoder(config):
    from official.modeling import tf_utils
    from official.nlp.modeling import networks

    return networks.BertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        activation=tf_utils.get_activation(config.hidden_act), max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dict_outputs=True)


def _keys(prefix):
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return {key: shape for key, shape in shapes.items() if key != "save_counter/.ATTRIBUTES/VARIABLE_VALUE"}


def test_to_model_garden_restores_into_model_garden_bert_encoder(tiny_release, model_garden_files, tmp_path):
    require_official()
    out = checkpoints.convert_checkpoint(tiny_release["dir"], str(tmp_path / "mg"), to="model_garden")
    prefix = os.path.join(out, "bert_model.ckpt")
    # Model Garden's converter's layout, key for key: with the masked LM as its BertPretrainerV2 conversion writes
    # it; without, as its encoder conversion.
    assert _keys(prefix) == _keys(model_garden_files[1])
    encoder_only = checkpoints.convert_checkpoint(model_garden_files[0], str(tmp_path / "mg_encoder"),
                                                  to="model_garden", bert_config_file=f"{out}/bert_config.json")
    assert _keys(os.path.join(encoder_only, "bert_model.ckpt")) == _keys(model_garden_files[0])
    config = tiny_release["config"]
    mg_encoder = _model_garden_encoder(config)
    tf.train.Checkpoint(encoder=mg_encoder).read(prefix).assert_existing_objects_matched()
    batch = _batch(config)
    mg = mg_encoder([batch["input_ids"], batch["input_mask"], batch["segment_ids"]], training=False)
    model = encoder.BertModel(config)
    checkpoints.restore(model, tiny_release["prefix"])
    expected = model({k: v for k, v in batch.items() if k != "masked_lm_positions"})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(mg[key], expected[key], atol=1e-5)
    with open(os.path.join(out, "bert_config.json")) as f:
        assert json.load(f) == config.to_dict()


def test_hub_model_converts_to_an_original_release(tiny_release, model_garden_files, tmp_path, run_main):
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "run_scripts",
                          "convert_checkpoint.py")
    out = str(tmp_path / "from_hub")
    errors = run_main(script, [f"--init_checkpoint={model_garden_files[2]}", f"--output_dir={out}"],
                      [f"--init_checkpoint={out}", "--hf_model_dir=/hf", f"--output_dir={tmp_path}/x"],
                      ["--to=model_garden", f"--output_dir={tmp_path}/y"])
    assert errors == [None, "ValueError: Give --init_checkpoint or --hf_model_dir, not both.",
                      "ValueError: --to=model_garden needs --init_checkpoint: convert a Hugging Face model to the "
                      "original format first, then pass that directory as --init_checkpoint."]
    reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
    weights = {k: v for k, v in tiny_release["weights"].items() if not k.startswith("cls/seq_relationship")}
    assert sorted(reader.get_variable_to_shape_map()) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
    assert BertConfig.from_json_file(os.path.join(out, "bert_config.json")) == tiny_release["config"]
    with open(os.path.join(out, "vocab.txt")) as f, open(tiny_release["vocab"]) as g:
        assert f.read() == g.read()


# --- bad input --------------------------------------------------------------------------------------------------

def test_a_directory_that_is_neither_checkpoint_nor_saved_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    model = encoder.BertModel(BertConfig(**TINY))
    with pytest.raises(FileNotFoundError, match=r"is a directory that is neither a checkpoint nor a SavedModel.*"
                                                r"notes\.txt"):
        checkpoints.restore(model, str(tmp_path))


def test_a_saved_model_that_is_not_a_bert_encoder(tmp_path):
    module = tf.Module()
    module.scale = tf.Variable(2.0, name="scale")
    module.__call__ = tf.function(lambda x: x * module.scale, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "sm"))
    model = encoder.BertModel(BertConfig(**TINY))
    with pytest.raises(ValueError, match=r"sm is a SavedModel but not a TF Hub BERT encoder.*signatures are "
                                         r"\['serving_default'\] and its variables \['scale'\]"):
        checkpoints.restore(model, str(tmp_path / "sm"))


def test_a_tf1_saved_model_names_its_checkpoint(tmp_path):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        weight = tf.compat.v1.get_variable("bert/embeddings/word_embeddings", initializer=[1.0])
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.saved_model.simple_save(session, str(tmp_path / "module"), {"x": x}, {"y": x * weight})
    model = encoder.BertModel(BertConfig(**TINY))
    with pytest.raises(ValueError, match=r"module is a TF1 SavedModel \(e\.g\. a hub\.Module\).*pass its checkpoint "
                                         r".*module/variables/variables as init_checkpoint"):
        checkpoints.restore(model, str(tmp_path / "module"))


def test_hub_vocab_size_and_casing_conflicts(tiny_release, model_garden_files, tmp_path):
    hub_dir = model_garden_files[2]
    short_vocab = tmp_path / "vocab.txt"
    short_vocab.write_text("".join(f"w{i}\n" for i in range(50)))
    with pytest.raises(ValueError, match=rf"{short_vocab} has 50 tokens but {hub_dir} has 99 word embeddings"):
        checkpoints.model_files(hub_dir, vocab_file=str(short_vocab))
    with pytest.raises(ValueError, match=r"do_lower_case=False contradicts .*hub, whose do_lower_case variable "
                                         r"says True"):
        checkpoints.model_files(hub_dir, do_lower_case=False)
    assert checkpoints.model_files(hub_dir, do_lower_case=True, vocab_file=tiny_release["vocab"]).vocab_file == \
        tiny_release["vocab"]


def test_model_garden_encoder_of_another_depth_is_refused(tiny_release, model_garden_files):
    model = encoder.BertModel(BertConfig(**{**TINY, "num_hidden_layers": 3}))
    with pytest.raises(ValueError, match=r"does not fit the encoder of this bert_config.json \(num_hidden_layers=3"):
        checkpoints.restore(model, model_garden_files[0])


def test_an_exact_gelu_release_through_model_garden_and_tf_hub(tmp_path):
    """A release computing the exact (erf) GELU, as MiniLM and the Hugging Face BERTs do, with pretraining heads,
    through Model Garden's converter and TF Hub exporter: bert-tf loads both with nothing missing, its outputs equal
    those from the original checkpoint, the Hub model's inferred config says gelu_exact, and the Hub model itself
    computes what bert-tf computes. The random weights (std 0.3) put the activations where the tanh form differs by
    over 1e-4: the comparisons would see it."""
    require_official()
    import tf_keras

    config = BertConfig(**{**TINY, "hidden_act": "gelu_exact"})
    weights = numpy_bert.random_weights(config, seed=18, heads=True)
    release = str(tmp_path / "release")
    numpy_bert.write_tf1_checkpoint({k: v for k, v in weights.items()
                                     if k.startswith(("bert/", "cls/predictions", "cls/seq_"))},
                                    os.path.join(release, "bert_model.ckpt"))
    config.to_json_file(os.path.join(release, "bert_config.json"))
    with open(os.path.join(release, "vocab.txt"), "w") as f:
        f.write("".join(f"[unused{i}]\n" for i in range(config.vocab_size)))
    encoder_ckpt, _, hub_dir = make_model_garden_files(
        str(tmp_path / "mg"), os.path.join(release, "bert_model.ckpt"), config, os.path.join(release, "vocab.txt"),
        hidden_act=tf_keras.activations.gelu)  # exact erf (approximate=False); Model Garden's "gelu" is the tanh form
    files = checkpoints.model_files(hub_dir)
    assert files.config.to_dict() == config.to_dict() and files.config.hidden_act == "gelu_exact"
    batch = {k: v for k, v in _batch(config).items() if k != "masked_lm_positions"}
    expected = encoder.BertModel(config)
    checkpoints.restore(expected, release)
    expected = expected(batch)
    tanh = encoder.BertModel(BertConfig(**TINY))
    checkpoints.restore(tanh, release)
    assert np.abs(tanh(batch)["sequence_output"] - expected["sequence_output"]).max() > 1e-4
    masked_lm = sorted(name for name, _, _ in checkpoints.model_garden.MASKED_LM_PATHS)
    for source, unused in ((encoder_ckpt, []), (hub_dir, masked_lm)):  # the Hub model has its .mlm
        model = encoder.BertModel(config)
        report = checkpoints.restore(model, source)
        assert report.missing == [] and report.unused == unused, source
        outputs = model(batch)
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(outputs[key], expected[key], atol=1e-5, err_msg=f"{source}: {key}")
    hub = tf.saved_model.load(hub_dir)(
        {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
         "input_type_ids": batch["segment_ids"]}, training=False)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(hub[key], expected[key], atol=1e-5, err_msg=key)
