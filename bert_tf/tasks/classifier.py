"""Sentence (pair) classification: the data side of the original run_classifier.py, plus GLUE extras.

What matches the original exactly:
* the processors `cola`, `mnli`, `mrpc`, `xnli` read their files the same way (tab-separated, no quote character,
  the same header rows skipped, the same columns, guids and labels);
* `convert_single_example` packs `[CLS] a [SEP] (b [SEP])` with the same truncation and zero padding, including
  `PaddingInputExample` for fixed-size eval batches (`is_real_example` = 0);
* `file_based_convert_examples_to_features` writes the same TFRecord schema (`input_ids`, `input_mask`,
  `segment_ids`, `label_ids`, `is_real_example`, all int64) under the same file names;
* `test_results.tsv` holds one line of tab-separated class probabilities per real test example, formatted by
  `str()` of a float32 as the original's Estimator output was, and `eval_results.txt` holds `key = value` lines
  sorted by key with `eval_accuracy`, `eval_loss`, `global_step` and `loss`.

What bert-tf adds: the remaining GLUE tasks (`sst-2`, `qqp`, `qnli`, `rte`, `sts-b` as regression, `wnli`), the
MNLI mismatched dev/test sets, each task's GLUE metric in `eval_results.txt` (MCC for CoLA, F1 for MRPC/QQP,
Pearson/Spearman for STS-B), GLUE submission files (`CoLA.tsv`, `MNLI-m.tsv`, ...), and a generic `tsv` task
whose files carry a header naming their columns. Errors name the file and line. Every output file is written
under a temporary name and renamed when complete.
"""
import collections
import csv
import dataclasses
import io
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, records, tokenization
from bert_tf.tasks import result_files
from bert_tf.text import truncate_seq_pair

LABEL_LIST_FILE = "label_list.txt"


# --- examples and features -------------------------------------------------------------------------------------

@dataclasses.dataclass
class InputExample:
    """One example: `guid` (unique id), `text_a`, optional `text_b`, `label` (None for unlabeled test data).

    bert-tf extras: `example_id` (the id a submission file reports, e.g. GLUE's `index` column) and `source`
    (`file:line`, for error messages).
    """
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Any = None
    example_id: Optional[str] = None
    source: Optional[str] = None


class PaddingInputExample:
    """A fake example that pads an eval/predict set to a multiple of a fixed batch size (as for TPUs).

    It becomes an all-zero feature with `is_real_example=False`, which metrics and outputs ignore.
    """


@dataclasses.dataclass
class InputFeatures:
    """The packed model inputs of one example."""
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: Any
    is_real_example: bool = True


# --- reading files -------------------------------------------------------------------------------------------

class TsvLine(list):
    """A row of a TSV file (a list of fields, as csv gives) that remembers where it came from."""

    def __init__(self, fields, path, line_number):
        super().__init__(fields)
        self.path = path
        self.line_number = line_number

    @property
    def source(self):
        return f"{self.path}:{self.line_number}"

    def field(self, index):
        """The field at `index` (negative counts from the end); a clear error when the row is too short."""
        try:
            return self[index]
        except IndexError:
            need = index + 1 if index >= 0 else -index
            raise ValueError(f"{self.source}: expected at least {need} tab-separated fields, found {len(self)}"
                             f"{' (empty line)' if not self else ''}.") from None


def read_tsv(input_file, quotechar=None):
    """Reads a tab-separated file as the original `_read_tsv`: csv with tabs and no quote character.

    Every line becomes a `TsvLine` (a list of str). Missing files and undecodable or malformed lines raise
    errors that name the file and line.
    """
    if not tf.io.gfile.exists(input_file):
        raise FileNotFoundError(f"Data file not found: {input_file}")
    with tf.io.gfile.GFile(input_file, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{input_file}:{line}: not valid UTF-8 ({e.reason}).") from None
    # Lines end at "\n" only (as TensorFlow's GFile splits them); csv drops the "\n" or "\r\n".
    reader = csv.reader(io.StringIO(text, newline="\n"), delimiter="\t", quotechar=quotechar,
                        quoting=csv.QUOTE_NONE if quotechar is None else csv.QUOTE_MINIMAL)
    lines = []
    try:
        for fields in reader:
            lines.append(TsvLine(fields, input_file, reader.line_num))
    except csv.Error as e:
        raise ValueError(f"{input_file}:{reader.line_num}: {e}") from None
    return lines


class DataProcessor:
    """Base class of the data sets: examples of the train/dev/test splits and the label list.

    Class attributes: `is_regression` (one float output, e.g. STS-B), `submission_name` (the GLUE file name of
    the test predictions without `.tsv`, None when the task has no leaderboard file).
    """
    is_regression = False
    submission_name = None

    def get_train_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no training set.")

    def get_dev_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no dev set (drop --do_eval).")

    def get_test_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no test set (drop --do_predict).")

    def get_labels(self):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} defines no label list.")

    def dev_splits(self, data_dir):
        """[(suffix, examples)] of every dev set to evaluate; suffix "" names the main one (eval_results.txt)."""
        return [("", self.get_dev_examples(data_dir))]

    def test_splits(self, data_dir):
        """[(suffix, examples, submission name)] of every test set to predict."""
        return [("", self.get_test_examples(data_dir), self.submission_name)]

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """The original's reader (kept under its name for subclasses written against it)."""
        return read_tsv(input_file, quotechar)


class XnliProcessor(DataProcessor):
    """XNLI as the original reads it: training on the machine-translated MultiNLI of `language`
    (`multinli/multinli.train.<language>.tsv`), dev on the rows of `xnli.dev.tsv` in that language."""

    def __init__(self, language="zh"):
        self.language = language

    def get_train_examples(self, data_dir):
        lines = read_tsv(os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language))
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            label = tokenization.convert_to_unicode(line.field(2))
            if label == "contradictory":
                label = "contradiction"
            examples.append(InputExample(
                guid="train-%d" % i, text_a=tokenization.convert_to_unicode(line.field(0)),
                text_b=tokenization.convert_to_unicode(line.field(1)), label=label, source=line.source))
        return examples

    def get_dev_examples(self, data_dir):
        lines = read_tsv(os.path.join(data_dir, "xnli.dev.tsv"))
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            if tokenization.convert_to_unicode(line.field(0)) != tokenization.convert_to_unicode(self.language):
                continue
            examples.append(InputExample(
                guid="dev-%d" % i, text_a=tokenization.convert_to_unicode(line.field(6)),
                text_b=tokenization.convert_to_unicode(line.field(7)),
                label=tokenization.convert_to_unicode(line.field(1)), source=line.source))
        return examples

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]


class MnliProcessor(DataProcessor):
    """MultiNLI (GLUE): sentence pairs in columns 8 and 9, gold label last; matched and mismatched dev/test."""

    def get_train_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "dev_matched.tsv")), "dev_matched")

    def get_test_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "test_matched.tsv")), "test")

    def get_dev_mismatched_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "dev_mismatched.tsv")), "dev_mismatched")

    def get_test_mismatched_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "test_mismatched.tsv")),
                                     "test_mismatched")

    def dev_splits(self, data_dir):
        splits = [("", self.get_dev_examples(data_dir))]
        if _exists_or_warn(os.path.join(data_dir, "dev_mismatched.tsv")):
            splits.append(("_mm", self.get_dev_mismatched_examples(data_dir)))
        return splits

    def test_splits(self, data_dir):
        splits = [("", self.get_test_examples(data_dir), "MNLI-m")]
        if _exists_or_warn(os.path.join(data_dir, "test_mismatched.tsv")):
            splits.append(("_mm", self.get_test_mismatched_examples(data_dir), "MNLI-mm"))
        return splits

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]

    def _create_examples(self, lines, set_type):
        test = set_type.startswith("test")
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            index = tokenization.convert_to_unicode(line.field(0))
            examples.append(InputExample(
                guid="%s-%s" % (set_type, index),
                text_a=tokenization.convert_to_unicode(line.field(8)),
                text_b=tokenization.convert_to_unicode(line.field(9)),
                label="contradiction" if test else tokenization.convert_to_unicode(line.field(-1)),
                example_id=index, source=line.source))
        return examples


def _exists_or_warn(path):
    if tf.io.gfile.exists(path):
        return True
    logging.warning("%s not found: skipping the MNLI mismatched set.", path)
    return False


class _PairProcessor(DataProcessor):
    """Tasks whose files share one layout: a header line, then index/text/label columns at fixed positions.

    Subclasses set `labels`, the text columns of train/dev (`text_columns`) and test (`test_text_columns`),
    `label_column` (train/dev), `guid_column` (None: the line number, as the original's MRPC) and `has_header`.
    """
    labels = ("0", "1")
    text_columns = (3, 4)
    test_text_columns = (3, 4)
    label_column = 0
    guid_column = None
    id_column = 0  # the test file's id column, reported in the submission file
    has_header = True
    test_has_header = True

    def get_train_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "test.tsv")), "test")

    def get_labels(self):
        return list(self.labels)

    def _label(self, line):
        return tokenization.convert_to_unicode(line.field(self.label_column))

    def _create_examples(self, lines, set_type):
        test = set_type == "test"
        skip_header = self.test_has_header if test else self.has_header
        columns = self.test_text_columns if test else self.text_columns
        examples = []
        for i, line in enumerate(lines):
            if skip_header and i == 0:
                continue
            key = i if self.guid_column is None else tokenization.convert_to_unicode(line.field(self.guid_column))
            text_b = tokenization.convert_to_unicode(line.field(columns[1])) if len(columns) > 1 else None
            examples.append(InputExample(
                guid="%s-%s" % (set_type, key), text_a=tokenization.convert_to_unicode(line.field(columns[0])),
                text_b=text_b, label=self.labels[0] if test else self._label(line),
                example_id=(tokenization.convert_to_unicode(line.field(self.id_column)) if test else None),
                source=line.source))
        return examples


class MrpcProcessor(_PairProcessor):
    """MRPC (GLUE): `Quality  #1 ID  #2 ID  #1 String  #2 String`, guid from the line number."""
    submission_name = "MRPC"


class ColaProcessor(_PairProcessor):
    """CoLA (GLUE): train/dev have no header (`source  label  original-label  sentence`); test has one
    (`index  sentence`)."""
    text_columns = (3,)
    test_text_columns = (1,)
    label_column = 1
    has_header = False
    submission_name = "CoLA"


class Sst2Processor(_PairProcessor):
    """SST-2 (GLUE): `sentence  label`; test `index  sentence`."""
    text_columns = (0,)
    test_text_columns = (1,)
    label_column = 1
    submission_name = "SST-2"


class QqpProcessor(_PairProcessor):
    """QQP (GLUE): `id  qid1  qid2  question1  question2  is_duplicate`; test `id  question1  question2`."""
    text_columns = (3, 4)
    test_text_columns = (1, 2)
    label_column = 5
    guid_column = 0
    submission_name = "QQP"


class QnliProcessor(_PairProcessor):
    """QNLI (GLUE): `index  question  sentence  label`; test without the label."""
    labels = ("entailment", "not_entailment")
    text_columns = (1, 2)
    test_text_columns = (1, 2)
    label_column = -1
    guid_column = 0
    submission_name = "QNLI"


class RteProcessor(QnliProcessor):
    """RTE (GLUE): `index  sentence1  sentence2  label`; test without the label."""
    submission_name = "RTE"


class WnliProcessor(QnliProcessor):
    """WNLI (GLUE): `index  sentence1  sentence2  label` with labels 0/1; test without the label."""
    labels = ("0", "1")
    submission_name = "WNLI"


class StsbProcessor(_PairProcessor):
    """STS-B (GLUE), a regression task: sentences in columns 7 and 8, the similarity score (0-5) last."""
    is_regression = True
    labels = (None,)
    text_columns = (7, 8)
    test_text_columns = (7, 8)
    label_column = -1
    guid_column = 0
    submission_name = "STS-B"

    def get_labels(self):
        return None

    def _label(self, line):
        value = line.field(self.label_column)
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{line.source}: the STS-B score {value!r} is not a number.") from None

    def _create_examples(self, lines, set_type):
        examples = super()._create_examples(lines, set_type)
        if set_type == "test":
            for example in examples:
                example.label = 0.0
        return examples


class TsvProcessor(DataProcessor):
    """Your own data: `train.tsv`, `dev.tsv`, `test.tsv` in data_dir, each with a header line naming its columns:
    `text_a` and `label` (required; `label` optional in test.tsv), `text_b` and `id` (optional); other columns
    are ignored. The label list is the sorted set of training labels, saved as `label_list.txt` in output_dir
    when training and read back from there for eval/predict without training.
    """
    submission_name = "predictions"
    submission_id_header = "id"

    def __init__(self, labels=None):
        self.labels = list(labels) if labels is not None else None

    def get_train_examples(self, data_dir):
        return self._create_examples(os.path.join(data_dir, "train.tsv"), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(os.path.join(data_dir, "dev.tsv"), "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(os.path.join(data_dir, "test.tsv"), "test")

    def get_labels(self):
        if self.labels is None:
            raise ValueError("The tsv task's label list is not known yet: train first (--do_train), which saves "
                             f"{LABEL_LIST_FILE} in output_dir, or put one label per line in that file.")
        return list(self.labels)

    def learn_labels(self, data_dir):
        """The sorted distinct labels of train.tsv."""
        self.labels = sorted({e.label for e in self.get_train_examples(data_dir)})
        if not self.labels:
            raise ValueError(f"{os.path.join(data_dir, 'train.tsv')} has no examples.")
        return self.labels

    def _create_examples(self, path, set_type):
        lines = read_tsv(path)
        if not lines:
            raise ValueError(f"{path}: empty file; expected a header line naming the columns "
                             "(text_a, label, optionally text_b and id).")
        header = [name.strip().lower() for name in lines[0]]
        columns = {name: i for i, name in reversed(list(enumerate(header)))}
        required = ["text_a"] if set_type == "test" else ["text_a", "label"]
        absent = [name for name in required if name not in columns]
        if absent:
            raise ValueError(f"{path}:1: the header {lines[0]} lacks the column(s) {', '.join(absent)} (expected "
                             "text_a, label, and optionally text_b and id).")
        examples = []
        for i, line in enumerate(lines[1:], start=1):
            if len(line) != len(header):
                raise ValueError(f"{line.source}: {len(line)} tab-separated fields, but the header names "
                                 f"{len(header)}.")
            example_id = line[columns["id"]] if "id" in columns else str(i - 1)
            text_b = line[columns["text_b"]] if "text_b" in columns else None
            if set_type == "test":
                label = self.labels[0] if self.labels else None
            else:
                label = tokenization.convert_to_unicode(line[columns["label"]])
            examples.append(InputExample(
                guid="%s-%s" % (set_type, example_id), text_a=tokenization.convert_to_unicode(line[columns["text_a"]]),
                text_b=tokenization.convert_to_unicode(text_b) if text_b is not None else None, label=label,
                example_id=example_id, source=line.source))
        return examples


PROCESSORS = collections.OrderedDict([
    ("cola", ColaProcessor),
    ("mnli", MnliProcessor),
    ("mrpc", MrpcProcessor),
    ("xnli", XnliProcessor),
    ("sst-2", Sst2Processor),
    ("qqp", QqpProcessor),
    ("qnli", QnliProcessor),
    ("rte", RteProcessor),
    ("sts-b", StsbProcessor),
    ("wnli", WnliProcessor),
    ("tsv", TsvProcessor),
])
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}


def get_processor(task_name, xnli_language="zh"):
    """The processor of a task name (case-insensitive); unknown names list the known ones."""
    name = (task_name or "").strip().lower()
    name = _ALIASES.get(name, name)
    if name not in PROCESSORS:
        raise ValueError(f"Task not found: {task_name}. Known tasks: {', '.join(PROCESSORS)}.")
    if name == "xnli":
        return XnliProcessor(language=xnli_language)
    return PROCESSORS[name]()


def prepare_label_list(processor, data_dir, output_dir, do_train):
    """The task's label list. For the `tsv` task: learned from train.tsv and saved to output_dir/label_list.txt
    when training, read back from there otherwise. Returns None for regression tasks."""
    if not isinstance(processor, TsvProcessor):
        return processor.get_labels()
    label_file = os.path.join(output_dir, LABEL_LIST_FILE)
    saved = None
    if tf.io.gfile.exists(label_file):
        with tf.io.gfile.GFile(label_file, "r") as f:
            saved = [line.rstrip("\r") for line in f.read().split("\n")]
        saved = saved[:-1] if saved and saved[-1] == "" else saved
    if do_train:
        labels = processor.learn_labels(data_dir)
        if saved is not None and saved != labels:
            raise ValueError(f"{label_file} lists the labels {saved}, but {data_dir}/train.tsv has {labels}: "
                             "use a fresh output_dir for different training data.")
        if any("\n" in label for label in labels):
            raise ValueError("A label contains a newline.")
        result_files.write_text_atomically(label_file, "".join(label + "\n" for label in labels))
        return labels
    if saved is None:
        raise ValueError(f"{label_file} not found: the tsv task takes its label list from training; run with "
                         "--do_train first (into the same output_dir) or write the labels there, one per line.")
    processor.labels = saved
    return saved


# --- features --------------------------------------------------------------------------------------------------

def example_label_id(example, label_list):
    """The index of `example.label` in `label_list`, or its float value for regression (`label_list=None`).
    A label not in the list is a ValueError naming the example's file and line."""
    if label_list is None:
        return float(example.label)
    if example.label not in label_list:
        where = example.source or f"example {example.guid}"
        raise ValueError(f"{where}: label {example.label!r} is not in the label list {list(label_list)}.")
    return list(label_list).index(example.label)


def check_dev_labels(processor, data_dir, label_list):
    """Raises `example_label_id`'s error for the first dev-set label not in `label_list` (for the tsv task: a
    label train.tsv lacks), so that it comes before training rather than after it."""
    for _, examples in processor.dev_splits(data_dir):
        for example in examples:
            example_label_id(example, label_list)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """Packs one `InputExample` into `InputFeatures` exactly as the original.

    `[CLS] tokens_a [SEP]` (segment 0) then `tokens_b [SEP]` (segment 1) when text_b tokenizes to anything;
    pairs are truncated by popping from the longer side to `max_seq_length - 3`, single texts cut to
    `max_seq_length - 2`; then zero padding. `label_list=None` means regression: the label is a float.
    """
    if isinstance(example, PaddingInputExample):
        return InputFeatures(input_ids=[0] * max_seq_length, input_mask=[0] * max_seq_length,
                             segment_ids=[0] * max_seq_length, label_id=0.0 if label_list is None else 0,
                             is_real_example=False)

    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)  # room for [CLS], [SEP], [SEP]
    elif len(tokens_a) > max_seq_length - 2:
        tokens_a = tokens_a[:max_seq_length - 2]  # room for [CLS], [SEP]

    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    input_ids += padding
    input_mask += padding
    segment_ids += padding

    label_id = example_label_id(example, label_list)
    if ex_index < 5:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
        logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
        logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
        logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
        logging.info("label: %s (id = %s)", example.label, label_id)
    return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids, label_id=label_id,
                         is_real_example=True)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """`convert_single_example` over a list."""
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer)
            for i, example in enumerate(examples)]


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def feature_to_tf_example(feature, regression=False):
    """The original's tf.train.Example of one feature (a float `label_ids` for regression)."""
    features = collections.OrderedDict()
    features["input_ids"] = _int_feature(feature.input_ids)
    features["input_mask"] = _int_feature(feature.input_mask)
    features["segment_ids"] = _int_feature(feature.segment_ids)
    features["label_ids"] = (_float_feature if regression else _int_feature)([feature.label_id])
    features["is_real_example"] = _int_feature([int(feature.is_real_example)])
    return tf.train.Example(features=tf.train.Features(feature=features))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, output_file):
    """Converts examples and writes them to a TFRecord file (written to a temporary name, then renamed).

    Returns the list of `InputFeatures` (the labels and `is_real_example` the metrics need).
    """
    regression = label_list is None
    features = []
    with fileio.written_atomically(output_file) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for ex_index, example in enumerate(examples):
            if ex_index % 10000 == 0:
                logging.info("Writing example %d of %d", ex_index, len(examples))
            feature = convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer)
            writer.write(feature_to_tf_example(feature, regression).SerializeToString())
            features.append(feature)
    return features


def name_to_features(seq_length, regression=False):
    """The TFRecord schema for parsing."""
    return {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def decode_record(record, seq_length, regression=False):
    """A serialized example -> (features, labels): int64 becomes int32 as in the original."""
    example = tf.io.parse_single_example(record, name_to_features(seq_length, regression))
    example = {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in example.items()}
    features = {name: example[name] for name in ("input_ids", "input_mask", "segment_ids")}
    labels = {name: example[name] for name in ("label_ids", "is_real_example")}
    return features, labels


def file_based_dataset(input_file, seq_length, batch_size, is_training, drop_remainder, regression=False,
                       input_context=None, shuffle_seed=None):
    """The original's input pipeline as a tf.data.Dataset of (features, labels) batches.

    Training: repeat, shuffle with a 100-record buffer (order drawn from `shuffle_seed`), batch (drop_remainder as
    given); with an `input_context`, each input pipeline reads its shard of the records. Otherwise file order.
    """
    def decode(record):
        return decode_record(record, seq_length, regression)

    if is_training:
        return records.training_dataset(input_file, decode, batch_size, 100, shuffle_seed, input_context,
                                        repeat_first=True, drop_remainder=drop_remainder)
    return records.reading_dataset(input_file, decode, batch_size, drop_remainder)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder, regression=False,
                                shuffle_seed=None):
    """A Trainer `dataset_fn(batch_size, input_context=None, seed=shuffle_seed)` (the original's input_fn
    builder)."""
    def dataset_fn(batch_size, input_context=None, seed=shuffle_seed):
        return file_based_dataset(input_file, seq_length, batch_size, is_training, drop_remainder, regression,
                                  input_context, seed)
    return dataset_fn


# --- losses ----------------------------------------------------------------------------------------------------

def classification_loss(labels, outputs):
    """The original's per-example loss: softmax cross-entropy of the logits with the label ids."""
    logits = tf.cast(outputs["logits"], tf.float32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label_ids"], tf.int32),
                                                          logits=logits)


def regression_loss(labels, outputs):
    """Squared error of the predicted score (STS-B)."""
    predictions = tf.cast(outputs["predictions"], tf.float32)
    return tf.square(predictions - tf.cast(labels["label_ids"], tf.float32))


def loss_fn_for(processor):
    return regression_loss if processor.is_regression else classification_loss


# --- metrics ---------------------------------------------------------------------------------------------------

GLUE_METRICS = {"cola": ("mcc",), "mrpc": ("f1",), "qqp": ("f1",), "sts-b": ("pearson", "spearman")}


def task_key(processor):
    """The registered task name of a processor instance (None for processors defined elsewhere)."""
    for name, cls in PROCESSORS.items():
        if type(processor) is cls:
            return name
    return None


def glue_metrics(metric_names, predictions, labels):
    """GLUE metrics of real examples: mcc (Matthews), f1 (positive class 1), pearson, spearman."""
    result = {}
    for name in metric_names:
        if name == "mcc":
            from sklearn.metrics import matthews_corrcoef
            result["eval_mcc"] = matthews_corrcoef(labels, predictions)
        elif name == "f1":
            from sklearn.metrics import f1_score
            result["eval_f1"] = f1_score(labels, predictions, pos_label=1, zero_division=0.0)
        elif name == "pearson":
            from scipy.stats import pearsonr
            result["eval_pearson"] = pearsonr(predictions, labels)[0] if len(labels) > 1 else float("nan")
        elif name == "spearman":
            from scipy.stats import spearmanr
            result["eval_spearman"] = spearmanr(predictions, labels)[0] if len(labels) > 1 else float("nan")
        else:
            raise ValueError(f"Unknown metric {name!r}.")
    return result


def eval_metrics(batches, features, global_step, regression=False, metric_names=()):
    """The original's eval results from per-batch model outputs (dicts with `per_example_loss` and `logits` or
    `predictions`) and the features they were computed on, in order.

    eval_accuracy: accuracy over real examples (classification); eval_loss: mean per-example loss over real
    examples; loss: mean over batches of each batch's mean loss (all examples, as the Estimator's `loss`);
    global_step; plus the task's GLUE metrics.
    """
    losses, batch_means, scores = [], [], []
    for batch in batches:
        per_example = np.asarray(batch["per_example_loss"], np.float32)
        losses.append(per_example)
        batch_means.append(np.float32(per_example.mean()))
        scores.append(np.asarray(batch["predictions"] if regression else batch["logits"]))
    losses, scores = np.concatenate(losses), np.concatenate(scores)
    if len(losses) != len(features):
        raise ValueError(f"Got {len(losses)} predictions for {len(features)} examples.")
    real = np.array([f.is_real_example for f in features], bool)
    labels = np.array([f.label_id for f in features], np.float32 if regression else np.int64)
    if not real.any():
        raise ValueError("The eval set has no examples.")
    result = {
        "eval_loss": np.float32(losses[real].mean()),
        "global_step": int(global_step),
        "loss": np.float32(np.mean(batch_means)),
    }
    predictions = scores if regression else np.argmax(scores, axis=-1)
    if not regression:
        result["eval_accuracy"] = np.float32(np.mean(predictions[real] == labels[real]))
    for key, value in glue_metrics(metric_names, predictions[real], labels[real]).items():
        result[key] = np.float32(value)
    return result


# --- outputs ---------------------------------------------------------------------------------------------------







def format_submission(ids, predictions, label_list, id_header="index"):
    """A GLUE submission file: header `index<TAB>prediction`, then each test example's id and predicted label
    (or score for regression)."""
    lines = [f"{id_header}\tprediction\n"]
    for example_id, prediction in zip(ids, predictions):
        if label_list is None:
            value = str(np.float32(prediction))
        else:
            value = label_list[int(np.argmax(prediction))]
        lines.append(f"{example_id}\t{value}\n")
    return "".join(lines)


def pad_examples(examples, batch_size):
    """Appends PaddingInputExample until the count is a multiple of batch_size (fixed-size batches)."""
    examples = list(examples)
    while len(examples) % batch_size:
        examples.append(PaddingInputExample())
    return examples




# --- the run_classifier.py workflow ----------------------------------------------------------------------------

def train(trainer, processor, tokenizer, label_list, data_dir, output_dir, max_seq_length, train_batch_size,
          num_train_epochs, warmup_proportion, shuffle_seed=None):
    """Converts the training set to `train.tf_record` and fine-tunes for the original's number of steps,
    int(num_examples / train_batch_size * num_train_epochs), warming up over warmup_proportion of them; the input
    order is drawn from `shuffle_seed` (None: a seed drawn at random, kept in the checkpoints).
    Returns (num_train_steps, final loss or None when the run had already finished)."""
    from bert_tf.training.trainer import compute_train_steps

    examples = processor.get_train_examples(data_dir)
    num_train_steps, num_warmup_steps = compute_train_steps(len(examples), train_batch_size, num_train_epochs,
                                                            warmup_proportion)
    train_file = os.path.join(output_dir, "train.tf_record")
    file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, train_file)
    logging.info("***** Running training *****")
    logging.info("  Num examples = %d", len(examples))
    logging.info("  Batch size = %d", train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    dataset_fn = file_based_input_fn_builder(train_file, max_seq_length, is_training=True, drop_remainder=True,
                                             regression=processor.is_regression)
    loss = trainer.train(dataset_fn, train_batch_size, num_train_steps, num_warmup_steps, seed=shuffle_seed)
    return num_train_steps, loss


def evaluate(trainer, processor, tokenizer, label_list, data_dir, output_dir, max_seq_length, eval_batch_size,
             global_step, fixed_batches=False):
    """Evaluates on every dev set; writes `eval_results.txt` (`eval_results_mm.txt` for MNLI mismatched).

    `fixed_batches` pads the set with PaddingInputExample to whole batches (TPU), which the metrics ignore.
    Returns {suffix: result dict}.
    """
    regression = processor.is_regression
    metric_names = GLUE_METRICS.get(task_key(processor), ())
    results = {}
    for suffix, examples in processor.dev_splits(data_dir):
        num_actual = len(examples)
        if fixed_batches:
            examples = pad_examples(examples, eval_batch_size)
        eval_file = os.path.join(output_dir, f"eval{suffix}.tf_record")
        features = file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                                           eval_file)
        logging.info("***** Running evaluation%s *****", suffix)
        logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual,
                     len(examples) - num_actual)
        logging.info("  Batch size = %d", eval_batch_size)
        dataset = file_based_dataset(eval_file, max_seq_length, eval_batch_size, is_training=False,
                                     drop_remainder=fixed_batches, regression=regression)
        result = eval_metrics(trainer.predict(dataset, with_loss=True), features, global_step, regression,
                              metric_names)
        logging.info("***** Eval results%s *****", suffix)
        for key in sorted(result):
            logging.info("  %s = %s", key, str(result[key]))
        result_files.write_text_atomically(os.path.join(output_dir, f"eval_results{suffix}.txt"), result_files.format_eval_results(result))
        results[suffix] = result
    return results


def predict(trainer, processor, tokenizer, label_list, data_dir, output_dir, max_seq_length, predict_batch_size,
            fixed_batches=False):
    """Predicts every test set; writes `test_results.tsv` (class probabilities, or the score for regression,
    per real example) and the submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...; `predictions.tsv` for tsv).
    MNLI mismatched goes to `test_results_mm.tsv` and `MNLI-mm.tsv`. Returns {suffix: [rows]}."""
    regression = processor.is_regression
    output_key = "predictions" if regression else "probabilities"
    all_rows = {}
    for suffix, examples, submission in processor.test_splits(data_dir):
        num_actual = len(examples)
        real_examples = list(examples)
        if fixed_batches:
            examples = pad_examples(examples, predict_batch_size)
        predict_file = os.path.join(output_dir, f"predict{suffix}.tf_record")
        file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, predict_file)
        logging.info("***** Running prediction%s *****", suffix)
        logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual,
                     len(examples) - num_actual)
        logging.info("  Batch size = %d", predict_batch_size)
        rows = []
        if examples:
            dataset = file_based_dataset(predict_file, max_seq_length, predict_batch_size, is_training=False,
                                         drop_remainder=fixed_batches, regression=regression)
            for batch in trainer.predict(dataset.map(lambda features, labels: features)):
                rows.extend(np.asarray(batch[output_key], np.float32))
        rows = rows[:num_actual]
        if len(rows) != num_actual:
            raise ValueError(f"Got {len(rows)} predictions for {num_actual} examples.")
        result_files.write_text_atomically(os.path.join(output_dir, f"test_results{suffix}.tsv"), result_files.format_probabilities(rows))
        if submission:
            ids = [e.example_id if e.example_id is not None else str(i) for i, e in enumerate(real_examples)]
            result_files.write_text_atomically(os.path.join(output_dir, f"{submission}.tsv"),
                              format_submission(ids, rows, None if regression else label_list,
                                                getattr(processor, "submission_id_header", "index")))
        all_rows[suffix] = rows
    return all_rows
