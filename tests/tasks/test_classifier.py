"""run_classifier: processors on GLUE-format files, feature packing, TFRecords, metrics, outputs, the script end to
end on a tiny model, and the original's MRPC predictions on the golden checkpoint."""
import collections
import csv
import dataclasses
import json
import os
import random
import shutil
import sys
import types

import forkserver
import numpy as np
import pytest
import tensorflow as tf
from tiny_classifier import REPO, SCRIPT, VOCAB, WORDS, write_mrpc
from tiny_classifier import random_sentence as _sentence
from tiny_classifier import tsv_line as _tsv
from tiny_classifier import write_lines as _write
from tiny_classifier import write_tiny_model as _tiny_model

from bert_tf import fileio
from bert_tf.model import encoder
from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertClassifier
from bert_tf.tasks import classifier as clf
from bert_tf.tasks import result_files, runner
from bert_tf.tasks.classifier import processors
from bert_tf.text import tokenization


@pytest.fixture
def tokenizer(tmp_path):
    vocab_file = _write(str(tmp_path / "vocab.txt"), VOCAB)
    return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def _summary(examples):
    return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


def _count_reads(monkeypatch):
    """Counts the reads of each tab-separated file by its name (every processor reads through `read_tsv`)."""
    reads, read_tsv = collections.Counter(), processors.read_tsv

    def counted(input_file, *args, **kwargs):
        reads[os.path.basename(input_file)] += 1
        return read_tsv(input_file, *args, **kwargs)

    monkeypatch.setattr(processors, "read_tsv", counted)
    return reads


# --- reading ---------------------------------------------------------------------------------------------------

def test_read_tsv_has_no_quote_character_and_keeps_line_numbers(tmp_path):
    path = _write(str(tmp_path / "x.tsv"), ['a\t"b\tc"', "", "d\te\r"])
    lines = clf.read_tsv(path)
    assert lines == [["a", '"b', 'c"'], [], ["d", "e"]]  # quotes are plain characters; "\r\n" ends a line
    assert [line.source for line in lines] == [f"{path}:1", f"{path}:2", f"{path}:3"]
    with pytest.raises(ValueError, match=r"x\.tsv:2: expected at least 1 tab-separated fields, found 0"):
        lines[1].field(0)
    with pytest.raises(ValueError, match=r"x\.tsv:3: expected at least 4 "):
        lines[2].field(3)


def test_read_tsv_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        clf.read_tsv(str(tmp_path / "nope.tsv"))
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"ok\tfine\nstill\tok\nbroken \xff here\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:3: not valid UTF-8"):
        clf.read_tsv(str(bad))
    lone_cr = _write(str(tmp_path / "cr.tsv"), ["a\tb", "c\rd\te"])
    with pytest.raises(ValueError, match=r"cr\.tsv:2: "):
        clf.read_tsv(lone_cr)


def test_read_tsv_takes_a_field_longer_than_csvs_limit(tmp_path):
    long_text = "word " * 60000  # 300 kB: csv's default limit is 128 KiB
    path = _write(str(tmp_path / "long.tsv"), ["text_a\tlabel", f"{long_text}\tpos"])
    limit = csv.field_size_limit()
    assert clf.read_tsv(path)[1] == [long_text, "pos"]
    assert csv.field_size_limit() == limit  # restored


# --- the original's processors ------------------------------------------------------------------------------------

def test_mrpc_processor(tmp_path):
    d = str(tmp_path)
    header = _tsv("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
    _write(f"{d}/train.tsv", [header, _tsv(1, 702876, 702977, 'He said "no".', "He refused."),
                              _tsv(0, 2108705, 2108831, "Yucaipa owned it.", "Yucaipa sold it.")])
    _write(f"{d}/dev.tsv", [header, _tsv(1, 1, 2, "A b.", "C d.")])
    _write(f"{d}/test.tsv", [_tsv("index", "#1 ID", "#2 ID", "#1 String", "#2 String"),
                             _tsv(0, 1089874, 1089925, "PCCW's chief.", "The chief."),
                             _tsv(1, 3019446, 3019327, "Shares rose.", "Stocks rose.")])
    p = clf.get_processor("MRPC")
    assert p.get_labels() == ["0", "1"] and not p.is_regression
    assert _summary(p.get_train_examples(d)) == [("train-1", 'He said "no".', "He refused.", "1"),
                                                 ("train-2", "Yucaipa owned it.", "Yucaipa sold it.", "0")]
    assert _summary(p.get_dev_examples(d)) == [("dev-1", "A b.", "C d.", "1")]
    test = p.get_test_examples(d)
    assert _summary(test) == [("test-1", "PCCW's chief.", "The chief.", "0"),
                              ("test-2", "Shares rose.", "Stocks rose.", "0")]
    assert [e.example_id for e in test] == ["0", "1"]
    assert test[0].source.endswith("test.tsv:2")
    [(suffix, examples, name)] = p.test_splits(d)
    assert (suffix, name, len(examples)) == ("", "MRPC", 2)


def test_mrpc_short_line_is_reported(tmp_path):
    d = str(tmp_path)
    _write(f"{d}/train.tsv", [_tsv("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
                              _tsv(1, 1, 2, "only one sentence")])
    with pytest.raises(ValueError, match=r"train\.tsv:2: expected at least 5 tab-separated fields, found 4"):
        clf.MrpcProcessor().get_train_examples(d)


def test_cola_processor_headers_only_in_test(tmp_path):
    d = str(tmp_path)
    _write(f"{d}/train.tsv", [_tsv("gj04", 1, "", "Our friends won't buy this analysis."),
                              _tsv("gj04", 0, "*", "They drank the pub.")])
    _write(f"{d}/dev.tsv", [_tsv("gj04", 1, "", "The sailors rode the breeze.")])
    _write(f"{d}/test.tsv", [_tsv("index", "sentence"), _tsv(0, "Bill whistled past the house.")])
    p = clf.ColaProcessor()
    assert _summary(p.get_train_examples(d)) == [("train-0", "Our friends won't buy this analysis.", None, "1"),
                                                 ("train-1", "They drank the pub.", None, "0")]
    assert _summary(p.get_dev_examples(d)) == [("dev-0", "The sailors rode the breeze.", None, "1")]
    assert _summary(p.get_test_examples(d)) == [("test-1", "Bill whistled past the house.", None, "0")]
    assert p.submission_name == "CoLA"


def _mnli_row(index, s1, s2, *labels):
    return _tsv(index, 31193, f"{31193}n", "government", "( ( x ) )", "( ( y ) )", "(ROOT x)", "(ROOT y)", s1, s2,
                *labels)


def test_mnli_processor_matched_and_mismatched(tmp_path):
    d = str(tmp_path)
    header = _tsv("index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                  "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label")
    _write(f"{d}/train.tsv", [header, _mnli_row(0, "Conceptually cream.", "Product and geography.", "neutral",
                                                "neutral"),
                              _mnli_row(1, "You know.", "You lose.", "entailment", "entailment")])
    dev_header = header.replace("label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
    _write(f"{d}/dev_matched.tsv", [dev_header, _mnli_row(7, "The new rights.", "Everyone likes.", "neutral",
                                                          "contradiction", "neutral", "neutral", "neutral",
                                                          "neutral")])
    test_header = _tsv(*header.split("\t")[:10])
    _write(f"{d}/test_matched.tsv", [test_header, _mnli_row(0, "Hierbas.", "Hierbas is a name.")])
    p = clf.MnliProcessor()
    assert p.get_labels() == ["contradiction", "entailment", "neutral"]
    assert _summary(p.get_train_examples(d)) == [
        ("train-0", "Conceptually cream.", "Product and geography.", "neutral"),
        ("train-1", "You know.", "You lose.", "entailment")]
    assert _summary(p.get_dev_examples(d)) == [("dev_matched-7", "The new rights.", "Everyone likes.", "neutral")]
    assert _summary(p.get_test_examples(d)) == [("test-0", "Hierbas.", "Hierbas is a name.", "contradiction")]
    # Without the mismatched files only the matched sets are used.
    assert [s for s, _ in p.dev_splits(d)] == [""]
    assert [(s, name) for s, _, name in p.test_splits(d)] == [("", "MNLI-m")]
    _write(f"{d}/dev_mismatched.tsv", [dev_header, _mnli_row(3, "Your contribution.", "Gift.", "entailment",
                                                             "entailment", "entailment", "entailment",
                                                             "entailment", "entailment")])
    _write(f"{d}/test_mismatched.tsv", [test_header, _mnli_row(9, "What a day.", "Bad day.")])
    splits = p.dev_splits(d)
    assert [s for s, _ in splits] == ["", "_mm"]
    assert _summary(splits[1][1]) == [("dev_mismatched-3", "Your contribution.", "Gift.", "entailment")]
    tests = p.test_splits(d)
    assert [(s, name) for s, _, name in tests] == [("", "MNLI-m"), ("_mm", "MNLI-mm")]
    assert _summary(tests[1][1]) == [("test_mismatched-9", "What a day.", "Bad day.", "contradiction")]
    assert tests[1][1][0].example_id == "9"
    # Evaluation while training records the matched dev set's keys, and the mismatched one's with its suffix
    results = {"": {"eval_accuracy": 0.5, "global_step": 4}, "_mm": {"eval_accuracy": 0.25, "global_step": 4}}
    assert clf.ClassifierTask("MNLI", d).flat_results(results) == {"eval_accuracy": 0.5, "global_step": 4,
                                                                   "eval_accuracy_mm": 0.25}


def test_xnli_processor(tmp_path):
    d = str(tmp_path)
    _write(f"{d}/multinli/multinli.train.zh.tsv", [_tsv("premise", "hypo", "label"),
                                                    _tsv("从概念上看", "产品和地理", "neutral"),
                                                    _tsv("你知道", "你输了", "contradictory")])
    cols = ["language", "gold_label", "s1bp", "s2bp", "s1p", "s2p", "sentence1", "sentence2", "promptID"]
    _write(f"{d}/xnli.dev.tsv", [_tsv(*cols),
                                 _tsv("en", "neutral", "", "", "", "", "He said.", "He went.", 1),
                                 _tsv("zh", "contradiction", "", "", "", "", "他说", "他走了", 1),
                                 _tsv("zh", "entailment", "", "", "", "", "好", "很好", 2)])
    p = clf.get_processor("xnli")
    assert p.language == "zh" and p.get_labels() == ["contradiction", "entailment", "neutral"]
    assert _summary(p.get_train_examples(d)) == [("train-1", "从概念上看", "产品和地理", "neutral"),
                                                 ("train-2", "你知道", "你输了", "contradiction")]
    # The guid counts every line, including those of other languages.
    assert _summary(p.get_dev_examples(d)) == [("dev-2", "他说", "他走了", "contradiction"),
                                               ("dev-3", "好", "很好", "entailment")]
    assert _summary(clf.get_processor("XNLI", xnli_language="en").get_dev_examples(d)) == [
        ("dev-1", "He said.", "He went.", "neutral")]
    with pytest.raises(ValueError, match="Task Xnli has no test set \\(drop --do_predict\\)"):
        p.get_test_examples(d)


# --- the other GLUE tasks ------------------------------------------------------------------------------------

GLUE_LAYOUTS = {
    # task: (train header + row, expected train example, test header + row, expected test example, submission)
    "sst-2": ([_tsv("sentence", "label"), _tsv("hide new secretions ", 0)],
              ("train-1", "hide new secretions ", None, "0"),
              [_tsv("index", "sentence"), _tsv(0, "uneasy mishmash")], ("test-1", "uneasy mishmash", None, "0"),
              "SST-2"),
    "qqp": ([_tsv("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
             _tsv(133273, 213221, 213222, "How is the life?", "How to be a good one?", 1)],
            ("train-133273", "How is the life?", "How to be a good one?", "1"),
            [_tsv("id", "question1", "question2"), _tsv(4, "Why?", "Why not?")], ("test-4", "Why?", "Why not?", "0"),
            "QQP"),
    "qnli": ([_tsv("index", "question", "sentence", "label"), _tsv(0, "When?", "In 1851.", "entailment")],
             ("train-0", "When?", "In 1851.", "entailment"),
             [_tsv("index", "question", "sentence"), _tsv(5, "Who?", "Him.")],
             ("test-5", "Who?", "Him.", "entailment"), "QNLI"),
    "rte": ([_tsv("index", "sentence1", "sentence2", "label"), _tsv(0, "No weapons.", "Found.", "not_entailment")],
            ("train-0", "No weapons.", "Found.", "not_entailment"),
            [_tsv("index", "sentence1", "sentence2"), _tsv(2, "Mangla.", "Dam.")],
            ("test-2", "Mangla.", "Dam.", "entailment"), "RTE"),
    "wnli": ([_tsv("index", "sentence1", "sentence2", "label"), _tsv(0, "I stuck a pin.", "I stuck it.", 1)],
             ("train-0", "I stuck a pin.", "I stuck it.", "1"),
             [_tsv("index", "sentence1", "sentence2"), _tsv(3, "Tom.", "He.")], ("test-3", "Tom.", "He.", "0"),
             "WNLI"),
}


@pytest.mark.parametrize("task", sorted(GLUE_LAYOUTS))
def test_glue_processors(task, tmp_path):
    d = str(tmp_path)
    train_lines, train_expected, test_lines, test_expected, submission = GLUE_LAYOUTS[task]
    _write(f"{d}/train.tsv", train_lines)
    _write(f"{d}/dev.tsv", train_lines)
    _write(f"{d}/test.tsv", test_lines)
    p = clf.get_processor(task.upper())
    assert _summary(p.get_train_examples(d)) == [train_expected]
    assert _summary(p.get_dev_examples(d)) == [(train_expected[0].replace("train", "dev"),) + train_expected[1:]]
    test = p.get_test_examples(d)
    assert _summary(test) == [test_expected]
    assert test[0].example_id == test_lines[1].split("\t")[0]
    assert p.submission_name == submission and not p.is_regression
    assert train_expected[3] in p.get_labels()


def test_stsb_processor_is_regression(tmp_path):
    d = str(tmp_path)
    header = _tsv("index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                  "sentence2", "score")
    _write(f"{d}/train.tsv", [header, _tsv(0, "main-captions", "MSRvid", "2012test", 1, "none", "none",
                                           "A plane is taking off.", "An air plane is taking off.", "5.000")])
    _write(f"{d}/test.tsv", [_tsv(*header.split("\t")[:9]),
                             _tsv(0, "main-news", "headlines", "2016", 1, "none", "none", "Girl.", "Boy.")])
    _write(f"{d}/dev.tsv", [header, _tsv(0, "g", "f", "y", 1, "s", "s", "A.", "B.", "four")])
    p = clf.get_processor("STS-B")
    assert p.is_regression and p.get_labels() is None and p.submission_name == "STS-B"
    assert _summary(p.get_train_examples(d)) == [
        ("train-0", "A plane is taking off.", "An air plane is taking off.", 5.0)]
    assert _summary(p.get_test_examples(d)) == [("test-0", "Girl.", "Boy.", 0.0)]
    with pytest.raises(ValueError, match=r"dev\.tsv:2: the STS-B score 'four' is not a number"):
        p.get_dev_examples(d)
    assert isinstance(clf.get_processor("stsb"), clf.StsbProcessor)


def test_regression_labels_must_be_finite_numbers(tmp_path):
    """A "nan" or "inf" score is refused when the file is read, naming its line; a regression label of any
    processor is checked again when it becomes a feature."""
    row = _tsv(0, "g", "f", "y", 1, "s", "s", "A.", "B.")
    for value in ("nan", "-inf"):
        _write(str(tmp_path / "train.tsv"), [_tsv(*range(10)), row + "\t2.5", row + f"\t{value}"])
        with pytest.raises(ValueError, match=rf"train\.tsv:3: the STS-B score '{value}' is not a finite number"):
            clf.get_processor("sts-b").get_train_examples(str(tmp_path))
    example = clf.InputExample("own-1", "A.", label=float("inf"), source="own.tsv:7")
    with pytest.raises(ValueError, match=r"own\.tsv:7: the label inf is not a finite number"):
        clf.example_label_id(example, None)


class _OwnProcessor(clf.DataProcessor):
    def get_labels(self):
        return ["b", "a"]


def test_unknown_task_lists_the_known_ones_and_registered_ones():
    with pytest.raises(ValueError, match="Task not found: foo. Known tasks: cola, mnli, mrpc, xnli, sst-2, qqp, "
                                         "qnli, rte, sts-b, wnli, tsv, csv, jsonl.$"):
        clf.get_processor("foo")
    try:
        assert clf.register_processor(" My-Task", _OwnProcessor) is _OwnProcessor
        clf.register_processor("my-task", _OwnProcessor)  # again: the same class, nothing changes
        assert isinstance(clf.get_processor("MY-TASK"), _OwnProcessor)
        with pytest.raises(ValueError, match=r"Known tasks: cola, .*, jsonl, my-task\.$"):
            clf.get_processor("foo")
        for taken, owner in (("MRPC", "MrpcProcessor"), ("sst2", "Sst2Processor"), ("my-task", "_OwnProcessor")):
            with pytest.raises(ValueError, match=f"the task name '{taken}' is taken by {owner}; choose another"):
                clf.register_processor(taken, type("Other", (clf.DataProcessor,), {}))
        with pytest.raises(ValueError, match="the task name ' ' is empty"):
            clf.register_processor(" ", _OwnProcessor)
        with pytest.raises(TypeError, match="expected a DataProcessor subclass, got <class 'object'>"):
            clf.register_processor("other", object)
    finally:
        clf.PROCESSORS.pop("my-task", None)


# --- the tsv task ------------------------------------------------------------------------------------------------

def _tsv_data(d, test_has_label=False):
    _write(f"{d}/train.tsv", [_tsv("id", "label", "text_a", "text_b"), _tsv("a1", "pos", "good cat", "yes"),
                              _tsv("a2", "neg", "bad dog", ""), _tsv("a3", "mixed", "ok", "no"),
                              _tsv("a4", "pos", "happy", "yes")])
    _write(f"{d}/dev.tsv", [_tsv("text_a", "text_b", "label", "note"), _tsv("sad dog", "no", "neg", "x")])
    test_header = ["text_a", "id"] + (["label"] if test_has_label else [])
    test_row = ["big cat", "t9"] + (["whatever"] if test_has_label else [])
    _write(f"{d}/test.tsv", [_tsv(*test_header), _tsv(*test_row)])


def test_tsv_task_labels_learned_saved_and_reused(tmp_path):
    data, out = str(tmp_path / "data"), str(tmp_path / "out")
    os.makedirs(out)
    _tsv_data(data, test_has_label=True)
    p = clf.get_processor("tsv")
    with pytest.raises(ValueError, match="model_metadata.json not found"):
        clf.prepare_label_list(p, data, out, do_train=False)
    assert clf.prepare_label_list(p, data, out, do_train=True) == ["mixed", "neg", "pos"]
    assert os.listdir(out) == []  # a training run records them (test_script_tsv_task_then_predict_only_run)
    _write(os.path.join(out, "label_list.txt"), ["mixed", "neg", "pos"])  # by hand: a model trained elsewhere
    train = p.get_train_examples(data)
    assert _summary(train)[:2] == [("train-a1", "good cat", "yes", "pos"), ("train-a2", "bad dog", "", "neg")]
    assert [e.example_id for e in train] == ["a1", "a2", "a3", "a4"]
    assert _summary(p.get_dev_examples(data)) == [("dev-0", "sad dog", "no", "neg")]  # no id column: row number

    fresh = clf.get_processor("TSV")
    assert clf.prepare_label_list(fresh, data, out, do_train=False) == ["mixed", "neg", "pos"]
    test = fresh.get_test_examples(data)
    assert _summary(test) == [("test-t9", "big cat", None, "mixed")]  # test labels are ignored
    # The empty text_b of a2 means a single sentence.
    features = clf.convert_single_example(0, train[1], fresh.get_labels(), 8, _tiny_tokenizer(tmp_path))
    assert features.segment_ids == [0] * 8 and features.label_id == 1

    _write(f"{data}/train.tsv", [_tsv("label", "text_a"), _tsv("other", "x")])
    with pytest.raises(ValueError, match="lists the labels"):
        clf.prepare_label_list(clf.get_processor("tsv"), data, out, do_train=True)


def test_a_run_reads_each_tsv_file_once(tmp_path, tokenizer, monkeypatch):
    """The tsv task's run learns its labels from the training examples it trains on (the chief saves them with its
    training data), and keeps the dev and test sets it reads (and checks) before any model work for its evaluation
    and prediction."""
    data, out = str(tmp_path / "data"), str(tmp_path / "out")
    os.makedirs(out)
    _tsv_data(data)
    reads = _count_reads(monkeypatch)
    task = clf.ClassifierTask("tsv", data)
    run = runner.RunConfig(None, None, out, max_seq_length=8, do_train=True, do_eval=True, do_predict=True)
    task.read_inputs(run, None)
    assert os.listdir(out) == []  # nothing written before the model is built
    chief = types.SimpleNamespace(is_chief=True, work_dir=out)  # what the task reads of its Trainer
    assert task.train_data(run, tokenizer, chief).num_examples == 4 and task.label_list == ["mixed", "neg", "pos"]
    assert not [n for n in os.listdir(out) if fileio.TEMP_MARK in n]
    assert [len(examples) for _, examples in task.dev_splits] == [1]
    assert [(len(examples), name) for _, examples, name in task.test_splits] == [(1, "predictions")]
    assert reads == {"train.tsv": 1, "dev.tsv": 1, "test.tsv": 1}


def _tiny_tokenizer(tmp_path):
    return tokenization.FullTokenizer(_write(str(tmp_path / "tiny_vocab.txt"), VOCAB), do_lower_case=True)


def test_tsv_task_errors(tmp_path):
    d = str(tmp_path)
    p = clf.TsvProcessor(labels=["neg", "pos"])
    _write(f"{d}/dev.tsv", [_tsv("text_a", "label"), _tsv("good", "pos"), _tsv("meh", "neutral")])
    examples = p.get_dev_examples(d)
    with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'neutral' is not in the label list \['neg', 'pos'\]"):
        clf.convert_examples_to_features(examples, p.get_labels(), 8, _tiny_tokenizer(tmp_path))
    with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'neutral' is not in the label list \['neg', 'pos'\]"):
        clf.check_dev_labels(p.dev_splits(d), p.get_labels())
    _write(f"{d}/train.tsv", [_tsv("sentence", "label"), _tsv("good", "pos")])
    with pytest.raises(ValueError, match=r"train\.tsv:1: the header .* lacks the column\(s\) text_a"):
        p.get_train_examples(d)
    _write(f"{d}/train.tsv", [_tsv("text_a", "label"), _tsv("good", "pos"), _tsv("too", "many", "fields")])
    with pytest.raises(ValueError, match=r"train\.tsv:3: 3 tab-separated fields, but the header names 2"):
        p.get_train_examples(d)
    _write(f"{d}/test.tsv", [])
    with pytest.raises(ValueError, match=r"test\.tsv: empty file"):
        p.get_test_examples(d)
    with pytest.raises(FileNotFoundError, match="train.tsv"):
        clf.TsvProcessor().learn_labels(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="label list is not known yet"):
        clf.TsvProcessor().get_labels()


def test_glue_label_not_in_list_names_file_and_line(tmp_path, tokenizer):
    d = str(tmp_path)
    _write(f"{d}/dev.tsv", [_tsv("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), _tsv(1, 1, 2, "a", "b"),
                            _tsv(2, 1, 2, "a", "b")])
    p = clf.MrpcProcessor()
    with pytest.raises(ValueError, match=r"dev\.tsv:3: label '2' is not in the label list \['0', '1'\]"):
        clf.convert_examples_to_features(p.get_dev_examples(d), p.get_labels(), 16, tokenizer)


# --- features ----------------------------------------------------------------------------------------------------

def _reference_features(example, label_list, max_seq_length, tokenizer):
    """The original's packing, transcribed step by step (one token popped at a time)."""
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if tokens_b:
        while len(tokens_a) + len(tokens_b) > max_seq_length - 3:
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + (tokens_b + ["[SEP]"] if tokens_b else [])
    segments = [0] * (len(tokens_a) + 2) + ([1] * (len(tokens_b) + 1) if tokens_b else [])
    ids = tokenizer.convert_tokens_to_ids(tokens)
    pad = max_seq_length - len(ids)
    return (ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad, label_list.index(example.label))


def test_convert_single_example_known_cases(tokenizer):
    v = {t: i for i, t in enumerate(VOCAB)}
    cls, sep = v["[CLS]"], v["[SEP]"]
    labels = ["0", "1"]
    single = clf.convert_single_example(0, clf.InputExample("g", "The cat sat.", None, "1"), labels, 8, tokenizer)
    assert single == clf.InputFeatures([cls, v["the"], v["cat"], v["sat"], v["."], sep, 0, 0],
                                       [1, 1, 1, 1, 1, 1, 0, 0], [0] * 8, 1, True)
    pair = clf.convert_single_example(0, clf.InputExample("g", "unwanted", "Running dog", "0"), labels, 10,
                                      tokenizer)
    assert pair.input_ids == [cls, v["un"], v["##want"], v["##ed"], sep, v["runn"], v["##ing"], v["dog"], sep, 0]
    assert pair.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    assert pair.input_mask == [1] * 9 + [0] and pair.label_id == 0
    # Truncation: a single text keeps max-2 tokens; a pair pops from the longer side (b on ties).
    cut = clf.convert_single_example(0, clf.InputExample("g", "a b c d e f", None, "0"), labels, 5, tokenizer)
    assert cut.input_ids == [cls, v["a"], v["[UNK]"], v["[UNK]"], sep]
    tie = clf.convert_single_example(0, clf.InputExample("g", "the cat sat", "a dog ran", "0"), labels, 7,
                                     tokenizer)
    assert tie.input_ids == [cls, v["the"], v["cat"], sep, v["a"], v["dog"], sep]
    longer_a = clf.convert_single_example(0, clf.InputExample("g", "the big red cat sat", "a dog", "0"), labels,
                                          8, tokenizer)
    assert longer_a.input_ids == [cls, v["the"], v["big"], v["red"], sep, v["a"], v["dog"], sep]
    # A text_b that tokenizes to nothing makes a single-text example (cut to max-2, not max-3).
    empty_b = clf.convert_single_example(0, clf.InputExample("g", "a b c d", "   ", "0"), labels, 5, tokenizer)
    assert empty_b.input_ids == [cls, v["a"], v["[UNK]"], v["[UNK]"], sep] and empty_b.segment_ids == [0] * 5
    padding = clf.convert_single_example(0, clf.PaddingInputExample(), labels, 6, tokenizer)
    assert padding == clf.InputFeatures([0] * 6, [0] * 6, [0] * 6, 0, False)
    regression = clf.convert_single_example(0, clf.InputExample("g", "yes", "no", 3.8), None, 6, tokenizer)
    assert regression.label_id == 3.8 and regression.segment_ids == [0, 0, 0, 1, 1, 0]
    assert clf.convert_single_example(0, clf.PaddingInputExample(), None, 4, tokenizer).label_id == 0.0


def test_convert_single_example_matches_the_original_rule_on_random_pairs(tokenizer):
    rng = random.Random(3)
    pool = WORDS[:22] + ["unwanted", "running", "xyz", ",", "?"]
    for _ in range(300):
        text_a = " ".join(rng.choice(pool) for _ in range(rng.randint(0, 12)))
        text_b = " ".join(rng.choice(pool) for _ in range(rng.randint(0, 12))) if rng.random() < 0.7 else None
        example = clf.InputExample("g", text_a, text_b, rng.choice(["0", "1"]))
        max_len = rng.randint(3, 20)
        got = clf.convert_single_example(5, example, ["0", "1"], max_len, tokenizer)
        assert (got.input_ids, got.input_mask, got.segment_ids, got.label_id) == _reference_features(
            example, ["0", "1"], max_len, tokenizer), (text_a, text_b, max_len)
        assert len(got.input_ids) == max_len and got.is_real_example


def test_whole_batches_are_filled_with_padding_examples(tmp_path, tokenizer):
    examples = [clf.InputExample(str(i), "a", label="0") for i in range(5)]
    path = str(tmp_path / "eval.tf_record")
    padded, written = clf.file_based_convert_examples_to_features(examples, ["0"], 8, tokenizer, path, fill_batches=4)
    assert written.count == len(padded) == 8 and [f.is_real_example for f in padded] == [True] * 5 + [False] * 3
    assert padded[5:] == [clf.convert_single_example(0, clf.PaddingInputExample(), ["0"], 8, tokenizer)] * 3
    assert len(clf.file_based_convert_examples_to_features(examples[:4], ["0"], 8, tokenizer, path,
                                                           fill_batches=4)[0]) == 4


# --- TFRecords --------------------------------------------------------------------------------------------------

def test_cut_texts_are_counted_and_said_once(tmp_path, tokenizer, caplog):
    examples = [clf.InputExample("a", "the cat sat on the mat", "a dog", "pos"),  # 8 tokens, 6 fit: 2 cut
                clf.InputExample("b", "bad dog", None, "neg"), clf.InputExample("c", "a dog", "a cat", "pos")]
    clf.file_based_convert_examples_to_features(examples, ["neg", "pos"], 9, tokenizer,
                                                str(tmp_path / "train.tf_record"))
    assert [r.getMessage() for r in caplog.records if "cut" in r.getMessage()] == [
        "train.tf_record: 1 of 3 texts (33.3%) were longer than max_seq_length 9 and were cut, losing 25.0% of "
        "their tokens; --doc_stride keeps them whole, in windows (or a larger --max_seq_length)."]


@pytest.mark.parametrize("regression", [False, True])
def test_tfrecord_schema_round_trip(tmp_path, tokenizer, regression):
    labels = None if regression else ["neg", "pos"]
    examples = [clf.InputExample("a", "the cat sat", "a dog", 1.5 if regression else "pos"),
                clf.InputExample("b", "bad dog", None, 4.0 if regression else "neg"),
                clf.InputExample("c", "happy", "sad", 0.25 if regression else "pos")]
    (tmp_path / "records").mkdir()
    path = str(tmp_path / "records" / "eval.tf_record")
    features, _ = clf.file_based_convert_examples_to_features(examples, labels, 9, tokenizer, path, fill_batches=2)
    assert os.listdir(tmp_path / "records") == ["eval.tf_record"]  # the temporary name is gone
    assert [f.is_real_example for f in features] == [True, True, True, False]

    raw = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    assert len(raw) == 4
    schema = raw[0].features.feature
    assert sorted(schema) == ["input_ids", "input_mask", "is_real_example", "label_ids", "segment_ids"]
    for name in ("input_ids", "input_mask", "segment_ids", "is_real_example"):
        assert schema[name].WhichOneof("kind") == "int64_list"
    assert schema["label_ids"].WhichOneof("kind") == ("float_list" if regression else "int64_list")
    assert list(schema["input_ids"].int64_list.value) == features[0].input_ids
    assert list(raw[3].features.feature["is_real_example"].int64_list.value) == [0]

    batches = list(clf.file_based_input_fn_builder(path, 9, is_training=False, drop_remainder=False,
                                                   regression=regression)(batch_size=3))
    assert [len(b[1]["label_ids"]) for b in batches] == [3, 1]
    feats, labs = batches[0]
    assert sorted(feats) == ["input_ids", "input_mask", "segment_ids"]
    assert sorted(labs) == ["is_real_example", "label_ids"]
    assert feats["input_ids"].dtype == tf.int32 and feats["input_ids"].shape == (3, 9)
    assert labs["label_ids"].dtype == (tf.float32 if regression else tf.int32)
    np.testing.assert_array_equal(feats["input_ids"].numpy(), [f.input_ids for f in features[:3]])
    np.testing.assert_array_equal(feats["segment_ids"].numpy(), [f.segment_ids for f in features[:3]])
    np.testing.assert_allclose(labs["label_ids"].numpy(), [f.label_id for f in features[:3]])
    np.testing.assert_array_equal(batches[1][1]["is_real_example"].numpy(), [0])

    train = clf.file_based_input_fn_builder(path, 9, is_training=True, drop_remainder=True,
                                            regression=regression, shuffle_seed=1)(3)
    got = [b[1]["is_real_example"].shape[0] for b in train.take(5)]
    assert got == [3] * 5  # repeated, whole batches only


# --- metrics and outputs ---------------------------------------------------------------------------------------

def test_glue_metrics_known_values():
    labels = np.array([1, 0, 1, 1, 0])
    predictions = np.array([1, 0, 0, 1, 1])  # TP 2, TN 1, FP 1, FN 1
    result = clf.glue_metrics(("mcc", "f1"), predictions, labels)
    assert result["eval_f1"] == pytest.approx(4 / 6)
    assert result["eval_mcc"] == pytest.approx(1 / 6)
    result = clf.glue_metrics(("pearson", "spearman"), np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 3, 5]))
    assert result["eval_pearson"] == pytest.approx(6.5 / np.sqrt(5 * 8.75))
    assert result["eval_spearman"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="Unknown metric"):
        clf.glue_metrics(("bleu",), predictions, labels)


def test_eval_metrics_weighting_and_keys(tmp_path):
    # 5 examples in batches of 3 and 2, the last one a padding example.
    features = [clf.InputFeatures([0], [0], [0], label, real)
                for label, real in [(1, True), (0, True), (1, True), (1, True), (0, False)]]
    batches = [{"logits": np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 0.0]]),
                "per_example_loss": np.array([1.0, 2.0, 3.0])},
               {"logits": np.array([[0.0, 3.0], [0.0, 5.0]]), "per_example_loss": np.array([4.0, 10.0])}]
    result = clf.eval_metrics(batches, features, global_step=7, metric_names=("f1", "mcc"))
    assert sorted(result) == ["eval_accuracy", "eval_f1", "eval_loss", "eval_mcc", "global_step", "loss"]
    assert result["eval_accuracy"] == pytest.approx(0.75)  # the padding example (predicted 1, label 0) ignored
    assert result["eval_loss"] == pytest.approx(2.5)  # real examples only
    assert result["loss"] == pytest.approx((2.0 + 7.0) / 2)  # mean of the batch means, as the Estimator's loss
    assert result["global_step"] == 7
    assert result["eval_f1"] == pytest.approx(2 * 2 / (2 * 2 + 1))
    assert isinstance(result["eval_loss"], np.float32)
    result_files.write_eval_results(str(tmp_path / "eval_results.txt"), result)
    assert (tmp_path / "eval_results.txt").read_text().splitlines() == [
        "eval_accuracy = 0.75", "eval_f1 = 0.8", "eval_loss = 2.5", f"eval_mcc = {str(result['eval_mcc'])}",
        "global_step = 7", "loss = 4.5"]

    regression = clf.eval_metrics(
        [{"predictions": np.array([1.0, 2.0, 3.0]), "per_example_loss": np.array([0.0, 1.0, 0.5])}],
        [clf.InputFeatures([0], [0], [0], x) for x in (1.0, 2.5, 3.5)], 3, regression=True,
        metric_names=("pearson", "spearman"))
    assert sorted(regression) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
    assert regression["eval_spearman"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="3 predictions for 2 examples"):
        clf.eval_metrics([{"logits": np.zeros((3, 2)), "per_example_loss": np.zeros(3)}], features[:2], 0)


def test_output_formats():
    probabilities = [np.array([0.47435144, 0.52564853], np.float32), np.array([0.1, 0.9], np.float32)]
    assert result_files.format_probabilities(probabilities) == "0.47435144\t0.52564853\n0.1\t0.9\n"
    assert result_files.format_probabilities([np.float32(3.25)]) == "3.25\n"
    assert clf.format_submission(["0", "7"], probabilities, ["a", "b"]) == "index\tprediction\n0\tb\n7\tb\n"
    assert clf.format_submission(["3"], [np.float32(4.5)], None, "id") == "id\tprediction\n3\t4.5\n"


def test_losses():
    logits = tf.constant([[0.0, 0.0], [2.0, -1.0]])
    loss = clf.classification_loss({"label_ids": tf.constant([1, 0])}, {"logits": logits}).numpy()
    np.testing.assert_allclose(loss, [np.log(2.0), np.log1p(np.exp(-3.0))], rtol=1e-6)
    loss = clf.regression_loss({"label_ids": tf.constant([1.0, 4.0])}, {"predictions": tf.constant([1.5, 2.0])})
    np.testing.assert_allclose(loss.numpy(), [0.25, 4.0])


# --- end to end ----------------------------------------------------------------------------------------------

def _common_flags(d, data, out, vocab_file, config_file):
    return [f"--data_dir={data}", f"--output_dir={out}", f"--vocab_file={vocab_file}",
            f"--bert_config_file={config_file}", "--max_seq_length=16"]


def _mrpc_run(d):
    """A tiny model and MRPC files under `d` (12 train, 5 dev, 3 test lines); the flags of a run training,
    evaluating and predicting them into d/out."""
    vocab_file, config_file = _tiny_model(d)
    write_mrpc(f"{d}/data", random.Random(0), train=12, dev=5, test=3)
    pairs = [f"{e.text_a}\t{e.text_b}" for e in clf.MrpcProcessor().get_test_examples(f"{d}/data")]
    _write(f"{d}/texts.txt", pairs)  # test.tsv's pairs as plain text, for --predict_text_file
    return [*_common_flags(d, f"{d}/data", f"{d}/out", vocab_file, config_file), "--task_name=MRPC", "--do_train",
            "--do_eval", "--do_predict", "--train_batch_size=4", "--num_train_epochs=1", "--save_checkpoints_steps=2",
            "--eval_batch_size=2", "--predict_batch_size=2", "--seed=1", "--save_original_checkpoint",
            f"--predict_text_file={d}/texts.txt"]


def _tsv_runs(d):
    """A tiny L=1 model and a tsv task under `d` (8 train lines of 3 labels, 3 dev, 5 test); the flags of a run
    training it into d/out, then of one evaluating, predicting and exporting (to d/serving) from d/out alone."""
    vocab_file, config_file = _tiny_model(d, num_hidden_layers=1)
    rng = random.Random(1)
    _write(f"{d}/data/train.tsv", [_tsv("id", "text_a", "label")]
           + [_tsv(f"x{i}", _sentence(rng), ["sad", "happy", "meh"][i % 3]) for i in range(8)])
    _write(f"{d}/data/dev.tsv", [_tsv("text_a", "label")] + [_tsv(_sentence(rng), "happy") for _ in range(3)])
    _write(f"{d}/data/test.tsv", [_tsv("text_a", "id")] + [_tsv(_sentence(rng), f"q{i}") for i in range(5)])
    flags = _common_flags(d, f"{d}/data", f"{d}/out", vocab_file, config_file) + ["--task_name=tsv"]
    return [[*flags, "--do_train", "--train_batch_size=4", "--num_train_epochs=1", "--save_original_checkpoint"],
            [*flags, "--do_eval", "--do_predict", "--predict_batch_size=2", f"--export_dir={d}/serving"]]


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory, run_main, golden_checkpoint, data_dir):
    """The runs of run_classifier.py of the tests below, one after the other in one process (TensorFlow imported
    once): `_mrpc_run`, the two of `_tsv_runs`, `_golden_mrpc_run`, then the two of `_error_runs`. Returns the
    directory of each ("mrpc", "tsv", "golden", "errors") and the errors of `_error_runs` ("error_runs")."""
    dirs = {name: str(tmp_path_factory.mktemp(name)) for name in ("mrpc", "tsv", "golden", "errors")}
    errors, logs = run_main(SCRIPT, _mrpc_run(dirs["mrpc"]), *_tsv_runs(dirs["tsv"]),
                            _golden_mrpc_run(dirs["golden"], golden_checkpoint, data_dir),
                            *_error_runs(dirs["errors"]), with_logs=True)
    assert errors[:4] == [None, None, None, None], (errors, logs[-4000:])
    return {**dirs, "error_runs": errors[4:]}


@pytest.mark.slow
def test_script_trains_evaluates_and_predicts_mrpc(script_runs):
    d = script_runs["mrpc"]
    vocab_file = f"{d}/vocab.txt"
    out = f"{d}/out"
    files = set(os.listdir(out))
    assert {"train.tf_record", "eval.tf_record", "predict.tf_record", "eval_results.txt", "test_results.tsv",
            "MRPC.tsv", "ckpt-2.index", "ckpt-3.index"} <= files, files
    assert not [f for f in files if fileio.TEMP_MARK in f]
    with open(f"{out}/eval_results.txt") as f:
        lines = f.read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["eval_accuracy", "eval_f1", "eval_loss", "global_step",
                                                        "loss"]
    assert "global_step = 3" in lines  # int(12 / 4 * 1)

    # The fine-tuned weights (saved in the original format) through an independent NumPy forward pass give the
    # probabilities, metrics and submission that the script wrote.
    processor, tokenizer = clf.MrpcProcessor(), tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    probabilities = np.loadtxt(f"{out}/test_results.tsv", ndmin=2)
    expected = _numpy_probabilities(f"{out}/original", processor.get_test_examples(f"{d}/data"), tokenizer)
    assert probabilities.shape == expected.shape == (3, 2)
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    with open(f"{out}/MRPC.tsv") as f:
        assert f.read().splitlines() == ["index\tprediction"] + [f"{i}\t{p.argmax()}" for i, p in enumerate(expected)]
    dev = _numpy_probabilities(f"{out}/original", processor.get_dev_examples(f"{d}/data"), tokenizer)
    labels = np.array([int(e.label) for e in processor.get_dev_examples(f"{d}/data")])
    predicted = dev.argmax(axis=1)
    true_positives = np.sum((predicted == 1) & (labels == 1))
    per_example = -np.log(dev[np.arange(5), labels])
    results = {key: float(value) for key, value in (line.split(" = ") for line in lines)}
    assert results["eval_accuracy"] == pytest.approx(np.mean(predicted == labels))
    assert results["eval_f1"] == pytest.approx(2 * true_positives / (np.sum(predicted == 1) + np.sum(labels == 1)))
    assert results["eval_loss"] == pytest.approx(per_example.mean(), rel=1e-4)
    batches = [per_example[0:2].mean(), per_example[2:4].mean(), per_example[4]]  # eval_batch_size=2
    assert results["loss"] == pytest.approx(np.mean(batches), rel=1e-4)


def _numpy_probabilities(release_dir, examples, tokenizer, max_seq_length=16):
    """[len(examples), 2] class probabilities of an original-format classifier checkpoint for the original's
    packing of `examples` (`_reference_features`), by tests/numpy_bert.py's NumPy forward pass in float64."""
    import numpy_bert

    reader = tf.train.load_checkpoint(f"{release_dir}/bert_model.ckpt")
    weights = {name: reader.get_tensor(name).astype(np.float64) for name in reader.get_variable_to_shape_map()}
    config = BertConfig.from_json_file(f"{release_dir}/bert_config.json")
    rows = [_reference_features(e, ["0", "1"], max_seq_length, tokenizer)[:3] for e in examples]
    ids, mask, segments = (np.array([row[i] for row in rows]) for i in range(3))
    pooled = numpy_bert.forward(weights, config, ids, mask, segments)["pooled_output"]
    logits = pooled @ weights["output_weights"].T + weights["output_bias"]
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


@pytest.mark.slow
def test_script_tsv_task_then_predict_only_run(script_runs):
    """`_tsv_runs`: the first run learns and saves the labels and saves the model in the original format; the second,
    from output_dir alone, evaluates, predicts (ids and labels) and exports a SavedModel serving raw text."""
    d = script_runs["tsv"]
    out = f"{d}/out"
    with open(f"{out}/model_metadata.json") as f:
        assert json.load(f)["labels"] == ["happy", "meh", "sad"]
    assert not os.path.exists(f"{out}/label_list.txt")
    # The fine-tuned model in the original format: original names, the classifier head for 3 labels.
    original = dict(tf.train.list_variables(f"{out}/original/bert_model.ckpt"))
    assert original["output_weights"] == [3, 32] and "bert/encoder/layer_0/output/LayerNorm/gamma" in original
    assert sorted(os.listdir(f"{out}/original"))[:2] == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001"]
    with open(f"{out}/eval_results.txt") as f:
        text = f.read()
    assert "global_step = 2\n" in text and "eval_accuracy = " in text
    assert np.loadtxt(f"{out}/test_results.tsv", ndmin=2).shape == (5, 3)
    with open(f"{out}/predictions.tsv") as f:
        rows = [line.split("\t") for line in f.read().splitlines()]
    assert rows[0] == ["id", "prediction"] and [r[0] for r in rows[1:]] == [f"q{i}" for i in range(5)]
    assert all(r[1] in ("happy", "meh", "sad") for r in rows[1:])
    # --export_dir: the SavedModel (version = global step) gives the same probabilities from raw text, in a process
    # that imports tensorflow and tensorflow_text, none of bert-tf's model or export code (a forked child: see
    # tests/forkserver.py for the little it imported before).
    with open(f"{d}/data/test.tsv") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
    check = (
        "import sys, json, numpy as np, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['serving_text'](text_a=tf.constant(json.loads(sys.argv[2])))\n"
        "print(json.dumps([out['probabilities'].numpy().tolist(), [n for n in sys.modules if 'bert_tf' in n]]))\n")
    result = forkserver.run([sys.executable, "-c", check, f"{d}/serving/2", json.dumps(texts)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    probabilities, modules = json.loads(result.stdout.splitlines()[-1])
    assert not [n for n in modules if n.startswith(("bert_tf.model", "bert_tf.export", "bert_tf.tasks"))], modules
    np.testing.assert_allclose(np.array(probabilities), np.loadtxt(f"{out}/test_results.tsv", ndmin=2), atol=1e-5)


@pytest.mark.slow
def test_a_run_and_its_export_answer_raw_text_as_the_run_predicted(script_runs, tmp_path):
    """bert_tf.load of a training run's output_dir (what it recorded: its metadata, vocab.txt and latest checkpoint)
    and of an export (export_dir: its highest version) answer plain text, pairs too, with test_results.tsv's
    probabilities and their labels; README's snippet runs as written."""
    import bert_tf
    from bert_tf.model import task_models

    d = script_runs["mrpc"]
    with open(f"{d}/out/{task_models.METADATA_FILE}") as f:
        meta = json.load(f)
    assert (meta["task"], meta["labels"], meta["max_seq_length"], meta["do_lower_case"]) == ("classifier",
                                                                                          ["0", "1"], 16, True)
    examples = clf.MrpcProcessor().get_test_examples(f"{d}/data")
    expected = np.loadtxt(f"{d}/out/test_results.tsv", ndmin=2)
    got = bert_tf.load(f"{d}/out").predict([e.text_a for e in examples], [e.text_b for e in examples])
    np.testing.assert_allclose([[a["probabilities"][label] for label in ("0", "1")] for a in got], expected,
                               atol=1e-5)
    assert [a["label"] for a in got] == [str(row.argmax()) for row in expected]
    with open(f"{d}/out/predictions.jsonl") as f:  # --predict_text_file: the same answers
        written = [json.loads(line) for line in f]
    assert [a["label"] for a in written] == [a["label"] for a in got]
    np.testing.assert_allclose([list(a["probabilities"].values()) for a in written], expected, atol=1e-5)
    readme = pytest.importorskip("test_readme_checkpoint_examples")  # README's sections
    (snippet,) = readme.fenced_blocks(readme.section("### Answers from raw text"), "python")
    namespace = {}
    exec(compile(snippet.replace("/tmp/mrpc_output", f"{d}/out"), "README.md", "exec"), namespace)
    assert namespace["answers"][0]["label"] in ("0", "1")

    d = script_runs["tsv"]
    with open(f"{d}/data/test.tsv") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
    expected = np.loadtxt(f"{d}/out/test_results.tsv", ndmin=2)
    for path in (f"{d}/out", f"{d}/serving"):
        got = bert_tf.load(path, batch_size=2).predict(texts)
        assert [list(a["probabilities"]) for a in got] == [["happy", "meh", "sad"]] * 5, path
        np.testing.assert_allclose([list(a["probabilities"].values()) for a in got], expected, atol=1e-5,
                                   err_msg=path)
        assert [a["label"] for a in got] == [["happy", "meh", "sad"][row.argmax()] for row in expected], path
    with pytest.raises(FileNotFoundError, match="neither a training run's output_dir"):
        bert_tf.load(str(tmp_path))
    with pytest.raises(ValueError, match="5 texts but 1 texts_b"):
        bert_tf.load(f"{d}/out").predict(texts, ["one"])


# A script of a user's own (docs/data.md, "Your own classification task"): its processor reads `label<TAB>text` lines of
# reviews-<split>.txt, a file no built-in task reads, with labels in an order of its own.
OWN_SCRIPT = """
import os
import runpy

from bert_tf import flags  # noqa: F401
from bert_tf.tasks import classifier


class ReviewsProcessor(classifier.DataProcessor):
    submission_name = "reviews"

    def get_train_examples(self, data_dir):
        return self.read(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self.read(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self.read(data_dir, "test")

    def get_labels(self):
        return ["sad", "happy", "meh"]

    def read(self, data_dir, split):
        lines = classifier.read_tsv(os.path.join(data_dir, f"reviews-{split}.txt"))
        return [classifier.InputExample(guid=f"{split}-{i}", text_a=line.field(1), label=line.field(0),
                                        source=line.source) for i, line in enumerate(lines)]


classifier.register_processor("reviews", ReviewsProcessor)

if __name__ == "__main__":
    runpy.run_path(RUN_CLASSIFIER, run_name="__main__")
"""


@pytest.mark.slow
def test_a_users_own_processor_runs_from_the_users_script(tmp_path, child_env):
    """The original's way to add a task, bert-tf unchanged: the user's script subclasses DataProcessor, registers it
    as `reviews` and runs run_classifier.py's main; the run reads the user's files and predicts the user's labels,
    in its order."""
    d = str(tmp_path)
    vocab_file, config_file = _tiny_model(d, num_hidden_layers=1)
    rng = random.Random(4)
    labels = ["sad", "happy", "meh"]
    for split, n in (("train", 8), ("dev", 4), ("test", 3)):
        _write(f"{d}/data/reviews-{split}.txt", [_tsv(labels[i % 3], _sentence(rng)) for i in range(n)])
    script = tmp_path / "my_classifier.py"
    script.write_text(OWN_SCRIPT.replace("RUN_CLASSIFIER", repr(SCRIPT)), encoding="utf-8")
    out = f"{d}/out"
    result = forkserver.run([sys.executable, str(script), "--task_name=Reviews", "--do_train", "--do_eval",
                             "--do_predict", "--train_batch_size=4", "--num_train_epochs=1",
                             *_common_flags(d, f"{d}/data", out, vocab_file, config_file)],
                            capture_output=True, text=True, env=child_env(), cwd=d, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    with open(f"{out}/eval_results.txt") as f:
        assert "global_step = 2\n" in f.read()  # int(8 / 4 * 1)
    probabilities = np.loadtxt(f"{out}/test_results.tsv", ndmin=2)
    assert probabilities.shape == (3, 3)  # the 3 test lines, a probability for each of the 3 labels
    with open(f"{out}/reviews.tsv") as f:
        assert f.read().splitlines() == ["index\tprediction"] + [f"{i}\t{labels[int(np.argmax(p))]}"
                                                                 for i, p in enumerate(probabilities)]


def test_stsb_regression_in_process(tmp_path, tokenizer, monkeypatch):
    """STS-B trained, evaluated and predicted in whole batches (TPU-style), each of its files read once."""
    from bert_tf.training.trainer import Trainer

    d = str(tmp_path)
    vocab_file, config_file = _tiny_model(d, num_hidden_layers=1)
    config = BertConfig.from_json_file(config_file)
    rng = random.Random(2)
    header = _tsv("index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                  "sentence2", "score")
    for split, n in (("train", 8), ("dev", 4)):
        _write(f"{d}/data/{split}.tsv", [header] + [_tsv(i, "g", "f", "y", i, "s", "s", _sentence(rng),
                                                         _sentence(rng), f"{rng.uniform(0, 5):.3f}")
                                                    for i in range(n)])
    _write(f"{d}/data/test.tsv", [_tsv(*header.split("\t")[:9])]
           + [_tsv(i, "g", "f", "y", i, "s", "s", _sentence(rng), _sentence(rng)) for i in range(3)])
    reads = _count_reads(monkeypatch)
    out = f"{d}/out"
    task = clf.ClassifierTask("sts-b", f"{d}/data")
    trainer = Trainer(lambda: BertClassifier(config, 1, regression=True), task.loss, out, learning_rate=1e-3)
    run = runner.RunConfig(bert_config_file=config_file, vocab_file=vocab_file, output_dir=out, max_seq_length=16,
                           train_batch_size=4, num_train_epochs=2, warmup_proportion=0.1, do_train=True,
                           do_eval=True, do_predict=True)
    task.read_inputs(run, config)
    loss = runner.train(run, task, tokenizer, trainer)
    steps = trainer.step
    assert steps == 4 and np.isfinite(loss)
    whole_batches = dataclasses.replace(run, eval_batch_size=3, predict_batch_size=2, use_tpu=True)
    assert whole_batches.fixed_batches
    results = task.evaluate(whole_batches, tokenizer, trainer)
    assert sorted(results[""]) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
    assert results[""]["global_step"] == steps
    rows = task.predict(whole_batches, tokenizer, trainer)[""]
    assert len(rows) == 3 and reads == {"train.tsv": 1, "dev.tsv": 1, "test.tsv": 1}
    with open(f"{out}/STS-B.tsv") as f:
        submission = f.read().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 4
    assert float(submission[1].split("\t")[1]) == pytest.approx(float(rows[0]), rel=1e-6)
    with open(f"{out}/test_results.tsv") as f:
        assert [float(x) for x in f.read().split()] == pytest.approx([float(r) for r in rows], rel=1e-6)


def _error_runs(d):
    """An encoder-only checkpoint and tsv files under `d`; the flags of the runs of
    `test_script_errors_come_before_any_work`."""
    from bert_tf import checkpoints

    vocab_file, config_file = _tiny_model(d)
    encoder_only = encoder.BertModel(BertConfig.from_json_file(config_file))
    checkpoints.save_original_checkpoint(encoder_only, f"{d}/encoder/bert_model.ckpt")
    _write(f"{d}/data/test.tsv", [_tsv("text_a"), _tsv("good")])
    _write(f"{d}/out/label_list.txt", ["neg", "pos"])
    _write(f"{d}/data/train.tsv", [_tsv("text_a", "label"), _tsv("good", "pos"), _tsv("bad", "neg")])
    _write(f"{d}/data/dev.tsv", [_tsv("text_a", "label"), _tsv("good", "pos"), _tsv("meh", "neutral")])
    return [["--task_name=tsv", "--do_predict", *_common_flags(d, f"{d}/data", f"{d}/out", vocab_file, config_file),
             f"--init_checkpoint={d}/encoder/bert_model.ckpt"],
            ["--task_name=tsv", "--do_train", "--do_eval",
             *_common_flags(d, f"{d}/data", f"{d}/train_out", vocab_file, config_file)]]


def test_script_errors_come_before_any_work(script_runs):
    """--do_predict from a pre-trained checkpoint (no output_weights) is an error, not random predictions; a dev
    label that train.tsv lacks (tsv task) is an error naming dev.tsv, its line and the label, before training."""
    d, errors = script_runs["errors"], script_runs["error_runs"]
    assert "has no trained classifier head" in errors[0]
    assert not os.path.exists(f"{d}/out/test_results.tsv")
    assert errors[1] == "ValueError: " + f"{d}/data/dev.tsv:3: label 'neutral' is not in the label list ['neg', 'pos']."
    assert os.listdir(f"{d}/train_out") == []  # no label list, no train.tf_record, no checkpoint


def _golden_mrpc_run(d, golden_checkpoint, data_dir):
    """tests/fixtures/mrpc_test.tsv as d/mrpc/test.tsv; the flags of the original's --do_predict run on the golden
    checkpoint into d/out."""
    data = os.path.join(d, "mrpc")
    os.makedirs(data)
    shutil.copyfile(os.path.join(data_dir, "mrpc_test.tsv"), os.path.join(data, "test.tsv"))
    return ["--task_name=MRPC", "--do_predict", f"--data_dir={data}", f"--output_dir={d}/out",
            f"--vocab_file={golden_checkpoint}/vocab.txt", f"--bert_config_file={golden_checkpoint}/bert_config.json",
            f"--init_checkpoint={golden_checkpoint}/bert_model.ckpt", "--max_seq_length=128", "--do_lower_case=True"]


def test_mrpc_predictions_match_the_original(script_runs, data_dir):
    """The original run_classifier.py --do_predict on the golden checkpoint: tests/fixtures/mrpc_test_results.tsv."""
    out = os.path.join(script_runs["golden"], "out")
    golden = np.loadtxt(os.path.join(data_dir, "mrpc_test_results.tsv"))
    ours = np.loadtxt(os.path.join(out, "test_results.tsv"))
    assert ours.shape == golden.shape == (20, 2)
    # Measured max |ours - golden|: 2.0e-7 (CPU, TF 2.20); the tolerance is 10x that.
    assert np.abs(ours - golden).max() <= 2e-6, np.abs(ours - golden).max()
    with open(os.path.join(out, "test_results.tsv")) as f:
        for line in f:  # str(float32) per value, as the original's Estimator output
            assert all(str(np.float32(x)) == x for x in line.rstrip("\n").split("\t"))
    with open(os.path.join(out, "MRPC.tsv")) as f:
        submission = f.read().splitlines()
    expected = ["1" if p[1] > p[0] else "0" for p in golden]
    assert submission == ["index\tprediction"] + [f"{i}\t{label}" for i, label in enumerate(expected)]


def test_flags_have_the_original_names_and_defaults():
    result = forkserver.run([sys.executable, SCRIPT, "--helpfull"], capture_output=True, text=True, cwd=REPO)
    text = " ".join(result.stdout.split())
    expected = {"data_dir": None, "bert_config_file": None, "task_name": None, "vocab_file": None,
                "output_dir": None, "init_checkpoint": None, "do_lower_case": "true", "max_seq_length": "128",
                "do_train": "false", "do_eval": "false", "do_predict": "false", "train_batch_size": "32",
                "eval_batch_size": "8", "predict_batch_size": "8", "learning_rate": "5e-05",
                "num_train_epochs": "3.0", "warmup_proportion": "0.1", "save_checkpoints_steps": "1000",
                "iterations_per_loop": "1000", "use_tpu": "false", "tpu_name": None, "tpu_zone": None,
                "gcp_project": None, "master": None, "num_tpu_cores": "8"}
    for name, default in expected.items():
        key = next((k for k in (f"--{name}:", f"--[no]{name}:") if k in text), None)
        assert key, name
        if default is not None:
            section = text[text.index(key):]
            assert section[section.index("(default:"):].startswith(f"(default: '{default}')"), name
