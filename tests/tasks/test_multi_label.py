"""Multi-label classification (run_classifier.py --multi_label): the labels split, the multi-hot records, the loss
and its positive weights against NumPy, the metrics against scikit-learn, the tuned thresholds against a brute
force, the errors before any work; and README's "Multi-label" command on tiny data (one process), whose outputs,
serving export and Hugging Face conversion agree with each other."""
import json
import os
import random
import types

import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

import bert_tf
from bert_tf import checkpoints
from bert_tf.checkpoints import convert, huggingface
from bert_tf.export import exporter
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import runner
from bert_tf.tasks.classifier import ClassifierTask, InputExample, PaddingInputExample, features
from bert_tf.tasks.classifier.metrics import eval_metrics, multi_label_metrics, tune_thresholds
from bert_tf.tasks.classifier.task import (
    ClassWeightedLoss,
    class_weights,
    format_submission,
    multi_label_loss,
    split_labels,
)
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.training import losses

LABELS = ["art", "sport", "tech"]


# --- labels and records ----------------------------------------------------------------------------------------

def test_labels_are_split_and_written_as_multi_hot_records(tmp_path):
    assert split_labels(" sport, tech ", ",") == ["sport", "tech"]
    assert split_labels("", ",") == split_labels(None, ",") == split_labels(" ", ",") == []
    assert split_labels("tech,,tech|art", ",") == ["tech", "tech|art"] and split_labels("a|b", "|") == ["a", "b"]
    assert split_labels(("x ", 1), ",") == ["x", "1"]  # a DataProcessor's list, a JSON list's numbers
    vocab_file = tiny_classifier.write_lines(str(tmp_path / "vocab.txt"), tiny_classifier.VOCAB)
    examples = [InputExample("0", "the cat", label=["tech", "art"]), InputExample("1", "a dog", label=[]),
                PaddingInputExample()]
    path = str(tmp_path / "train.tf_record")
    written, _ = features.file_based_convert_examples_to_features(examples, LABELS, 8, FullTokenizer(vocab_file), path,
                                                                  multi_label=True)
    expected = [[1, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert [f.label_id for f in written] == expected
    records = [features.decode_record(r, 8, label_shape=(3,))[1] for r in tf.data.TFRecordDataset(path)]
    assert [r["label_ids"].numpy().tolist() for r in records] == expected
    assert [int(r["is_real_example"]) for r in records] == [1, 1, 0]
    # Without --multi_label the records keep the original's scalar label_ids.
    assert features.name_to_features(8)["label_ids"].shape == []


def test_a_label_the_model_cannot_know_is_named_with_its_file_and_line():
    example = InputExample("1", "a", label=["tech", "news"], source="dev.tsv:3")
    with pytest.raises(ValueError, match=r"^dev\.tsv:3: label 'news' is not in the label list \['art', 'sport', "
                                         r"'tech'\]\.$"):
        features.check_dev_labels([("", [example])], LABELS, multi_label=True)
    with pytest.raises(ValueError, match=r"dev\.tsv:3: the label \['tech', 'news'\] is a list of labels: multi-label "
                                         r"data needs --multi_label\."):
        features.example_label_id(example, LABELS)


# --- the loss --------------------------------------------------------------------------------------------------

def _bce(logits, targets, positive_weights=1.0):
    """PyTorch's BCEWithLogitsLoss(pos_weight=...) per element, by hand in float64."""
    sigmoid = 1 / (1 + np.exp(-logits))
    return -(positive_weights * targets * np.log(sigmoid) + (1 - targets) * np.log(1 - sigmoid))


def test_the_loss_is_the_mean_binary_cross_entropy_and_weighs_each_labels_positives():
    rng = np.random.RandomState(0)
    logits = rng.randn(5, 3).astype(np.float32)
    targets = rng.randint(0, 2, (5, 3))
    labels, outputs = {"label_ids": targets}, {"logits": logits}
    unweighted = _bce(logits.astype(np.float64), targets).mean(-1)
    np.testing.assert_allclose(multi_label_loss(labels, outputs), unweighted, rtol=1e-5)
    weights = [2.0, 0.5, 3.0]
    loss = ClassWeightedLoss(multi_label_loss, weights, multi_label=True)
    shares = losses.shares(loss, labels, outputs, losses.sums(loss, loss.weights(labels)))
    weighted = _bce(logits.astype(np.float64), targets, np.array(weights)).mean()
    assert float(shares["loss"]) == pytest.approx(weighted, rel=1e-5)
    assert weighted != pytest.approx(unweighted.mean(), rel=1e-2)
    np.testing.assert_allclose(loss(labels, outputs), unweighted, rtol=1e-5)  # called (eval_loss): unweighted
    # balanced: a label's negatives over its positives; 1 where every example or none has it.
    train = [["tech"], ["tech", "art"], [], ["tech"], ["tech"]]
    assert class_weights("balanced", LABELS + ["news"], train, multi_label=True) == [4 / 1, 1.0, 1 / 4, 1.0]
    assert class_weights("balanced", ["tech"], [["tech"]], multi_label=True) == [1.0]


# --- metrics and thresholds ------------------------------------------------------------------------------------

def test_metrics_are_scikit_learns_at_the_thresholds():
    rng = np.random.RandomState(1)
    probabilities = rng.rand(7, 3).astype(np.float32)
    true = rng.randint(0, 2, (7, 3))
    thresholds = [0.5, 0.3, 0.8]
    batches = [{"probabilities": probabilities[:4], "logits": probabilities[:4], "per_example_loss": np.ones(4)},
               {"probabilities": probabilities[4:], "logits": probabilities[4:], "per_example_loss": np.ones(3)}]
    feats = [types.SimpleNamespace(label_id=list(row), is_real_example=i < 6) for i, row in enumerate(true)]
    predicted, real = probabilities[:6] >= thresholds, true[:6]  # the 7th example fills a batch
    result = eval_metrics(batches, feats, 9, thresholds=thresholds)
    assert sorted(result) == ["eval_loss", "eval_macro_f1", "eval_micro_f1", "eval_subset_accuracy", "global_step",
                              "loss"]
    assert result["eval_micro_f1"] == pytest.approx(f1_score(real, predicted, average="micro"))
    assert result["eval_macro_f1"] == pytest.approx(f1_score(real, predicted, average="macro", zero_division=0))
    assert result["eval_subset_accuracy"] == pytest.approx(accuracy_score(real, predicted))
    metrics = multi_label_metrics(batches, feats, LABELS, thresholds)
    expected = np.transpose(precision_recall_fscore_support(real, predicted, zero_division=0))
    np.testing.assert_allclose([list(m.values()) for m in metrics["per_class"].values()], expected)
    assert metrics["thresholds"] == dict(zip(LABELS, thresholds))
    assert metrics["micro_f1"] == pytest.approx(result["eval_micro_f1"])


def _brute_force_thresholds(probabilities, labels):
    """Each label's dev probability whose `>=` has the highest F1 (scikit-learn's), the highest of equal F1s; 0.5
    without a positive."""
    out = []
    for p, y in zip(probabilities.T, labels.T):
        scores = [(f1_score(y, p >= t, zero_division=0), t) for t in np.unique(p)]
        best = max(score for score, _ in scores)
        out.append(max(t for score, t in scores if score >= best - 1e-12) if y.any() else 0.5)
    return out


def test_tuned_thresholds_are_a_brute_forces():
    rng = np.random.RandomState(2)
    probabilities = np.round(rng.rand(40, 4), 1).astype(np.float32)  # many ties
    labels = (rng.rand(40, 4) < probabilities).astype(int)
    labels[:, 3] = 0  # a label without a positive keeps the default
    tuned = tune_thresholds(probabilities, labels)
    assert tuned == _brute_force_thresholds(probabilities, labels)
    assert tuned[3] == task_models.DEFAULT_THRESHOLD and len(set(tuned[:3])) > 1
    # F1 2/3 at 0.9 (1 of 1 predicted right, 1 of 2 found) and at 0.1 (both found, 4 predicted): the higher one.
    assert tune_thresholds(np.array([[0.9], [0.6], [0.4], [0.1]], np.float32), [[1], [0], [0], [1]]) == [
        pytest.approx(0.9)]
    submission = format_submission(["a", "b"], [[0.2, 0.7, 0.9], [0.1, 0.1, 0.1]], LABELS, "id", [0.1, 0.8, 0.5], "|")
    assert submission == "id\tprediction\na\tart|tech\nb\tart\n"


# --- errors ----------------------------------------------------------------------------------------------------

def test_bad_settings_are_refused_before_any_work(tmp_path):
    vocab_file, config_file = tiny_classifier.write_tiny_model(tmp_path)
    files = dict(vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=16)
    out, data = tmp_path / "out", str(tmp_path / "data")
    for task, settings, message in [
            ("sts-b", dict(multi_label=True, do_train=True), "--multi_label applies to classification; StsbProcessor"),
            ("tsv", dict(tune_thresholds=True, do_train=True, do_eval=True), "--tune_thresholds .* needs --multi_label "
                                                                              "and --do_eval"),
            ("tsv", dict(multi_label=True, tune_thresholds=True, do_train=True), "needs --multi_label and --do_eval"),
            ("tsv", dict(multi_label=True, label_separator="", do_train=True), "--label_separator is empty")]:
        with pytest.raises(ValueError, match=message):
            runner.run(ClassifierTask(task, data), runner.RunConfig(output_dir=str(out), **settings, **files))
    assert not out.exists()
    tiny_classifier.write_lines(str(out / "model_metadata.json"), [json.dumps(
        {"task": "multi_label", "labels": LABELS, "thresholds": [0.5, 2, 0.5]})])
    with pytest.raises(ValueError, match=r"model_metadata\.json: expected a threshold in \[0, 1\] for each label of "
                                         r"\['art', 'sport', 'tech'\]"):
        ClassifierTask("tsv", data).read_inputs(runner.RunConfig(output_dir=str(out), do_predict=True,
                                                                 multi_label=True), None)


# --- README's command, end to end ------------------------------------------------------------------------------

def _topics(rng, count, labelled=True):
    """Rows (id, text, its labels joined by commas; "" for none) of random texts."""
    return [tiny_classifier.tsv_line(f"t{i}", tiny_classifier.random_sentence(rng), *(
        [",".join(label for label in LABELS if rng.random() < 0.4)] if labelled else [])) for i in range(count)]


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, run_main):
    """README's "Multi-label" command on tiny data in its layout (16 train, 8 dev, 5 test texts), its flags as
    written plus a tiny run's sizes, evaluations while training keeping the best micro F1, and balanced weights.
    Returns ({flag: value} of the command, the run's errors and logs)."""
    readme = pytest.importorskip("test_readme_checkpoint_examples")  # README's sections and commands
    root = str(tmp_path_factory.mktemp("multi_label"))
    flags, values = readme.classifier_command("#### Multi-label", root)
    tiny_classifier.write_tiny_release(os.path.join(root, "base"), **tiny_classifier.L1_H16)
    rng = random.Random(5)
    for split, count in (("train", 16), ("dev", 8), ("test", 5)):
        header = ["id", "text_a", "label"] if split != "test" else ["id", "text_a"]
        tiny_classifier.write_lines(os.path.join(values["data_dir"], f"{split}.tsv"), [
            tiny_classifier.tsv_line(*header), *_topics(rng, count, split != "test")])
    errors, logs = run_main(tiny_classifier.SCRIPT, [
        *flags, "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=2", "--learning_rate=1e-3",
        "--seed=1", "--eval_batch_size=3", "--predict_batch_size=2", "--eval_every_steps=4",
        "--best_metric=eval_micro_f1", "--class_weights=balanced"], with_logs=True)
    return values, errors, logs


def _rows(path):
    with open(path) as f:
        return [line.split("\t") for line in f.read().splitlines()]


@pytest.mark.slow
def test_the_readme_command_trains_tunes_predicts_and_exports(readme_run):
    """eval_results.txt's multi-label keys; the recorded labels and thresholds (model_metadata.json; no
    label_list.txt): tuned on the dev probabilities of the model the run ends with (the serving export's);
    test_results.tsv: a probability per label, the export's (1e-5), predictions.tsv and the export's predicted_labels
    at the thresholds; the settings recorded; a predict-only run reads them back; bert_tf.load of the run and of the
    export answer with those probabilities and labels."""
    import tensorflow_text  # noqa: F401  (the export's text signatures)

    values, errors, logs = readme_run
    assert errors == [None], logs[-4000:]
    out = values["output_dir"]
    results = tiny_classifier.eval_results(out)
    assert sorted(results) == ["eval_loss", "eval_macro_f1", "eval_micro_f1", "eval_subset_accuracy", "global_step",
                               "loss"]
    with open(f"{out}/eval_history.jsonl") as f:
        assert [json.loads(line)["global_step"] for line in f] == [4, 8]
    with open(f"{out}/model_metadata.json") as f:
        recorded = json.load(f)
    assert recorded["labels"] == LABELS and not os.path.exists(f"{out}/label_list.txt")
    saved = dict(zip(LABELS, recorded["thresholds"]))
    thresholds = np.array(list(saved.values()), np.float32)
    with open(f"{out}/eval_metrics.json") as f:
        assert json.load(f)["thresholds"] == saved
    with open(f"{out}/run_settings.json") as f:
        settings = json.load(f)
    assert (settings["multi_label"], settings["tune_thresholds"], settings["class_weights"]) == (True, True,
                                                                                                  "balanced")

    serving = tf.saved_model.load(os.path.join(values["export_dir"], os.listdir(values["export_dir"])[0]))
    texts = {split: [row[1] for row in _rows(os.path.join(values["data_dir"], f"{split}.tsv"))[1:]]
             for split in ("dev", "test")}
    dev = serving.signatures["serving_text"](text_a=tf.constant(texts["dev"]))
    dev_labels = np.array([[label in row[2].split(",") for label in LABELS]
                           for row in _rows(os.path.join(values["data_dir"], "dev.tsv"))[1:]])
    np.testing.assert_allclose(thresholds, _brute_force_thresholds(dev["probabilities"].numpy(), dev_labels),
                               atol=1e-5)
    test = serving.signatures["serving_text"](text_a=tf.constant(texts["test"]))
    probabilities = np.loadtxt(f"{out}/test_results.tsv", ndmin=2, dtype=np.float32)
    assert probabilities.shape == (5, 3)
    np.testing.assert_allclose(test["probabilities"].numpy(), probabilities, atol=1e-5)
    assert test["predicted_labels"].dtype == tf.int32
    np.testing.assert_array_equal(test["predicted_labels"], test["probabilities"].numpy() >= thresholds)
    assert _rows(f"{out}/predictions.tsv") == [["id", "prediction"]] + [
        [f"t{i}", ",".join(label for label, p, t in zip(LABELS, row, thresholds) if p >= t)]
        for i, row in enumerate(probabilities)]
    for path in (out, values["export_dir"]):  # bert_tf.load of the run and of its export: the same answers
        got = bert_tf.load(path).predict(texts["test"])
        np.testing.assert_allclose([list(a["probabilities"].values()) for a in got], probabilities, atol=1e-5)
        assert [a["labels"] for a in got] == [[label for label, p, t in zip(LABELS, row, thresholds) if p >= t]
                                              for row in probabilities], path
    task = ClassifierTask("tsv", values["data_dir"])
    task.read_inputs(runner.RunConfig(output_dir=out, do_predict=True, multi_label=True), None)
    assert task.spec.name == "multi_label" and task.thresholds == list(saved.values())
    assert task.build_model(BertConfig.from_json_file(values["bert_config_file"])).thresholds == tuple(saved.values())


@pytest.mark.slow
def test_the_run_converts_to_a_hugging_face_multi_label_model_and_back(readme_run, tmp_path):
    """--to=huggingface writes problem_type multi_label_classification with the run's labels (what the run recorded
    in its output_dir); the import reads it as the multi-label model, with the outputs of the checkpoint. The heads
    alone say classifier."""
    values, errors, _ = readme_run
    assert errors == [None]
    out, hf = values["output_dir"], str(tmp_path / "hf")
    assert convert.hf_task_of_heads({"classifier": 3}).name == "classifier"
    checkpoints.convert_checkpoint(out, hf, to="huggingface", vocab_file=values["vocab_file"],
                                   bert_config_file=values["bert_config_file"])
    with open(f"{hf}/config.json") as f:
        config = json.load(f)
    assert config["problem_type"] == "multi_label_classification"
    assert config["id2label"] == {"0": "art", "1": "sport", "2": "tech"} and config["label2id"]["tech"] == 2
    spec, model, labels = huggingface.task_model_from_hf_directory(hf)
    assert (spec.name, model.multi_label, labels) == ("multi_label", True, LABELS)
    reference = spec.build(model.bert.config, 3)
    checkpoints.restore(reference, out, spec.head_names, strict=True)
    inputs = {"input_ids": tf.constant([[2, 7, 8, 3]]), "input_mask": tf.ones([1, 4], tf.int32),
              "segment_ids": tf.zeros([1, 4], tf.int32)}
    got, expected = (m(inputs, training=False)["probabilities"].numpy() for m in (model, reference))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got.sum() != pytest.approx(1.0, abs=1e-3)  # sigmoids, not a softmax


@pytest.mark.slow
def test_an_export_of_the_runs_output_dir_takes_what_it_recorded(readme_run, tmp_path):
    """export_saved_model.py's export of the run's output_dir: its labels and tuned thresholds without flags; the
    same model as a single-label classifier is refused, so is a predict-only run without --multi_label."""
    values, errors, _ = readme_run
    assert errors == [None]
    out = values["output_dir"]
    path = exporter.export("multi_label", str(tmp_path), init_checkpoint=out, max_seq_length=16, text_ops="none")
    with open(f"{path}/assets.extra/export_metadata.json") as f:
        meta = json.load(f)
    with open(f"{out}/model_metadata.json") as f:
        assert (meta["labels"], meta["thresholds"]) == (LABELS, json.load(f)["thresholds"])
    with pytest.raises(ValueError, match="holds a multi_label model .* export it as --task=multi_label"):
        exporter.export("classifier", str(tmp_path), init_checkpoint=out, max_seq_length=16, text_ops="none")
    with pytest.raises(ValueError, match="holds a multi-label classifier .* not a single-label one: add --multi_label"):
        runner.run(ClassifierTask("tsv", values["data_dir"]), runner.RunConfig(output_dir=out, do_predict=True))
