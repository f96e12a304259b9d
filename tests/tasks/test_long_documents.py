"""Long documents in run_classifier.py (--doc_stride, --window_pooling): a text longer than max_seq_length trains as
its windows, each with the text's label, and is evaluated and predicted as the pool of its windows' probabilities.
Against a hand computation: the windows written out below, the run's model run on each, their probabilities pooled
with NumPy. README's "Long texts" command and a multi-label run with max pooling in one process; the pooling of each
head and the errors in-process."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier

import bert_tf
from bert_tf import checkpoints
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import runner
from bert_tf.tasks.classifier import ClassifierTask, InputExample, features
from bert_tf.tasks.classifier.task import pool_document, pool_windows
from bert_tf.text.tokenization import FullTokenizer

SEQ, STRIDE = 8, 3  # windows of 8 tokens: 6 of a single text, 4 of a pair with a 1-token text_b; every 3 tokens
# (text_a, text_b, label, multi-label labels) of each split, and each text's windows, by hand.
DATA = {
    "train": [("the cat sat", "", "neg", "art"), ("the big red cat sat on the small blue mat", "", "pos", "art,tech"),
              ("a dog ran", "", "pos", ""), ("a dog ran fast on a big mat", "yes", "neg", "sport")],
    "dev": [("the cat sat", "", "neg", "art"), ("the big red cat sat on the small blue mat", "", "pos", "tech"),
            ("a dog ran fast on a big mat", "yes", "neg", "sport,art")],
    "test": [("sad bad dog ran on the mat fast", "", None, None), ("happy cat", "", None, None)],
}
WINDOWS = {
    "train": [1, 3, 1, 3],
    "dev": [[("the cat sat", "")],
            [("the big red cat sat on", ""), ("cat sat on the small blue", ""), ("the small blue mat", "")],
            [("a dog ran fast", "yes"), ("fast on a big", "yes"), ("big mat", "yes")]],
    "test": [[("sad bad dog ran on the", ""), ("ran on the mat fast", "")], [("happy cat", "")]],
}
LABELS, TOPICS = ["neg", "pos"], ["art", "sport", "tech"]


def _write_data(directory, multi_label):
    for split, rows in DATA.items():
        header = ["id", "text_a", "text_b"] + ["label"] * (split != "test")
        tiny_classifier.write_lines(os.path.join(directory, f"{split}.tsv"), [tiny_classifier.tsv_line(*header)] + [
            tiny_classifier.tsv_line(f"{split}{i}", a, b, *([topics if multi_label else label] if label else []))
            for i, (a, b, label, topics) in enumerate(rows)])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, run_main):
    """README's "Long texts" command on the data above (its flags as written, then a tiny run's sizes and
    --doc_stride=3), a multi-label run with --window_pooling=max, a rerun of that with another stride, and a
    prediction again into the first output_dir without --doc_stride (the run's, from its record): one process.
    Returns ({flag: value} of the command, the multi-label run's output_dir, the errors, the logs)."""
    readme = pytest.importorskip("test_readme_checkpoint_examples")  # README's sections and commands
    root = str(tmp_path_factory.mktemp("long_documents"))
    flags, values = readme.classifier_command("### Long texts", root)
    tiny_classifier.write_tiny_release(os.path.join(root, "base"), **tiny_classifier.L1_H16)
    _write_data(values["data_dir"], multi_label=False)
    _write_data(f"{root}/topics", multi_label=True)
    tiny = [f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}", "--train_batch_size=4", "--num_train_epochs=1",
            "--eval_batch_size=2", "--predict_batch_size=2", "--seed=1", "--learning_rate=1e-3"]
    multi_label = [*flags, *tiny, f"--data_dir={root}/topics", f"--output_dir={root}/topics_output", "--multi_label",
                   "--window_pooling=max", f"--export_dir={root}/topics_serving"]
    predict_only = [flag for flag in [*flags, *tiny]
                    if not flag.startswith(("--doc_stride", "--do_train", "--do_eval"))]
    errors, logs = run_main(tiny_classifier.SCRIPT, [*flags, *tiny], multi_label, [*multi_label, "--doc_stride=4"],
                            predict_only, with_logs=True)
    return values, f"{root}/topics_output", errors, logs


def _restored(out, config_file, spec_name, num_labels):
    spec = task_models.REGISTRY[spec_name]
    model = spec.build(BertConfig.from_json_file(config_file), num_labels)
    checkpoints.restore(model, out, spec.head_names, strict=True)
    return model


def _window_ids(text_a, text_b):
    """(input_ids, input_mask, segment_ids) of `[CLS] a [SEP] (b [SEP])`, zero-padded to SEQ, by hand."""
    tokens = ["[CLS]", *text_a.split(), "[SEP]"] + ([*text_b.split(), "[SEP]"] if text_b else [])
    segments = [0] * (len(text_a.split()) + 2) + [1] * (len(tokens) - len(text_a.split()) - 2)
    padding = [0] * (SEQ - len(tokens))
    return [tiny_classifier.VOCAB.index(t) for t in tokens] + padding, [1] * len(tokens) + padding, segments + padding


def _hand_probabilities(model, windows, pool):
    """[texts, labels]: the model's probabilities on each text's windows, pooled by `pool` (np.mean or np.max)."""
    pooled = []
    for text_windows in windows:
        ids, mask, segments = np.array([_window_ids(a, b) for a, b in text_windows], np.int32).transpose(1, 0, 2)
        outputs = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
        pooled.append(pool(outputs["probabilities"].numpy().astype(np.float64), axis=0))
    return np.array(pooled)


def _records(path, label_shape=()):
    return [features.decode_record(record, SEQ, label_shape=label_shape) for record in tf.data.TFRecordDataset(path)]


@pytest.mark.slow
def test_windows_train_and_their_mean_probability_is_the_texts(runs):
    """train.tf_record: the 8 windows of 4 texts, each with its text's label; eval.tf_record: the dev set's 7 windows
    of 3 texts, as written by hand (a pair's text_b whole in each); eval_results.txt and eval_metrics.json count the
    3 texts, on their windows' mean probabilities (eval_loss: each text's loss on them); test_results.tsv: 2 rows,
    the mean of each text's windows' (1e-5); the stride and pooling recorded."""
    values, _, errors, logs = runs
    assert errors[0] is None and errors[3] is None, logs[-4000:]
    assert "--doc_stride=3, --window_pooling=mean: the training run's (model_metadata.json)" in logs
    out = values["output_dir"]
    train = _records(f"{out}/train.tf_record")
    expected_labels = [LABELS.index(label) for (_, _, label, _), n in zip(DATA["train"], WINDOWS["train"])
                       for _ in range(n)]
    assert [int(labels["label_ids"]) for _, labels in train] == expected_labels  # 8 windows
    assert "train.tf_record: 2 of 4 texts were longer than max_seq_length 8 and were split into 6 windows" in logs
    dev_windows = [window for text in WINDOWS["dev"] for window in text]
    dev = _records(f"{out}/eval.tf_record")
    assert [[inputs[name].numpy().tolist() for name in ("input_ids", "input_mask", "segment_ids")]
            for inputs, _ in dev] == [list(_window_ids(a, b)) for a, b in dev_windows]

    model = _restored(out, values["bert_config_file"], "classifier", 2)
    probabilities = _hand_probabilities(model, WINDOWS["dev"], np.mean)
    labels = np.array([LABELS.index(label) for _, _, label, _ in DATA["dev"]])
    losses = -np.log(probabilities[np.arange(3), labels])
    results = tiny_classifier.eval_results(out, float)
    assert results["eval_accuracy"] == pytest.approx(np.mean(probabilities.argmax(-1) == labels))
    assert results["eval_loss"] == pytest.approx(losses.mean(), rel=1e-5)
    assert results["loss"] == pytest.approx(np.mean([losses[:2].mean(), losses[2]]), rel=1e-5)  # batches of 2 texts
    with open(f"{out}/eval_metrics.json") as f:
        assert np.sum(json.load(f)["confusion_matrix"]["counts"]) == 3
    np.testing.assert_allclose(np.loadtxt(f"{out}/test_results.tsv", ndmin=2),
                               _hand_probabilities(model, WINDOWS["test"], np.mean), atol=1e-5)
    assert len(_records(f"{out}/predict.tf_record")) == 3
    with open(f"{out}/run_settings.json") as f:
        settings = json.load(f)
    assert (settings["doc_stride"], settings["window_pooling"]) == (3, "mean")
    # bert_tf.load of the run windows and pools the test texts as the run did.
    answers = bert_tf.load(out, batch_size=2).predict([a for a, _, _, _ in DATA["test"]])
    np.testing.assert_allclose([list(a["probabilities"].values()) for a in answers],
                               np.loadtxt(f"{out}/test_results.tsv", ndmin=2), atol=1e-5)


@pytest.mark.slow
def test_multi_label_windows_take_each_labels_max(runs):
    """--multi_label --window_pooling=max: test_results.tsv, each label's highest sigmoid over a text's windows;
    eval_results.txt's multi-label figures on the dev texts' (3, not 7); a rerun with another stride is refused."""
    values, out, errors, logs = runs
    assert errors[1] is None, logs[-4000:]
    model = _restored(out, values["bert_config_file"], "multi_label", 3)
    np.testing.assert_allclose(np.loadtxt(f"{out}/test_results.tsv", ndmin=2),
                               _hand_probabilities(model, WINDOWS["test"], np.max), atol=1e-5)
    probabilities = _hand_probabilities(model, WINDOWS["dev"], np.max)
    true = np.array([[topic in topics.split(",") for topic in TOPICS] for _, _, _, topics in DATA["dev"]])
    results = tiny_classifier.eval_results(out, float)
    assert results["eval_subset_accuracy"] == pytest.approx(np.mean(((probabilities >= 0.5) == true).all(-1)))
    log_p, log_q = np.log(probabilities), np.log(1 - probabilities)
    assert results["eval_loss"] == pytest.approx(-(true * log_p + (1 - true) * log_q).mean(), rel=1e-5)
    with open(f"{out}/run_settings.json") as f:
        assert json.load(f)["window_pooling"] == "max"
    # bert_tf.load of the run and of its export, and the export's text signature (windowed and pooled in the graph):
    # test_results.tsv's probabilities.
    import tensorflow_text  # noqa: F401  (the export's text signatures)

    texts = [a for a, _, _, _ in DATA["test"]]
    expected = np.loadtxt(f"{out}/test_results.tsv", ndmin=2)
    serving = f"{os.path.dirname(out)}/topics_serving"
    for path in (out, serving):
        answers = bert_tf.load(path).predict(texts)
        np.testing.assert_allclose([list(a["probabilities"].values()) for a in answers], expected, atol=1e-5)
    version = tf.saved_model.load(os.path.join(serving, os.listdir(serving)[0]))
    served = version.signatures["serving_text"](text_a=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    assert served["num_windows"].numpy().tolist() == [len(windows) for windows in WINDOWS["test"]]
    assert errors[2].startswith(f"ValueError: {out} holds checkpoints of a run with other settings")
    assert "doc_stride 3 -> 4" in errors[2]


# --- pooling, in-process ---------------------------------------------------------------------------------------

def test_each_heads_pooling_by_hand():
    """Softmax: the mean of the windows' probabilities, or each label's max scaled to sum to 1; multi-label: each
    label's mean or max of sigmoids; regression: the mean or max prediction; each loss on the pooled outputs; one
    window: its own outputs, loss included."""
    rng = np.random.RandomState(0)
    logits = rng.randn(3, 4)
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    sigmoid = 1 / (1 + np.exp(-logits))
    rows = lambda probabilities: [{"logits": np.float32(z), "probabilities": np.float32(p), "per_example_loss": 0.0}
                                  for z, p in zip(logits, probabilities)]  # noqa: E731
    for pooling, pooled in (("mean", softmax.mean(0)), ("max", softmax.max(0) / softmax.max(0).sum())):
        document = pool_document(rows(softmax), 2, pooling)
        np.testing.assert_allclose(document["probabilities"], pooled, rtol=1e-6)
        assert document["per_example_loss"] == pytest.approx(-np.log(pooled[2]), rel=1e-6)
        assert np.argmax(document["logits"]) == np.argmax(pooled)
    targets = np.array([1, 0, 0, 1])
    for pooling, pooled in (("mean", sigmoid.mean(0)), ("max", sigmoid.max(0))):
        document = pool_document(rows(sigmoid), targets, pooling, multi_label=True)
        np.testing.assert_allclose(document["probabilities"], pooled, rtol=1e-6)
        np.testing.assert_allclose(1 / (1 + np.exp(-document["logits"].astype(np.float64))), pooled, rtol=1e-6)
        bce = -(targets * np.log(pooled) + (1 - targets) * np.log(1 - pooled)).mean()
        assert document["per_example_loss"] == pytest.approx(bce, rel=1e-6)
    scores = [{"logits": np.float32([s]), "predictions": np.float32(s), "per_example_loss": 0.0} for s in (1.0, 4.0)]
    assert pool_document(scores, 2.0, "mean")["predictions"] == 2.5
    assert pool_document(scores, 2.0, "max")["per_example_loss"] == 4.0
    assert pool_document(scores[:1], 2.0, "max") is scores[0]


def test_windows_are_regrouped_per_text_across_batches(tmp_path):
    """The windows' outputs, in batches that split texts, regroup per text (window 0 starts one), into batches of
    batch_size texts; fill_batches pads the windows (not the texts) to whole batches, each padding window a text
    of its own."""
    vocab_file = tiny_classifier.write_lines(str(tmp_path / "vocab.txt"), tiny_classifier.VOCAB)
    examples = [InputExample(str(i), a, b or None, label) for i, (a, b, label, _) in enumerate(DATA["dev"])]
    written, _ = features.file_based_convert_examples_to_features(
        examples, LABELS, SEQ, FullTokenizer(vocab_file), str(tmp_path / "eval.tf_record"), doc_stride=STRIDE,
        fill_batches=4)
    assert [(f.window, f.is_real_example) for f in written] == [
        (0, True), (0, True), (1, True), (2, True), (0, True), (1, True), (2, True), (0, False)]
    predictions = np.arange(8, dtype=np.float32)
    batches = [{"logits": predictions[k:k + 3, None], "predictions": predictions[k:k + 3]} for k in (0, 3, 6)]
    pooled = list(pool_windows(batches, written, 3, "mean"))
    assert [batch["predictions"].tolist() for batch in pooled] == [[0.0, 2.0, 5.0], [7.0]]


def test_bad_settings_are_refused_before_any_work(tmp_path):
    vocab_file, config_file = tiny_classifier.write_tiny_model(tmp_path)
    data, out = str(tmp_path / "data"), tmp_path / "out"
    run = runner.RunConfig(output_dir=str(out), vocab_file=vocab_file, bert_config_file=config_file,
                           max_seq_length=SEQ, do_train=True)
    for settings, message in [
            (dict(window_pooling="min"), r"--window_pooling=min: expected mean or max"),
            (dict(doc_stride=-1), r"doc_stride must be >= 0"),
            (dict(window_pooling="max"), r"--window_pooling=max pools the windows of --doc_stride"),
    ]:
        with pytest.raises(ValueError, match=message):
            runner.run(ClassifierTask("tsv", data, **settings), run)
    assert not out.exists()
    # A pair whose text_b leaves text_a no room in a window: its file and line.
    pair = InputExample("1", "the cat", "a b c d e", "neg", source="dev.tsv:3")
    tokenizer = FullTokenizer(tiny_classifier.write_lines(str(tmp_path / "vocab.txt"), tiny_classifier.VOCAB))
    with pytest.raises(ValueError, match=r"^dev\.tsv:3: text_b has 5 tokens, which with \[CLS\] and two \[SEP\] leave "
                                         r"no room for text_a within max_seq_length 8"):
        features.check_windows([pair], SEQ, tokenizer, STRIDE)
