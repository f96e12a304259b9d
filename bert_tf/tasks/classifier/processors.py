"""The data side of run_classifier.py: examples and the task processors that read them.

`cola`, `mnli`, `mrpc`, `xnli` read their files exactly as the original does; bert-tf adds the other GLUE tasks and your
own data (`tsv`, `csv`, `jsonl`: `TsvProcessor`). Errors name the file and line. A task of your own: subclass
`DataProcessor` and `register_processor` it.
"""
import collections
import csv
import dataclasses
import io
import json
import math
import os
from typing import Any

from absl import logging

from bert_tf import fileio
from bert_tf.data import label_lists
from bert_tf.tasks import run_record


@dataclasses.dataclass
class InputExample:
    """One example: `guid`, `text_a`, optional `text_b`, `label` (None for unlabeled test data); bert-tf's
    `example_id` (the id a submission file reports) and `source` (`file:line`, for errors)."""
    guid: str
    text_a: str
    text_b: str | None = None
    label: Any = None
    example_id: str | None = None
    source: str | None = None


class PaddingInputExample:
    """A fake example padding an eval/predict set to a multiple of the batch size; it becomes an all-zero feature with
    `is_real_example=False`, which metrics and outputs ignore."""


class TsvLine(list):
    """A row of a TSV or CSV file (a list of fields) that remembers where it starts: `source`, `file:line`."""

    def __init__(self, fields, source):
        super().__init__(fields)
        self.source = source

    def field(self, index):
        """The field at `index` (negative counts from the end); a clear error when the row is too short."""
        try:
            return self[index]
        except IndexError:
            need = index + 1 if index >= 0 else -index
            raise ValueError(f"{self.source}: expected at least {need} tab-separated fields, found {len(self)}"
                             f"{' (empty line)' if not self else ''}.") from None


def read_tsv(input_file, quotechar=None):
    """Reads a tab-separated file as the original `_read_tsv` (no quote character) into `TsvLine`s, with no limit on a
    field's length. Missing files and malformed lines raise errors naming the file and line."""
    text = fileio.read_text(input_file, "Data file")
    # Lines end at "\n" only (as TensorFlow's GFile splits them); csv drops the "\n" or "\r\n".
    return _read_delimited(input_file, io.StringIO(text, newline="\n"), len(text), delimiter="\t",
                           quotechar=quotechar, quoting=csv.QUOTE_NONE if quotechar is None else csv.QUOTE_MINIMAL)


def read_csv(input_file):
    """Reads an RFC 4180 CSV file (UTF-8, a BOM allowed) as `TsvLine`s; blank lines skipped."""
    text = fileio.read_text(input_file, "Data file", encoding="utf-8-sig")
    return [line for line in _read_delimited(input_file, io.StringIO(text, newline=""), len(text), strict=True) if line]


def _read_delimited(input_file, stream, size, **dialect):
    """The `TsvLine`s of csv.reader(`stream`, **dialect), fields up to `size` characters."""
    reader = csv.reader(stream, **dialect)
    lines, start = [], 1
    limit = csv.field_size_limit(max(csv.field_size_limit(), size))
    try:
        for fields in reader:
            lines.append(TsvLine(fields, f"{input_file}:{start}"))
            start = reader.line_num + 1
    except csv.Error as e:
        raise ValueError(f"{input_file}:{reader.line_num}: {e}") from None
    finally:
        csv.field_size_limit(limit)
    return lines


def read_jsonl(input_file):
    """[(source `file:line`, object)] of a JSON-lines file, blank lines skipped; malformed JSON or a non-object value is
    an error naming the file and line."""
    objects = []
    text = fileio.read_text(input_file, "Data file", encoding="utf-8-sig")
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines: JSON strings may hold U+2028
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{input_file}:{number}:{e.colno}: malformed JSON ({e.msg}); expected one JSON object "
                             "per line.") from None
        if not isinstance(value, dict):
            raise ValueError(f"{input_file}:{number}: expected a JSON object ({{...}}) per line, found "
                             f"{_shown(value)}.")
        objects.append((f"{input_file}:{number}", value))
    return objects


def _shown(value):
    """A JSON value as an error message shows it: as JSON, cut to 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def regression_label(value, source, what="label"):
    """A regression label `value` as a float; ValueError naming `source` unless it is finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source}: the {what} {value!r} is not a number.") from None
    if not math.isfinite(number):
        raise ValueError(f"{source}: the {what} {value!r} is not a finite number.")
    return number


class DataProcessor:
    """Base class of the data sets: the splits' examples and the label list. `submission_name`: the GLUE test file name
    without `.tsv` (None: none); `metrics`: the GLUE metrics eval_results.txt adds."""
    is_regression = False
    submission_name = None
    metrics = ()

    def get_train_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no training set.")

    def get_dev_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no dev set (drop --do_eval).")

    def get_test_examples(self, data_dir):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} has no test set (drop --do_predict).")

    def get_labels(self):
        raise ValueError(f"Task {type(self).__name__[:-len('Processor')]} defines no label list.")

    def dev_splits(self, data_dir):
        """[(suffix, examples)] of every dev set; suffix "" names the main one."""
        return [("", self.get_dev_examples(data_dir))]

    def test_splits(self, data_dir):
        """[(suffix, examples, submission name)] of every test set to predict."""
        return [("", self.get_test_examples(data_dir), self.submission_name)]

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """The original's reader, kept under its name for subclasses written against it."""
        return read_tsv(input_file, quotechar)


class XnliProcessor(DataProcessor):
    """XNLI as the original reads it: train on MultiNLI machine-translated to `language`, dev on the rows of
    `xnli.dev.tsv` in that language."""

    def __init__(self, language="zh"):
        self.language = language

    def get_train_examples(self, data_dir):
        lines = read_tsv(os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language))
        examples = []
        for i, line in enumerate(lines[1:], start=1):
            label = line.field(2)
            if label == "contradictory":
                label = "contradiction"
            examples.append(InputExample(guid="train-%d" % i, text_a=line.field(0), text_b=line.field(1),
                                         label=label, source=line.source))
        return examples

    def get_dev_examples(self, data_dir):
        lines = read_tsv(os.path.join(data_dir, "xnli.dev.tsv"))
        examples = []
        for i, line in enumerate(lines[1:], start=1):
            if line.field(0) != self.language:
                continue
            examples.append(InputExample(guid="dev-%d" % i, text_a=line.field(6), text_b=line.field(7),
                                         label=line.field(1), source=line.source))
        return examples

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]


class MnliProcessor(DataProcessor):
    """MultiNLI (GLUE): sentence pairs in columns 8 and 9, gold label last; matched and mismatched sets."""

    def get_train_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "dev_matched.tsv")), "dev_matched")

    def get_test_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "test_matched.tsv")), "test")

    def dev_splits(self, data_dir):
        return [("", self.get_dev_examples(data_dir))] + self._mismatched(data_dir, "dev")

    def test_splits(self, data_dir):
        return [("", self.get_test_examples(data_dir), "MNLI-m")] + [
            (*split, "MNLI-mm") for split in self._mismatched(data_dir, "test")]

    def _mismatched(self, data_dir, split):
        """[("_mm", the examples of data_dir/<split>_mismatched.tsv)], or [] (a warning)."""
        path = os.path.join(data_dir, f"{split}_mismatched.tsv")
        if not fileio.exists(path):
            logging.warning("%s not found: skipping the MNLI mismatched set.", path)
            return []
        return [("_mm", self._create_examples(read_tsv(path), f"{split}_mismatched"))]

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]

    def _create_examples(self, lines, set_type):
        test = set_type.startswith("test")
        examples = []
        for line in lines[1:]:
            index = line.field(0)
            examples.append(InputExample(
                guid="%s-%s" % (set_type, index), text_a=line.field(8), text_b=line.field(9),
                label="contradiction" if test else line.field(-1), example_id=index, source=line.source))
        return examples


class _PairProcessor(DataProcessor):
    """Tasks whose files share one layout: a header, then text/label columns at fixed positions.

    Subclasses set `labels` (the first: a test example's), `text_columns`, `test_text_columns`
    (None: the same), `label_column`, `guid_column` (None: the line number) and `has_header` (of
    train and dev; a test file has one). A test file's first column is the id its submission file
    reports.
    """
    labels = ("0", "1")
    text_columns = (3, 4)
    test_text_columns = None
    label_column = 0
    guid_column = None
    has_header = True

    def get_train_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(read_tsv(os.path.join(data_dir, "test.tsv")), "test")

    def get_labels(self):
        return list(self.labels)

    def _label(self, line):
        return line.field(self.label_column)

    def _create_examples(self, lines, set_type):
        test = set_type == "test"
        columns = self.test_text_columns if test and self.test_text_columns else self.text_columns
        examples = []
        for i, line in enumerate(lines):
            if i == 0 and (test or self.has_header):
                continue
            key = i if self.guid_column is None else line.field(self.guid_column)
            examples.append(InputExample(
                guid="%s-%s" % (set_type, key), text_a=line.field(columns[0]),
                text_b=line.field(columns[1]) if len(columns) > 1 else None,
                label=self.labels[0] if test else self._label(line),
                example_id=line.field(0) if test else None, source=line.source))
        return examples


class MrpcProcessor(_PairProcessor):
    """MRPC (GLUE): `Quality  #1 ID  #2 ID  #1 String  #2 String`, guid from the line number."""
    submission_name = "MRPC"
    metrics = ("f1",)


class ColaProcessor(_PairProcessor):
    """CoLA (GLUE): train/dev without header (`source  label  original-label  sentence`); test `index  sentence`."""
    text_columns = (3,)
    test_text_columns = (1,)
    label_column = 1
    has_header = False
    submission_name = "CoLA"
    metrics = ("mcc",)


class Sst2Processor(_PairProcessor):
    """SST-2 (GLUE): `sentence  label`; test `index  sentence`."""
    text_columns = (0,)
    test_text_columns = (1,)
    label_column = 1
    submission_name = "SST-2"


class QqpProcessor(_PairProcessor):
    """QQP (GLUE): `id  qid1  qid2  question1  question2  is_duplicate`; test `id  question1  question2`."""
    test_text_columns = (1, 2)
    label_column = 5
    guid_column = 0
    submission_name = "QQP"
    metrics = ("f1",)


class QnliProcessor(_PairProcessor):
    """QNLI (GLUE): `index  question  sentence  label`; test without the label."""
    labels = ("entailment", "not_entailment")
    text_columns = (1, 2)
    label_column = -1
    guid_column = 0
    submission_name = "QNLI"


class RteProcessor(QnliProcessor):
    """RTE (GLUE): `index  sentence1  sentence2  label`; test without the label."""
    submission_name = "RTE"


class WnliProcessor(QnliProcessor):
    """WNLI (GLUE): `index  sentence1  sentence2  label`, labels 0/1; test without the label."""
    labels = ("0", "1")
    submission_name = "WNLI"


class StsbProcessor(_PairProcessor):
    """STS-B (GLUE), regression: sentences in columns 7 and 8, the score (0-5) last."""
    is_regression = True
    metrics = ("pearson", "spearman")
    labels = (0.0,)
    text_columns = (7, 8)
    label_column = -1
    guid_column = 0
    submission_name = "STS-B"

    def get_labels(self):
        return None

    def _label(self, line):
        return regression_label(line.field(self.label_column), line.source, "STS-B score")


COLUMNS = ("text_a", "text_b", "label", "id")  # the fields of your own data; each one's column is named so by default


class TsvProcessor(DataProcessor):
    """Your own data: train/dev/test.tsv in data_dir, a header naming the columns `text_a`, `label` (optional in test),
    `text_b`, `id` (optional); others ignored. Labels: the sorted training labels, recorded in output_dir when training
    and read back otherwise. `columns` ({field of COLUMNS: name}) renames the columns; naming text_b makes it
    required. The csv task differs in `_lines`, the jsonl task in `_rows`."""
    extension = "tsv"  # of the files, and the task's name
    separator = "tab"
    submission_name = "predictions"
    submission_id_header = "id"

    def __init__(self, labels=None, columns=None):
        self.labels = list(labels) if labels is not None else None
        columns = dict(columns or {})
        unknown = sorted(set(columns) - set(COLUMNS))
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown field(s) {', '.join(unknown)} in columns; the fields "
                             f"are {', '.join(COLUMNS)}.")
        self.pairs = "text_b" in columns
        self.columns = {**{field: field for field in COLUMNS}, **columns}

    def get_train_examples(self, data_dir):
        return self._create_examples(self._path(data_dir, "train"), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(self._path(data_dir, "dev"), "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(self._path(data_dir, "test"), "test")

    def get_labels(self):
        if self.labels is None:
            raise ValueError(f"The {self.extension} task's label list is not known yet: train first (--do_train), "
                             f"which records them in output_dir, or put one label per line in "
                             f"{label_lists.FILE_NAME} there.")
        return list(self.labels)

    def learn_labels(self, data_dir, examples=None):
        """The sorted distinct labels of the training `examples` (each of a list label's)."""
        examples = self.get_train_examples(data_dir) if examples is None else examples
        self.labels = sorted({label for e in examples for label in (e.label if isinstance(e.label, list)
                                                                     else [e.label])})
        if not self.labels:
            raise ValueError(f"{self._path(data_dir, 'train')} has no examples.")
        return self.labels

    def _path(self, data_dir, split):
        return os.path.join(data_dir, f"{split}.{self.extension}")

    def _expected(self):
        names = self.columns
        return f"{names['text_a']}, {names['label']}, and optionally {names['text_b']} and {names['id']}"

    def _lines(self, path):
        return read_tsv(path)

    def _rows(self, path, required):
        """[(source `file:line`, {field: value})] of `path`; an error unless each has the `required` fields."""
        lines = self._lines(path)
        if not lines:
            raise ValueError(f"{path}: empty file; expected a header line naming the columns ({self._expected()}).")
        header = [name.strip().lower() for name in lines[0]]
        index = {name: i for i, name in reversed(list(enumerate(header)))}
        positions = {field: index[name.strip().lower()] for field, name in self.columns.items()
                     if name.strip().lower() in index}
        absent = [self.columns[field] for field in required if field not in positions]
        if absent:
            raise ValueError(f"{path}:1: the header {lines[0]} lacks the column(s) {', '.join(absent)} (expected "
                             f"{self._expected()}).")
        rows = []
        for line in lines[1:]:
            if len(line) != len(header):
                raise ValueError(f"{line.source}: {len(line)} {self.separator}-separated fields, but the header "
                                 f"names {len(header)}.")
            rows.append((line.source, {field: line[i] for field, i in positions.items()}))
        return rows

    def _create_examples(self, path, set_type):
        test = set_type == "test"
        required = ["text_a"] + ["text_b"] * self.pairs + ["label"] * (not test)
        examples = []
        for i, (source, row) in enumerate(self._rows(path, required)):
            example_id = self._value(row, "id", source) if "id" in row else str(i)
            if test:
                label = self.labels[0] if self.labels else None
            else:
                label = self._value(row, "label", source, lists=True)
            examples.append(InputExample(
                guid="%s-%s" % (set_type, example_id), text_a=self._text(row, "text_a", source),
                text_b=self._text(row, "text_b", source), label=label, example_id=example_id, source=source))
        return examples

    def _text(self, row, field, source):
        """The text of `field` in `row`; text_b may be absent or null (None)."""
        value = row.get(field)
        if isinstance(value, str) or (value is None and field == "text_b"):
            return value
        raise ValueError(f"{source}: {self.columns[field]!r} ({field}) is {_shown(value)}; expected a string"
                         f"{' or null' if field == 'text_b' else ''}.")

    def _value(self, row, field, source, lists=False):
        """The label or id of `row` as a str (numbers and booleans as JSON writes them); with `lists`, a list of str."""
        value = row[field]
        if lists and isinstance(value, list):
            return [self._value({field: item}, field, source) for item in value]
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)):
            return json.dumps(value)
        raise ValueError(f"{source}: {self.columns[field]!r} ({field}) is {_shown(value)}; expected a string, number "
                         f"or boolean{', or a list of them' if lists else ''}.")


class CsvProcessor(TsvProcessor):
    """Your own data as CSV: train/dev/test.csv, with a header row as the tsv task's."""
    extension = "csv"
    separator = "comma"

    def _lines(self, path):
        return read_csv(path)


class JsonlProcessor(TsvProcessor):
    """Your own data as JSON lines: train/dev/test.jsonl, whose keys (exact case) name the fields. A label is a string,
    number, boolean or a list of them (made strings as JSON writes them)."""
    extension = "jsonl"

    def _rows(self, path, required):
        rows = []
        for source, value in read_jsonl(path):
            absent = [self.columns[field] for field in required if self.columns[field] not in value]
            if absent:
                raise ValueError(f"{source}: the object lacks the key(s) {', '.join(absent)} (it has "
                                 f"{', '.join(value) or 'none'}; expected {self._expected()}).")
            rows.append((source, {field: value[name] for field, name in self.columns.items() if name in value}))
        if not rows:
            raise ValueError(f"{path}: empty file; expected one JSON object per line (keys {self._expected()}).")
        return rows


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
    ("csv", CsvProcessor),
    ("jsonl", JsonlProcessor),
])


_ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}


def register_processor(task_name, processor_class):
    """Adds a task of your own: `--task_name=<task_name>` (any case) then reads its data with `processor_class()`.
    Refuses a name already taken; returns `processor_class`."""
    name = task_name.strip().lower()
    if not (isinstance(processor_class, type) and issubclass(processor_class, DataProcessor)):
        raise TypeError(f"register_processor({task_name!r}): expected a DataProcessor subclass, got "
                        f"{processor_class!r}.")
    taken = PROCESSORS.get(_ALIASES.get(name, name))
    if not name or taken not in (None, processor_class):
        raise ValueError(f"register_processor: the task name {task_name!r} is "
                         f"{f'taken by {taken.__name__}' if taken else 'empty'}; choose another.")
    PROCESSORS[name] = processor_class
    return processor_class


def get_processor(task_name, xnli_language="zh", columns=None):
    """The processor of a task name (case-insensitive); unknown names list the known ones. `columns`: `TsvProcessor`'s
    column names, refused by the other tasks."""
    name = (task_name or "").strip().lower()
    name = _ALIASES.get(name, name)
    if name not in PROCESSORS:
        raise ValueError(f"Task not found: {task_name}. Known tasks: {', '.join(PROCESSORS)}.")
    if columns:
        if not issubclass(PROCESSORS[name], TsvProcessor):
            raise ValueError(f"--{next(iter(columns))}_column: task {task_name} reads fixed columns; column names "
                             "are for your own data (the tsv, csv and jsonl tasks).")
        return PROCESSORS[name](columns=columns)
    if name == "xnli":
        return XnliProcessor(language=xnli_language)
    return PROCESSORS[name]()


def prepare_label_list(processor, data_dir, output_dir, do_train, train_examples=None):
    """The task's label list (None for regression). Your own data's is learned from `train_examples` when training, else
    the one the training run in output_dir recorded (`run_record.recorded_labels`)."""
    if not isinstance(processor, TsvProcessor):
        return processor.get_labels()
    label_file, saved = run_record.recorded_labels(output_dir)
    if do_train:
        labels = processor.learn_labels(data_dir, train_examples)
        label_lists.check_unchanged(labels, f"{data_dir}/train.{processor.extension}", label_file, saved)
        return labels
    if saved is None:
        raise ValueError(f"{label_file} not found: the {processor.extension} task takes its label list from "
                         f"training; run with --do_train first (into the same output_dir) or put the labels in "
                         f"{label_lists.FILE_NAME} there, one per line.")
    processor.labels = saved
    return saved
