import json
import os
import random
import sys
import types

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier

from bert_tf import fileio
from bert_tf.data import label_lists
from bert_tf.tasks import ner, result_files, runner
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "run_scripts", "run_ner.py")

# The start of CoNLL-2003's eng.train (IOB2 tags), as the file lays it out.
CONLL_SAMPLE = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O

The DT B-NP O
European NNP I-NP B-ORG
Commission NNP I-NP I-ORG
said VBD B-VP O
on IN B-PP O
Thursday NNP B-NP O
it PRP B-NP O
disagreed VBD B-VP O
with IN B-PP O
German JJ B-NP B-MISC
advice NN I-NP O
to TO B-PP O
consumers NNS B-NP O
to TO B-VP O
shun VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
until IN B-SBAR O
scientists NNS B-NP O
determine VBP B-VP O
whether IN B-SBAR O
mad JJ B-NP O
cow NN I-NP O
disease NN I-NP O
can MD B-VP O
be VB I-VP O
transmitted VBN I-VP O
to TO B-PP O
sheep NN B-NP O
. . O O

-DOCSTART- -X- -X- O

Germany NNP B-NP B-LOC
's POS B-NP O
representative NN I-NP O
to TO B-PP O
the DT B-NP O
European NNP I-NP B-ORG
Union NNP I-NP I-ORG
's POS B-NP O
veterinary JJ I-NP O
committee NN I-NP O
Werner NNP I-NP B-PER
Zwingmann NNP I-NP I-PER
said VBD B-VP O
. . O O
"""
LABELS = ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-ORG", "I-PER", "O"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "call", "to", "boycott",
         "british", "lamb", ".", "peter", "black", "##burn", "brussels", "1996", "-", "08", "22", "the", "european",
         "commission", "said", "on", "thursday", "it", "disagree", "##d", "with", "advice", "consumer", "##s",
         "shun", "until", "scientist", "determine", "whether", "mad", "cow", "disease", "can", "be", "transmit",
         "##ted", "sheep", "germany", "'", "s", "representative", "union", "veterinary", "committee", "werner",
         "z", "##wing", "##mann"]


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB))
    return str(path)


@pytest.fixture
def tokenizer(vocab_file):
    return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


@pytest.fixture
def conll_file(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL_SAMPLE)
    return str(path)


# --- reading ---------------------------------------------------------------------------------------------------

def test_read_conll_skips_docstart_and_splits_on_blank_lines(conll_file):
    examples = ner.read_conll(conll_file, "train")
    assert [len(e.words) for e in examples] == [9, 2, 2, 30, 14]
    assert examples[0].words[:3] == ["EU", "rejects", "German"]
    assert examples[0].labels[:3] == ["B-ORG", "O", "B-MISC"]
    assert examples[1].words == ["Peter", "Blackburn"] and examples[1].labels == ["B-PER", "I-PER"]
    assert [e.guid for e in examples[:2]] == ["train-0", "train-1"]
    # The line of each sentence's first word (word i is on line + i).
    assert [e.line for e in examples] == [3, 13, 16, 19, 52]
    assert ner.get_labels(examples) == LABELS


def test_read_conll_tolerates_two_columns_tabs_crlf_and_no_final_newline(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"-DOCSTART-\tO\r\n\r\nParis\tB-LOC\r\nis\tO\r\n\r\n\r\n\r\nNice\tB-LOC")
    examples = ner.read_conll(str(path))
    assert [(e.words, e.labels, e.line) for e in examples] == [
        (["Paris", "is"], ["B-LOC", "O"], 3), (["Nice"], ["B-LOC"], 8)]


@pytest.mark.parametrize("text, message", [
    ("EU NNP B-NP B-ORG\nrejects VBZ O\n", r"x.txt:2: malformed line 'rejects VBZ O': 3 columns, but line 1 has 4"),
    ("\n\nEU\n", r"x.txt:3: malformed line 'EU': expected whitespace-separated columns"),
    ("", r"x.txt: no sentences"),
    ("-DOCSTART- -X- -X- O\n\n\n", r"x.txt: no sentences"),
])
def test_read_conll_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "x.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        ner.read_conll(str(path))


def test_read_conll_rejects_bad_utf8_and_missing_files(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"EU B-ORG\nK\xf6ln B-LOC\n")
    with pytest.raises(ValueError, match=r"x.txt:2: not valid UTF-8"):
        ner.read_conll(str(path))
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        ner.read_conll(str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="valid.txt or dev.txt"):
        ner.dev_file(str(tmp_path))
    (tmp_path / "dev.txt").write_text("a O\n")
    assert ner.dev_file(str(tmp_path)).endswith("dev.txt")


def test_unknown_label_names_file_and_line(conll_file):
    examples = ner.read_conll(conll_file)
    with pytest.raises(ValueError, match=r"train.txt:13: unknown label 'B-PER' \(word 'Peter'\)"):
        ner.check_labels(examples, ["B-LOC", "B-MISC", "B-ORG", "I-ORG", "I-PER", "O"])
    with pytest.raises(ValueError, match=r"train.txt:14: unknown label 'I-PER'"):
        list(ner.convert_examples_to_features(examples, ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-ORG", "O"], 16,
                                              None))


def test_label_list_resolution(tmp_path, conll_file):
    out = tmp_path / "out"
    out.mkdir()
    dirs = dict(output_dir=str(out), data_dir=str(tmp_path))
    assert ner.resolve_label_list(**dirs, do_train=True) == (LABELS, conll_file)  # sorted labels of train.txt
    label_lists.write(str(out / "label_list.txt"), ["O", "B-PER", "I-PER"])
    assert ner.resolve_label_list(**dirs, do_train=True)[0] == ["O", "B-PER", "I-PER"]  # the saved order wins
    assert ner.resolve_label_list(**dirs, label_list="O, B-PER,I-PER", do_train=True)[0] == ["O", "B-PER", "I-PER"]
    with pytest.raises(ValueError, match="differs from the labels"):
        ner.resolve_label_list(**dirs, label_list="B-PER,I-PER,O", do_train=True)
    with pytest.raises(ValueError, match="repeats O"):
        label_lists.parse("O,B-X,O")
    with pytest.raises(ValueError, match="--label_list has an empty label: ''"):  # --label_list= is no list at all
        ner.resolve_label_list(**dirs, label_list="", do_train=True)
    with pytest.raises(ValueError, match="No label list: pass --label_list"):
        ner.resolve_label_list(output_dir=str(tmp_path / "empty"), data_dir=str(tmp_path / "nodata"))


# --- features --------------------------------------------------------------------------------------------------

def test_first_sub_token_carries_the_label(conll_file, tokenizer):
    examples = ner.read_conll(conll_file)
    label_map = {label: i for i, label in enumerate(LABELS)}
    (feature,) = ner.convert_example(1, examples[1], label_map, 8, tokenizer)  # Peter Blackburn
    tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:5])
    assert tokens == ["[CLS]", "peter", "black", "##burn", "[SEP]"]
    assert feature.label_ids == [-1, label_map["B-PER"], label_map["I-PER"], -1, -1, -1, -1, -1]
    assert feature.word_positions == [1, 2] and feature.word_start == 0
    assert feature.input_mask == [1] * 5 + [0] * 3 and feature.segment_ids == [0] * 8
    assert feature.input_ids[5:] == [0, 0, 0]

    # Every word's first sub-token, and only those, carry a label, in word order.
    for example in examples:
        for f in ner.convert_example(0, example, label_map, 128, tokenizer):
            labelled = [i for i, x in enumerate(f.label_ids) if x >= 0]
            assert labelled == f.word_positions
            assert [LABELS[f.label_ids[i]] for i in labelled] == example.labels


def test_a_word_the_tokenizer_drops_becomes_unk(tokenizer):
    example = ner.InputExample("x-0", ["EU", "\u200b", "lamb"], ["B-ORG", "O", "O"], "x", 1)
    (feature,) = ner.convert_example(0, example, {"B-ORG": 0, "O": 1}, 6, tokenizer)
    assert tokenizer.convert_ids_to_tokens(feature.input_ids) == ["[CLS]", "eu", "[UNK]", "lamb", "[SEP]", "[PAD]"]
    assert feature.word_positions == [1, 2, 3]


@pytest.mark.parametrize("counts, max_tokens, windows", [
    ([1, 1, 1], 5, [(0, 3)]),
    ([2, 2, 2], 4, [(0, 2), (2, 3)]),
    ([3, 1, 2, 2, 1], 4, [(0, 2), (2, 4), (4, 5)]),
    ([1, 9, 1], 4, [(0, 1), (1, 2), (2, 3)]),  # a word longer than a window is a window of its own
    ([9], 4, [(0, 1)]),
])
def test_split_windows_is_greedy_and_keeps_words_whole(counts, max_tokens, windows):
    assert ner.split_windows(counts, max_tokens) == windows


def test_windows_round_trip(conll_file, tokenizer):
    examples = ner.read_conll(conll_file)
    rng = random.Random(3)
    # Plus made-up long sentences of random words from the sample (some of several sub-tokens).
    words = [(word, label) for e in examples for word, label in zip(e.words, e.labels)]
    for i in range(20):
        chosen = [rng.choice(words) for _ in range(rng.randint(1, 60))]
        examples.append(ner.InputExample(f"r-{i}", [w for w, _ in chosen], [label for _, label in chosen], "r", 1))
    examples.append(ner.InputExample("long", ["Zwingmann"] * 3, ["B-PER", "I-PER", "I-PER"], "r", 1))
    for max_seq_length in (5, 6, 9, 16, 128):
        features = list(ner.convert_examples_to_features(examples, LABELS, max_seq_length, tokenizer))
        assert all(len(f.input_ids) == len(f.label_ids) == max_seq_length for f in features)
        if max_seq_length < 128:
            assert len(features) > len(examples)
        for f in features:
            n = sum(f.input_mask)
            assert f.input_ids[0] == tokenizer.vocab["[CLS]"] and f.input_ids[n - 1] == tokenizer.vocab["[SEP]"]
            # A window starts with a word's first sub-token and ends with a word's last one.
            assert f.word_positions[0] == 1
            tokens = tokenizer.convert_ids_to_tokens(f.input_ids[1:n - 1])
            assert not tokens[0].startswith("##")
        # "Predict" the gold label at each word's first sub-token; re-joining gives back every sentence.
        predictions = [[f.label_ids[p] for p in f.word_positions] for f in features]
        assert ner.rejoin(examples, features, predictions, LABELS) == [e.labels for e in examples]
    # A 3-sub-token word and max_seq_length 4: the word is cut to 2 sub-tokens, its label kept.
    f1, f2, f3 = ner.convert_examples_to_features(examples[-1:], LABELS, 4, tokenizer)
    assert tokenizer.convert_ids_to_tokens(f1.input_ids) == ["[CLS]", "z", "##wing", "[SEP]"]
    assert [f.word_start for f in (f1, f2, f3)] == [0, 1, 2]


def test_rejoin_detects_missing_and_double_predictions(conll_file, tokenizer):
    examples = ner.read_conll(conll_file)[:2]
    features = list(ner.convert_examples_to_features(examples, LABELS, 128, tokenizer))
    with pytest.raises(RuntimeError, match="got no prediction"):
        ner.rejoin(examples, features, [[0] * 9, [0]], LABELS)
    with pytest.raises(RuntimeError, match="in two windows"):
        ner.rejoin(examples, features + features[1:], [[0] * 9, [0, 0], [0, 0]], LABELS)


class _FakeTrainer:
    """Trainer.predict's contract with a fixed "model": logits favour label (input id % num_labels)."""

    def __init__(self, num_labels):
        self.num_labels = num_labels
        self.batch_sizes = []

    def predict(self, dataset, with_loss=False):
        for features, labels in dataset:
            logits = tf.one_hot(features["input_ids"] % self.num_labels, self.num_labels) * 5.0
            self.batch_sizes.append(int(logits.shape[0]))
            yield {"logits": logits.numpy(),
                   "per_example_loss": ner.masked_loss(labels, {"logits": logits}).numpy()}


def test_predict_windows_with_fixed_batches_drops_the_padding(conll_file, tokenizer):
    features = list(ner.convert_examples_to_features(ner.read_conll(conll_file), LABELS, 10, tokenizer))
    assert len(features) == 12
    trainer = _FakeTrainer(len(LABELS))
    plain = ner.predict_windows(trainer, features, 5)
    assert trainer.batch_sizes == [5, 5, 2]
    trainer.batch_sizes = []
    fixed = ner.predict_windows(trainer, features, 5, fixed_batches=True)
    assert trainer.batch_sizes == [5, 5, 5]
    assert fixed[0] == plain[0] and fixed[1]["eval_loss"] == pytest.approx(plain[1]["eval_loss"])
    expected = [[f.input_ids[p] % len(LABELS) for p in f.word_positions] for f in features]
    assert plain[0] == expected


# --- loss, metrics, output -------------------------------------------------------------------------------------

def test_masked_loss_ignores_minus_one_labels():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(3, 5, 4)).astype(np.float32)
    label_ids = np.array([[-1, 2, -1, 0, -1], [-1, 3, -1, -1, -1], [-1] * 5], np.int32)
    loss = ner.masked_loss({"label_ids": label_ids}, {"logits": logits}).numpy()
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = [-(log_probs[0, 1, 2] + log_probs[0, 3, 0]) / 2, -log_probs[1, 1, 3], 0.0]
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
    changed = logits.copy()
    changed[label_ids < 0] = 100.0 * rng.normal(size=changed[label_ids < 0].shape)
    np.testing.assert_allclose(ner.masked_loss({"label_ids": label_ids}, {"logits": changed}).numpy(), loss,
                               rtol=1e-6)


def test_seqeval_metrics_on_a_known_case():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "I-ORG", "O"], ["I-MISC", "O"]]
    pred = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-ORG", "O", "O"], ["I-MISC", "O"]]
    # Gold entities: PER, LOC, ORG, MISC (IOB1 I- start counts, like conlleval). Predicted: PER (right),
    # LOC (wrong span), ORG (wrong span), MISC (right): precision 2/4, recall 2/4.
    results, report = ner.compute_metrics(gold, pred)
    assert results["precision"] == pytest.approx(0.5) and results["recall"] == pytest.approx(0.5)
    assert results["f1"] == pytest.approx(0.5)
    assert results["accuracy"] == pytest.approx(7 / 10)
    assert results["PER_f1"] == pytest.approx(1.0) and results["LOC_f1"] == 0.0
    assert results["MISC_precision"] == 1.0 and results["ORG_recall"] == 0.0 and results["LOC_support"] == 1
    assert "PER" in report and "micro avg" in report
    with pytest.raises(ValueError, match="differ in length"):
        ner.compute_metrics(gold, pred[:2])


def test_conll_output_and_eval_results_files(tmp_path, conll_file):
    examples = ner.read_conll(conll_file)[1:3]
    text = ner.conll_output(examples, [["B-PER", "O"], ["B-LOC", "B-LOC"]])
    assert text == "Peter B-PER B-PER\nBlackburn I-PER O\n\nBRUSSELS B-LOC B-LOC\n1996-08-22 O B-LOC\n\n"
    path = str(tmp_path / "eval_results.txt")
    result_files.write_eval_results(path, {"eval_f1": 0.5, "global_step": 3, "eval_accuracy": 1.0})
    assert open(path).read() == "eval_accuracy = 1.0\neval_f1 = 0.5\nglobal_step = 3\n"
    assert sorted(os.listdir(tmp_path)) == ["eval_results.txt", "train.txt"]  # no temporary file left


def test_train_records_decode_to_the_features(tmp_path, conll_file, tokenizer):
    examples = ner.read_conll(conll_file)
    features = list(ner.convert_examples_to_features(examples, LABELS, 12, tokenizer))
    task = ner.NerTask(str(tmp_path))
    task.label_list, task.examples = LABELS, {"train": examples}
    run = runner.RunConfig(max_seq_length=12, pad_to_max_seq_length=True)
    data = task.train_data(run, tokenizer, types.SimpleNamespace(work_dir=str(tmp_path)))
    assert data.num_examples == len(features) and data.files == (str(tmp_path / "train.tf_record"),)
    batch_inputs, batch_labels = next(iter(data.dataset_fn(len(features))))
    inputs, labels = ner.features_to_arrays(features)
    order = np.lexsort(inputs["input_ids"].T)
    got = np.lexsort(batch_inputs["input_ids"].numpy().T)
    for name in inputs:
        np.testing.assert_array_equal(batch_inputs[name].numpy()[got], inputs[name][order])
    np.testing.assert_array_equal(batch_labels["label_ids"].numpy()[got], labels["label_ids"][order])
    assert batch_inputs["input_ids"].dtype == tf.int32


# --- the script ------------------------------------------------------------------------------------------------

def _run_script(*args):
    return forkserver.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=REPO)


def _tiny_run(d):
    """CONLL_SAMPLE as train, valid and test files and a tiny model under `d`; the flags of a run training,
    evaluating and predicting them into d/out."""
    data = d / "data"
    data.mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):
        (data / name).write_text(CONLL_SAMPLE)
    return [f"--data_dir={data}", f"--output_dir={d / 'out'}", *tiny_classifier.model_flags(d, VOCAB), "--do_train",
            "--do_eval", "--do_predict", "--max_seq_length=12", "--train_batch_size=4", "--num_train_epochs=2",
            "--learning_rate=1e-3", "--save_checkpoints_steps=100"]


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory, run_main, minilm_release):
    """run_ner.py's `_tiny_run`, then `_pretrained_run`, in one process (tiny_classifier.tiny_and_pretrained_runs)."""
    return tiny_classifier.tiny_and_pretrained_runs(run_main, tmp_path_factory, SCRIPT, _tiny_run, _pretrained_run,
                                                    minilm_release)


@pytest.mark.slow
def test_script_trains_evaluates_and_predicts(script_runs):
    tmp_path = script_runs[0]["tiny"]
    data, out = tmp_path / "data", tmp_path / "out"
    assert json.loads((out / "model_metadata.json").read_text())["labels"] == LABELS
    results = tiny_classifier.eval_results(out)
    _assert_metrics_of_written_predictions(results, (out / "eval_predictions.txt").read_text(),
                                           ner.read_conll(str(data / "valid.txt")))
    tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"))
    windows = list(ner.convert_examples_to_features(ner.read_conll(str(data / "train.txt")), LABELS, 12, tokenizer))
    assert len(windows) > 5  # long sentences were split
    assert results["global_step"] == str(int(len(windows) / 4 * 2))  # steps count windows, as the original does
    assert "micro avg" in (out / "eval_report.txt").read_text()

    examples = ner.read_conll(str(data / "test.txt"))
    lines = (out / "test_results.txt").read_text().split("\n")
    sentences = "\n".join(lines).strip("\n").split("\n\n")
    assert len(sentences) == len(examples)
    for example, block in zip(examples, sentences):
        rows = [row.split(" ") for row in block.split("\n")]
        assert [r[0] for r in rows] == example.words and [r[1] for r in rows] == example.labels
        assert all(len(r) == 3 and r[2] in LABELS for r in rows)
    assert not [f for f in os.listdir(out) if fileio.TEMP_MARK in f]
    _assert_entities_are_the_predictions(out, examples, sentences, tokenizer)

    # Evaluate and predict again from output_dir alone (saved label list and checkpoint; in this process, as the
    # script runs): the same results, the global step read from the checkpoint.
    first = {name: (out / name).read_text() for name in ("test_results.txt", "eval_results.txt")}
    for name in first:
        (out / name).unlink()
    _run(tmp_path, data, out, do_eval=True, do_predict=True, eval_batch_size=3)
    assert (out / "test_results.txt").read_text() == first["test_results.txt"]
    # All but `loss` (the mean of batch means, which depends on the batch size) the same, eval_loss to float32
    # rounding (the examples are batched, so cut, differently).
    again, before = (dict(line.split(" = ") for line in text.splitlines() if not line.startswith("loss ="))
                     for text in ((out / "eval_results.txt").read_text(), first["eval_results.txt"]))
    assert again.keys() == before.keys()
    assert {k: v for k, v in again.items() if k != "eval_loss"} == {k: v for k, v in before.items() if k != "eval_loss"}
    assert float(again["eval_loss"]) == pytest.approx(float(before["eval_loss"]), rel=1e-6)

    # A test label the model does not know is an error naming its file and line, raised before any model work.
    (data / "test.txt").write_text("Paris NNP B-NP B-CITY\n")
    with pytest.raises(ValueError, match=r"test.txt:1: unknown label 'B-CITY' \(word 'Paris'\); the label list "
                                         r"\(.*model_metadata.json\) has B-LOC"):
        _run(tmp_path, data, out, do_predict=True)


def _assert_entities_are_the_predictions(out, examples, sentences, tokenizer):
    """bert_tf.load of the trained run: on each test sentence as raw text (its words joined by spaces; those the
    basic tokenizer splits further left out), the entities of test_results.txt's tags at their place in the text."""
    import bert_tf

    model = bert_tf.load(str(out), batch_size=2)
    texts = [" ".join(example.words) for example in examples]
    answers = model.predict(texts)
    checked = 0
    for text, example, block, answer in zip(texts, examples, sentences, answers):
        words = tokenizer.basic_tokenizer.tokenize_with_offsets(text)
        if [word for word, _, _ in words] != [word.lower() for word in example.words]:
            continue
        tags = [row.split(" ")[2] for row in block.split("\n")]
        expected = ner.entities_from_tags(text, words, tags)
        assert [{k: v for k, v in e.items() if k != "score"} for e in answer["entities"]] == [
            {k: v for k, v in e.items() if k != "score"} for e in expected]
        assert all(text[e["start"]:e["end"]] == e["text"] and 0 < e["score"] <= 1 for e in answer["entities"])
        checked += 1
    assert checked >= 2 and model.predict([""]) == [{"entities": []}]
    # --predict_text_file alone (no labelled test file): predictions.jsonl, a line's answer per line, blank included.
    (out.parent / "texts.txt").write_text("\n".join(texts[:2] + ["", texts[2]]) + "\n")
    _run(out.parent, out.parent / "nowhere", out, predict_text_file=str(out.parent / "texts.txt"))
    with open(out / "predictions.jsonl") as f:
        assert [json.loads(line) for line in f] == model.predict(texts[:2] + ["", texts[2]])


def _assert_metrics_of_written_predictions(results, predictions_text, examples):
    """eval_results.txt against seqeval and NumPy on eval_predictions.txt (`word gold predicted` per line)."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities

    rows = [[line.split(" ") for line in block.split("\n")] for block in predictions_text.strip("\n").split("\n\n")]
    assert [[r[0] for r in sentence] for sentence in rows] == [e.words for e in examples]
    gold, predicted = ([[r[i] for r in sentence] for sentence in rows] for i in (1, 2))
    assert gold == [e.labels for e in examples]
    entities = {name: set(get_entities(labels)) for name, labels in (("gold", gold), ("predicted", predicted))}
    per = {name: {e for e in found if e[0] == "PER"} for name, found in entities.items()}
    per_f1 = 2 * len(per["gold"] & per["predicted"]) / max(len(per["gold"]) + len(per["predicted"]), 1)
    expected = {"eval_precision": precision_score(gold, predicted, zero_division=0),
                "eval_recall": recall_score(gold, predicted, zero_division=0),
                "eval_f1": f1_score(gold, predicted, zero_division=0),
                "eval_accuracy": np.mean(np.concatenate(gold) == np.concatenate(predicted)),
                "eval_PER_f1": per_f1, "eval_ORG_support": 3}  # EU, European Commission, European Union
    for key, value in expected.items():
        assert float(results[key]) == pytest.approx(value), key
    assert float(results["eval_loss"]) > 0 and float(results["loss"]) > 0


def _run(tmp_path, data, out, **settings):
    """Runs the NER task as run_ner.py does, with the tiny model files of tmp_path (max_seq_length 12)."""
    run_config = runner.RunConfig(**{**dict(output_dir=str(out), vocab_file=str(tmp_path / "vocab.txt"),
                                            bert_config_file=str(tmp_path / "bert_config.json"), max_seq_length=12),
                                     **settings})
    return runner.run(ner.NerTask(data_dir=str(data)), run_config)


def test_script_flags_and_errors(tmp_path):
    result = _run_script("--helpfull")
    for flag in ("data_dir", "label_list", "bert_config_file", "vocab_file", "init_checkpoint", "do_lower_case",
                 "max_seq_length", "do_train", "do_eval", "do_predict", "train_batch_size", "eval_batch_size",
                 "predict_batch_size", "learning_rate", "num_train_epochs", "warmup_proportion", "output_dir",
                 "save_checkpoints_steps", "use_tpu"):
        assert f"  --{flag}:" in result.stdout or f"  --[no]{flag}:" in result.stdout, flag

    data = tmp_path / "data"
    data.mkdir()
    tiny_classifier.model_flags(tmp_path, VOCAB)
    (data / "train.txt").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP\n")
    with pytest.raises(ValueError, match="train.txt:2: malformed line 'rejects VBZ B-VP'"):
        _run(tmp_path, data, tmp_path / "out", do_train=True)
    with pytest.raises(ValueError, match="At least one of `do_train`, `do_eval` or `do_predict' must be True"):
        _run(tmp_path, data, tmp_path / "out")
    with pytest.raises(ValueError, match="Cannot use sequence length 128 because the BERT model was only trained up "
                                         "to sequence length 64"):
        _run(tmp_path, data, tmp_path / "out", do_train=True, max_seq_length=128)
    (data / "train.txt").write_text("EU NNP B-NP B-ORG\n")
    with pytest.raises(FileNotFoundError, match="No dev set in .*data: expected valid.txt or dev.txt"):
        _run(tmp_path, data, tmp_path / "out", do_train=True, do_eval=True)
    # A dev label that train.txt lacks: an error naming the file, line and label before any training output.
    (data / "valid.txt").write_text("EU NNP B-NP B-ORG\nParis NNP B-NP B-LOC\n")
    with pytest.raises(ValueError, match=r"valid.txt:2: unknown label 'B-LOC' \(word 'Paris'\); the label list "
                                         r"\(.*train.txt; --label_list can name labels train.txt lacks\)"):
        _run(tmp_path, data, tmp_path / "out", do_train=True, do_eval=True)
    assert not (tmp_path / "out" / "train.tf_record").exists() and not (tmp_path / "out" / "checkpoint").exists()


# --- a real model on realistic data ----------------------------------------------------------------------------

_PEOPLE = ["Peter Blackburn", "Werner Zwingmann", "Franz Fischler", "Bill Clinton", "Boris Yeltsin",
           "Jacques Chirac", "Helmut Kohl", "Steffi Graf", "Nelson Mandela", "Yasser Arafat", "Tony Blair",
           "Pete Sampras", "Martina Hingis", "Alan Shearer", "Benjamin Netanyahu", "Hillary Clinton"]
_PLACES = ["Germany", "Britain", "France", "Brussels", "London", "Moscow", "Bonn", "New York", "Sri Lanka",
           "South Africa", "Paris", "Japan", "Chicago", "Jerusalem", "Australia", "Bosnia"]
_ORGS = ["European Commission", "European Union", "Reuters", "NATO", "United Nations", "Bank of England", "Ford",
         "Manchester United", "Microsoft", "Interfax", "Moody 's", "Boeing", "Bundesbank", "IBM", "Lufthansa", "PLO"]
_MISC = ["German", "British", "French", "Russian", "Olympic", "English", "Japanese", "Israeli", "Palestinian",
         "American", "Australian", "Italian", "Dutch", "Chinese", "Irish", "Iraqi"]
_TEMPLATES = [
    "{PER} said on Thursday that {ORG} would open an office in {LOC} .",
    "{ORG} shares fell 3 percent in {LOC} on Monday .",
    "{MISC} officials met {PER} in {LOC} .",
    "{PER} , a spokesman for {ORG} , told reporters in {LOC} .",
    "The {MISC} government said {ORG} had no plans to cut jobs .",
    "{LOC} beat {LOC} 2-1 in a friendly match .",
    "{PER} won the {MISC} Open title .",
    "Police in {LOC} arrested two {MISC} men .",
    "{ORG} reported a net profit of 120 million dollars .",
    "Talks between {PER} and {PER} ended without agreement .",
]


def _news_conll(rng, num_sentences, pools):
    """CoNLL-2003-style sentences from news templates, entities drawn from `pools` (IOB2 tags)."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(num_sentences):
        for token in rng.choice(_TEMPLATES).split():
            kind = token[1:-1] if token.startswith("{") else None
            words = rng.choice(pools[kind]).split() if kind else [token]
            for i, word in enumerate(words):
                lines.append(f"{word} NNP B-NP {('B-' if i == 0 else 'I-') + kind if kind else 'O'}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _pretrained_run(d, minilm_release):
    """News sentences (`_news_conll`) under `d`: 64 to train on, 24 to evaluate on whose entity names are held out
    of training; the flags of a run fine-tuning MiniLM on them for 24 steps into d/out."""
    pools = dict(PER=_PEOPLE, LOC=_PLACES, ORG=_ORGS, MISC=_MISC)
    rng = random.Random(0)
    data = d / "data"
    data.mkdir()
    (data / "train.txt").write_text(_news_conll(rng, 64, {k: v[:10] for k, v in pools.items()}))
    (data / "valid.txt").write_text(_news_conll(rng, 24, {k: v[10:] for k, v in pools.items()}))
    return [f"--data_dir={data}", f"--output_dir={d / 'out'}", f"--vocab_file={minilm_release}/vocab.txt",
            f"--bert_config_file={minilm_release}/bert_config.json",
            f"--init_checkpoint={minilm_release}/bert_model.ckpt", "--do_train", "--do_eval", "--max_seq_length=24",
            "--train_batch_size=8", "--eval_batch_size=24", "--num_train_epochs=3", "--learning_rate=1e-4",
            "--seed=0"]


@pytest.mark.slow
def test_pretrained_model_learns_entities_it_has_not_seen(script_runs):
    """MiniLM (a real pre-trained BERT) fine-tuned for 24 steps tags entity names held out of training."""
    dirs, logs = script_runs
    data, out = dirs["pretrained"] / "data", dirs["pretrained"] / "out"
    assert "not in checkpoint (newly initialized): cls/ner/output_weights" in logs
    results = tiny_classifier.eval_results(out)
    assert results["global_step"] == "24"
    assert float(results["eval_f1"]) > 0.6, results  # 0.88 with --seed=0 (CPU); all O scores 0
    # bert_tf.load of the run on the dev sentences as raw text: the entities (spans) of the run's predicted tags, and
    # against the gold spans the run's entity F1.
    import bert_tf

    examples = ner.read_conll(str(data / "valid.txt"))
    texts = [" ".join(example.words) for example in examples]
    blocks = (out / "eval_predictions.txt").read_text().strip("\n").split("\n\n")
    got, found, gold = set(), set(), set()
    for i, (text, example, block, answer) in enumerate(zip(texts, examples, blocks, bert_tf.load(str(out)).predict(
            texts))):
        ends = np.cumsum([len(word) + 1 for word in example.words]) - 1  # the CoNLL words' spans in the text
        words = [(word, end - len(word), end) for word, end in zip(example.words, ends)]
        predicted = [row.split(" ")[2] for row in block.split("\n")]
        got |= {(i, e["type"], e["start"], e["end"]) for e in answer["entities"]}
        found |= {(i, e["type"], e["start"], e["end"]) for e in ner.entities_from_tags(text, words, predicted)}
        gold |= {(i, e["type"], e["start"], e["end"]) for e in ner.entities_from_tags(text, words, example.labels)}
    assert got == found and got
    assert 2 * len(got & gold) / (len(got) + len(gold)) == pytest.approx(float(results["eval_f1"]), abs=1e-6)
