"""--class_weights (the class-weighted loss of run_classifier.py and run_ner.py) and eval_metrics.json (per-class
figures of every classification evaluation)."""
import functools
import json
import os
import random
import types

import numpy as np
import pytest
import tensorflow as tf
from seqeval.metrics import classification_report
from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support
from sklearn.utils.class_weight import compute_class_weight
from tiny_classifier import random_sentence, tsv_line, write_lines, write_tiny_model

from bert_tf.model.config import BertConfig
from bert_tf.tasks import ner, runner
from bert_tf.tasks.classifier import ClassifierTask, classification_loss
from bert_tf.tasks.classifier.metrics import label_metrics
from bert_tf.tasks.classifier.task import ClassWeightedLoss, class_weights, parse_class_weights
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.training import losses, prediction

# --- the weights -----------------------------------------------------------------------------------------------


def test_balanced_weights_are_scikit_learns_and_a_list_is_kept():
    train = ["neg"] * 6 + ["pos"] * 2 + ["meh"] * 1
    weights = class_weights("balanced", ["meh", "neg", "pos", "none"], train)
    assert weights == pytest.approx([9 / (3 * 1), 9 / (3 * 6), 9 / (3 * 2), 0.0])  # n / (n_classes * count)
    expected = compute_class_weight("balanced", classes=np.array(["meh", "neg", "pos"]), y=np.array(train))
    np.testing.assert_allclose(weights[:3], expected)
    assert class_weights("1,2.5,0.5", ["a", "b", "c"], []) == [1.0, 2.5, 0.5]
    assert parse_class_weights("") is None and parse_class_weights("balanced") == "balanced"


@pytest.mark.parametrize("text, message", [
    ("1,x", "--class_weights=1,x: expected 'balanced' or a comma list of positive numbers"),
    ("1,0", "--class_weights=1,0: 0.0 is not a positive number"),
    ("1,-2", "-2.0 is not a positive number"),
    ("nan,1", "nan is not a positive number"),
    ("Balanced", "expected 'balanced'"),
])
def test_bad_class_weights_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_class_weights(text)


def test_bad_class_weights_are_refused_before_any_work(tmp_path):
    """A count that is not the labels' and weights for a regression task: errors before anything is written."""
    vocab_file, config_file = write_tiny_model(tmp_path)
    files = dict(vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=16, do_train=True)
    data, out = tmp_path / "data", tmp_path / "out"
    write_lines(str(data / "train.txt"), ["the O", "cat B-X", "", "a B-X", "dog I-X"])
    with pytest.raises(ValueError, match=r"--class_weights=1,2: 2 weights for 3 labels \(B-X, I-X, O\); give one per "
                                         r"label, in this order\."):
        runner.run(ner.NerTask(str(data)), runner.RunConfig(output_dir=str(out), class_weights="1,2", **files))
    assert os.listdir(out) == []
    with pytest.raises(ValueError, match="--class_weights applies to classification; StsbProcessor is a regression"):
        runner.run(ClassifierTask("sts-b", str(data)), runner.RunConfig(output_dir=str(out), class_weights="1",
                                                                         **files))


# --- the loss --------------------------------------------------------------------------------------------------

def _share(loss, labels, outputs):
    """The update's loss of one batch, as the Trainer computes it (bert_tf.training.losses)."""
    totals = losses.sums(loss, loss.weights(labels))
    return float(losses.shares(loss, labels, outputs, totals)["loss"])


def _cross_entropy(logits, ids):
    log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probabilities, ids[..., None], -1)[..., 0]


def test_the_weighted_loss_is_sum_of_weighted_losses_over_sum_of_weights():
    rng = np.random.RandomState(0)
    weights = np.array([1.0, 3.0, 0.5], np.float32)
    # The classifier: one label per example.
    ids, logits = np.array([0, 1, 1, 2, 0]), rng.randn(5, 3).astype(np.float32)
    labels, outputs = {"label_ids": ids}, {"logits": logits}
    loss = ClassWeightedLoss(classification_loss, weights)
    w, per_example = weights[ids], _cross_entropy(logits.astype(np.float64), ids)
    assert _share(loss, labels, outputs) == pytest.approx((w * per_example).sum() / w.sum(), rel=1e-6)
    np.testing.assert_allclose(loss(labels, outputs), per_example, rtol=1e-6)  # called: the unweighted loss
    # NER: labelled positions only (-1: padding, a word's other sub-tokens); each example's positions share its
    # weight, so that equal weights give the original loss, the mean of the examples' means.
    ids = np.array([[-1, 0, 2, -1, 1], [-1, 2, 2, 2, -1], [-1, 1, -1, -1, -1]])
    logits = rng.randn(3, 5, 3).astype(np.float32)
    labels, outputs = {"label_ids": ids}, {"logits": logits}
    labelled = ids >= 0
    token_weights = np.where(labelled, weights[np.maximum(ids, 0)], 0) / labelled.sum(1, keepdims=True)
    token_losses = _cross_entropy(logits.astype(np.float64), np.maximum(ids, 0))
    expected = (token_weights * token_losses).sum() / token_weights.sum()
    assert _share(ClassWeightedLoss(ner.masked_loss, weights), labels, outputs) == pytest.approx(expected, rel=1e-6)
    original = _share(losses.as_batch_loss(ner.masked_loss), labels, outputs)
    assert original != pytest.approx(expected, rel=1e-3)
    assert _share(ClassWeightedLoss(ner.masked_loss, [2.0] * 3), labels, outputs) == pytest.approx(original, rel=1e-6)


def test_micro_batches_and_replicas_add_up_to_the_whole_batch():
    """The Trainer's split of an update (replicas, accumulated micro-batches): each part's share given the whole
    update's weight totals; the shares add up to the whole batch's weighted loss."""
    rng = np.random.RandomState(1)
    ids = np.array([0, 1, 1, 2, 0, 2, 2, 1])
    labels, outputs = {"label_ids": ids}, {"logits": rng.randn(8, 3).astype(np.float32)}
    loss = ClassWeightedLoss(classification_loss, [1.0, 3.0, 0.5])
    totals = losses.sums(loss, loss.weights(labels))
    parts = [losses.shares(loss, {"label_ids": ids[k:k + 2]}, {"logits": outputs["logits"][k:k + 2]}, totals)
             for k in range(0, 8, 2)]
    assert float(sum(part["loss"] for part in parts)) == pytest.approx(_share(loss, labels, outputs), rel=1e-6)


# --- eval_metrics.json -----------------------------------------------------------------------------------------

def test_label_metrics_by_hand_and_against_scikit_learn():
    """True 0 0 1 2 2 (and a padding example), predicted 0 1 1 2 0."""
    logits = np.eye(3, dtype=np.float32)[[0, 1, 1, 2, 0, 2]]
    batches = [{"logits": logits[:4], "per_example_loss": np.zeros(4)},
               {"logits": logits[4:], "per_example_loss": np.zeros(2)}]
    features = [types.SimpleNamespace(label_id=label, is_real_example=i < 5)
                for i, label in enumerate([0, 0, 1, 2, 2, 1])]
    metrics = label_metrics(batches, features, ["a", "b", "c"])
    assert metrics["confusion_matrix"] == {"labels": ["a", "b", "c"], "counts": [[1, 1, 0], [0, 1, 0], [1, 0, 1]]}
    assert metrics["per_class"] == {"a": {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2},
                                    "b": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 1},
                                    "c": {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}}
    true, predicted = [0, 0, 1, 2, 2], [0, 1, 1, 2, 0]
    assert metrics["macro_f1"] == pytest.approx(f1_score(true, predicted, average="macro"))
    assert metrics["weighted_f1"] == pytest.approx(f1_score(true, predicted, average="weighted"))
    # A label never true nor predicted counts, with zeros, as scikit-learn counts it.
    metrics = label_metrics(batches, features, ["a", "b", "c", "d"])
    p, r, f, s = precision_recall_fscore_support(true, predicted, labels=[0, 1, 2, 3], zero_division=0)
    np.testing.assert_allclose([list(c.values()) for c in metrics["per_class"].values()], np.transpose([p, r, f, s]))
    assert metrics["macro_f1"] == pytest.approx(f1_score(true, predicted, labels=[0, 1, 2, 3], average="macro",
                                                         zero_division=0))


def test_entity_metrics_are_seqevals_with_the_tags_confusion_matrix():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-LOC", "O"]]
    predicted = [["B-PER", "I-PER", "O", "O"], ["B-PER", "B-LOC", "O"]]
    tags = ["B-LOC", "B-PER", "I-PER", "O"]
    metrics = ner.entity_metrics(gold, predicted, tags)
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    assert metrics["per_class"] == {"LOC": {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2},
                                    "PER": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 1}}
    assert metrics["macro_f1"] == pytest.approx(report["macro avg"]["f1-score"])
    assert metrics["weighted_f1"] == pytest.approx(report["weighted avg"]["f1-score"])
    flat = [[tags.index(t) for sentence in labels for t in sentence] for labels in (gold, predicted)]
    assert metrics["confusion_matrix"]["counts"] == confusion_matrix(*flat).tolist() == [
        [1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 2]]


# --- the tasks --------------------------------------------------------------------------------------------------

def _files(tmp_path):
    """A 1-layer tiny model; a tsv task (labels no and yes, 1 in 8 yes, unrelated to the text) and CoNLL files
    (tags B-X, O) in tmp_path/data. -> the RunConfig settings of a run training and evaluating them."""
    vocab_file, config_file = write_tiny_model(tmp_path, num_hidden_layers=1)
    rng = random.Random(0)
    data = tmp_path / "data"
    for split, n in (("train", 32), ("dev", 8)):
        write_lines(str(data / f"{split}.tsv"), [tsv_line("text_a", "label")] + [
            tsv_line(random_sentence(rng), "yes" if i % 8 == 0 else "no") for i in range(n)])
        write_lines(str(data / ("train.txt" if split == "train" else "valid.txt")), [
            f"{word} {'B-X' if word in ('cat', 'dog') else 'O'}" + ("\n" if i % 5 == 4 else "")
            for i, word in enumerate("the cat sat on a mat the dog ran fast".split() * (n // 4))])
    write_lines(str(data / "test.tsv"), ["text_a"] + [random_sentence(rng) for _ in range(16)])
    return dict(vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=16, do_train=True,
                train_batch_size=8, num_train_epochs=2, eval_batch_size=4, learning_rate=3e-3, seed=1)


@pytest.mark.slow
def test_weights_move_a_classifiers_predictions_to_the_minority_class_and_are_recorded(tmp_path):
    """Balanced weights (4 and 0.57) on labels the text does not tell: trained without them the model learns the
    prior (yes about 1 in 8), with them (in 2 accumulated micro-batches) about even odds. eval_results.txt keeps the
    original's keys, eval_metrics.json counts the dev set, the weights are recorded, and a resume with other weights
    is refused."""
    settings, out = _files(tmp_path), tmp_path / "weighted"
    runner.run(ClassifierTask("tsv", str(tmp_path / "data")),
               runner.RunConfig(output_dir=str(tmp_path / "unweighted"), do_predict=True, **settings))
    task = ClassifierTask("tsv", str(tmp_path / "data"))
    results, _ = runner.run(task, runner.RunConfig(output_dir=str(out), class_weights="balanced", do_eval=True,
                                                   do_predict=True, gradient_accumulation_steps=2, **settings))
    assert task.label_list == ["no", "yes"]
    assert list(task.loss.class_weights) == pytest.approx([32 / 28 / 2, 32 / 4 / 2])
    unweighted, weighted = (np.loadtxt(tmp_path / name / "test_results.tsv")[:, 1].mean()
                            for name in ("unweighted", "weighted"))
    assert unweighted < 0.3 and weighted > unweighted + 0.2, (unweighted, weighted)
    assert sorted(results[""]) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    metrics = json.loads((out / "eval_metrics.json").read_text())
    assert metrics["confusion_matrix"]["labels"] == list(metrics["per_class"]) == ["no", "yes"]
    counts = np.array(metrics["confusion_matrix"]["counts"])
    assert counts.sum() == 8 and np.trace(counts) / 8 == pytest.approx(float(results[""]["eval_accuracy"]))
    assert json.loads((out / "run_settings.json").read_text())["class_weights"] == "balanced"
    with pytest.raises(ValueError, match=r"other settings \(class_weights balanced -> 1,2"):
        runner.run(ClassifierTask("tsv", str(tmp_path / "data")),
                   runner.RunConfig(output_dir=str(out), class_weights="1,2", gradient_accumulation_steps=2,
                                    **settings))


def test_ner_weighs_its_tags_and_writes_eval_metrics(tmp_path):
    """Balanced weights of train.txt's tags (16 B-X, 64 O words); the dev set's evaluation by an untrained model."""
    settings = _files(tmp_path)
    run = runner.RunConfig(output_dir=str(tmp_path), class_weights="balanced", do_eval=True, **settings)
    task = ner.NerTask(str(tmp_path / "data"))
    task.read_inputs(run, None)
    assert task.label_list == ["B-X", "O"]
    np.testing.assert_allclose(task.loss.class_weights, [80 / (2 * 16), 80 / (2 * 64)])
    config = BertConfig.from_json_file(settings["bert_config_file"])
    tf.keras.utils.set_random_seed(0)
    predictor = prediction.Predictor(functools.partial(task.build_model(config), training=False), task.loss)
    predictor.step = 0
    results = task.evaluate(run, FullTokenizer(settings["vocab_file"]), predictor)
    assert not [key for key in results if "macro" in key or "weighted" in key]  # eval_results.txt: as it was
    metrics = json.loads((tmp_path / "eval_metrics.json").read_text())
    assert metrics["confusion_matrix"]["labels"] == ["B-X", "O"]
    assert np.sum(metrics["confusion_matrix"]["counts"]) == 20  # the words of valid.txt
    for name, scores in metrics["per_class"].items():
        assert scores["f1"] == pytest.approx(results[f"eval_{name}_f1"])
