import keras
import numpy as np
import numpy_bert
import pytest
import task_inputs

from bert_tf import checkpoints
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.model.heads import ClassifierHead, SpanHead
from bert_tf.model.task_models import (
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)


def _pretrainer(config, weights):
    model = BertPretrainer(config)
    batch = {"input_ids": np.zeros((1, 2), np.int32), "input_mask": np.ones((1, 2), np.int32),
             "segment_ids": np.zeros((1, 2), np.int32), "masked_lm_positions": np.zeros((1, 1), np.int32)}
    model(batch)
    checkpoints.assign_by_name(model, {k: (lambda v=v: v) for k, v in weights.items()}, "random")
    return model


def test_pretraining_heads_match_numpy_reference(tiny_config, tiny_batch):
    weights = numpy_bert.random_weights(tiny_config, seed=1, heads=True)
    model = _pretrainer(tiny_config, weights)
    positions = np.array([[1, 2], [0, 5], [2, 1]], np.int32)
    outputs = model({**tiny_batch, "masked_lm_positions": positions})
    ref = numpy_bert.forward(weights, tiny_config, **tiny_batch)
    np.testing.assert_allclose(outputs["masked_lm_logits"],
                               numpy_bert.masked_lm_logits(weights, tiny_config, ref["sequence_output"], positions),
                               atol=1e-4)
    nsp = ref["pooled_output"] @ weights["cls/seq_relationship/output_weights"].T + weights[
        "cls/seq_relationship/output_bias"]
    np.testing.assert_allclose(outputs["next_sentence_logits"], nsp, atol=1e-5)


def test_masked_lm_output_is_tied_to_word_embeddings(tiny_config):
    weights = numpy_bert.random_weights(tiny_config, seed=2, heads=True)
    model = _pretrainer(tiny_config, weights)
    names = [v.path for v in model.weights]
    assert sum("word_embeddings" in n for n in names) == 1
    assert model.masked_lm.embedding_layer is model.bert.embeddings


def test_pretrainer_keras_round_trip(tiny_config, tiny_batch, tmp_path):
    weights = numpy_bert.random_weights(tiny_config, seed=3, heads=True)
    model = _pretrainer(tiny_config, weights)
    batch = {**tiny_batch, "masked_lm_positions": np.array([[1], [2], [0]], np.int32)}
    model.save(str(tmp_path / "p.keras"))
    loaded = keras.models.load_model(str(tmp_path / "p.keras"))
    np.testing.assert_allclose(loaded(batch)["masked_lm_logits"], model(batch)["masked_lm_logits"], atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda config: BertClassifier(config, 3, dtype="mixed_float16"),
    lambda config: BertPretrainer(config, dtype="mixed_bfloat16"),
    BertSpanLabeler,
    lambda config: BertTokenClassifier(config, 5),
    lambda config: BertMultipleChoice(config, 2),
    task_models.BertSentenceEncoder,
])
def test_every_layer_rebuilds_from_its_config(tiny_config, make):
    """Each layer of a task model has a config (Keras' automatic one records only plain values: our layers get their
    dtype policy by name), its dtype policy included, and rebuilds from it; MaskedLMHead (given the embedding layer)
    has its own config, without that layer."""
    for layer in make(tiny_config)._flatten_layers(include_self=False):
        config = layer.get_config()
        if isinstance(layer, keras.layers.InputLayer):
            continue
        assert keras.dtype_policies.deserialize(config["dtype"]).name == layer.dtype_policy.name
        if type(layer).__name__ == "MaskedLMHead":
            assert set(config) == {"name", "trainable", "dtype", "hidden_act", "initializer_range"}
        else:
            assert type(layer).from_config(config).get_config() == config


def test_classifier_and_span_heads_use_the_original_layout(tiny_config):
    rng = np.random.RandomState(0)
    pooled = rng.normal(size=(4, tiny_config.hidden_size)).astype(np.float32)
    head = ClassifierHead(3)
    head(pooled)
    w, b = rng.normal(size=(3, tiny_config.hidden_size)), rng.normal(size=3)
    head.projection.output_weights.assign(w)
    head.projection.output_bias.assign(b)
    np.testing.assert_allclose(head(pooled), pooled @ w.T + b, atol=1e-5)
    assert head(pooled, training=True).shape == (4, 3)

    sequence = rng.normal(size=(2, 5, tiny_config.hidden_size)).astype(np.float32)
    span = SpanHead()
    span(sequence)
    w, b = rng.normal(size=(2, tiny_config.hidden_size)), rng.normal(size=2)
    span.projection.output_weights.assign(w)
    span.projection.output_bias.assign(b)
    start, end = span(sequence)
    np.testing.assert_allclose(start, sequence @ w[0] + b[0], atol=1e-5)
    np.testing.assert_allclose(end, sequence @ w[1] + b[1], atol=1e-5)
    assert ClassifierHead.from_config(head.get_config()).num_labels == 3


def _task_batch(tiny_batch, choices=None):
    if choices is None:
        return tiny_batch
    return {k: np.stack([np.roll(v, i, axis=1) for i in range(choices)], axis=1) for k, v in tiny_batch.items()}


@pytest.mark.parametrize("build, head_names, outputs", [
    (lambda c: BertClassifier(c, 3), {"output_weights", "output_bias"}, {"logits": (3, 3), "probabilities": (3, 3)}),
    (lambda c: BertClassifier(c, 1, regression=True), {"output_weights", "output_bias"},
     {"logits": (3, 1), "predictions": (3,)}),
    (lambda c: BertSpanLabeler(c), {"cls/squad/output_weights", "cls/squad/output_bias"},
     {"start_logits": (3, 9), "end_logits": (3, 9)}),
    (lambda c: BertTokenClassifier(c, 5), {"cls/ner/output_weights", "cls/ner/output_bias"},
     {"logits": (3, 9, 5), "probabilities": (3, 9, 5)}),
])
def test_task_models(tiny_config, tiny_batch, tmp_path, build, head_names, outputs):
    model = build(tiny_config)
    result = model(tiny_batch)
    assert {k: tuple(v.shape) for k, v in result.items()} == outputs
    names = set(checkpoints.original_variable_map(model))
    assert {n for n in names if not n.startswith("bert/")} == head_names
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.models.load_model(str(tmp_path / "m.keras"))
    for key in outputs:
        np.testing.assert_allclose(loaded(tiny_batch)[key], result[key], atol=1e-6)


def test_multiple_choice_scores_each_choice_from_its_cls_vector(tiny_config, tiny_batch, tmp_path):
    model = BertMultipleChoice(tiny_config, num_choices=3)
    batch = _task_batch(tiny_batch, choices=3)
    logits = model(batch)["logits"].numpy()
    assert logits.shape == (3, 3)
    head = model.choice.projection
    for c in range(3):
        pooled = model.bert({k: v[:, c] for k, v in batch.items()})["pooled_output"].numpy()
        expected = pooled @ head.output_weights.numpy().T + head.output_bias.numpy()
        np.testing.assert_allclose(logits[:, c], expected[:, 0], atol=1e-5)
    assert "cls/swag/output_weights" in checkpoints.original_variable_map(model)
    model.save(str(tmp_path / "mc.keras"))
    np.testing.assert_allclose(keras.models.load_model(str(tmp_path / "mc.keras"))(batch)["logits"], logits,
                               atol=1e-6)


def test_regression_needs_one_output(tiny_config):
    """Refused before anything is built."""
    with pytest.raises(ValueError, match="regression task has one output"):
        BertClassifier(tiny_config, 2, regression=True)


def test_the_registry_says_what_each_task_model_is(tiny_config):
    """task_models.REGISTRY (read by the export, the tasks and the checkpoints): each spec builds its model (which
    it describes), which holds all its variables once constructed (no call needed: every one has an original name,
    and a call creates none) and exactly its spec's heads under their original names (as checkpoints.model_parts
    finds them); its sequence outputs are those with the text's length on their second axis."""
    rng = np.random.RandomState(0)
    sequence = {"encoder": ("sequence_output",), "squad": ("start_logits", "end_logits"),
                "ner": ("logits", "probabilities"), "pretraining": ("sequence_output",),
                "masked_lm": ("sequence_output",)}
    for task, spec in task_models.REGISTRY.items():
        model = task_models.build_task_model(task, tiny_config, num_labels=3 if spec.labelled else None)
        assert spec.describes(model) and spec.name == task, task
        assert [other for other in task_models.REGISTRY.values() if other.describes(model)] == [spec], task
        constructed = [weight.path for weight in model.weights]
        names = checkpoints.original_variable_map(model)
        assert len(names) == len(constructed) > 0, task
        assert sorted(checkpoints.model_parts(model)) == sorted(("bert",) + spec.head_names), task
        assert {n for n in names if not n.startswith("bert/")} == {
            n for h in spec.head_names for n, _ in task_models.BUILT_IN_HEADS[h]}, task
        features = {name: rng.randint(0, 2, (2, 5)).astype(np.int32) for name in ("input_ids", "input_mask",
                                                                                  "segment_ids")}
        outputs = model(task_inputs.for_model(model, features, positions=np.zeros((2, 3), np.int32)))
        assert set(task_models.output_names(model)) <= set(outputs), task
        assert task_models.sequence_outputs(model) == sequence.get(task, ()), task
        assert all(outputs[name].shape[1] == 5 for name in task_models.sequence_outputs(model)), task
        assert task_models.takes_text(model) == (task not in ("swag", "pretraining", "masked_lm")), task
        assert [weight.path for weight in model.weights] == constructed, task
    with pytest.raises(ValueError, match="The ner task needs num_labels >= 1"):
        task_models.build_task_model("ner", tiny_config)


class BertPosTagger(task_models.TaskModel):
    """A task model of a module of its own (README, "Add a task"): a `.pos` head on every token."""
    task_kwargs = ("num_labels",)
    heads = {"pos": (("cls/pos/output_weights", "projection.output_weights"),
                     ("cls/pos/output_bias", "projection.output_bias"))}

    def __init__(self, config, num_labels, **kwargs):
        bert, policy, inputs = self.init_task(config, kwargs)
        self.pos = ClassifierHead(num_labels, name="pos", dtype=policy)
        super().__init__(inputs, {"logits": self.pos(bert(inputs)["sequence_output"])}, policy, **kwargs)
        self.num_labels = num_labels


class Unnamed(BertPosTagger):
    """A head whose variables have no original names."""
    heads = {}


def test_a_task_of_its_own_module_registers_its_spec(tiny_config, monkeypatch):
    """A spec registered outside task_models: its task builds through it, and the checkpoints map its head by the
    original-style names its model class gives; a second task of the same name is refused, and a model with a
    variable outside its encoder and its heads (which a checkpoint would leave random) when it is built."""
    monkeypatch.setattr(task_models, "REGISTRY", dict(task_models.REGISTRY))
    spec = task_models.register(task_models.TaskSpec("pos", BertPosTagger, label_output="predicted_labels"))
    one_layer = BertConfig.from_dict({**tiny_config.to_dict(), "num_hidden_layers": 1})
    model = task_models.build_task_model("pos", one_layer, num_labels=4)
    assert spec.describes(model) and spec.head_names == ("pos",) and task_models.sequence_outputs(model) == ("logits",)
    assert sorted(checkpoints.model_parts(model)) == ["bert", "pos"]
    names = checkpoints.original_variable_map(model)
    assert names["cls/pos/output_weights"] is model.pos.projection.output_weights
    assert [n for n in names if not n.startswith("bert/")] == ["cls/pos/output_weights", "cls/pos/output_bias"]
    with pytest.raises(ValueError, match="A task named 'pos' is registered already"):
        task_models.register(task_models.TaskSpec("pos", BertPosTagger))
    with pytest.raises(ValueError, match=r"Unnamed has variables outside its encoder and its heads \(\)"):
        Unnamed(one_layer, 2)
