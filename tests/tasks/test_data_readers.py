"""Your own data as it comes (bert_tf.tasks.classifier.processors): the tsv, csv and jsonl tasks read the same data
into the same examples; csv's quoting and line breaks; JSON's value types; the column-name flags; each bad input's
error naming the file and line; and README's "Your own data" command, run as written on tiny data."""
import csv
import io
import json
import os
import random
import re

import numpy as np
import pytest
import tiny_classifier
from tiny_classifier import tsv_line, write_lines

from bert_tf.tasks.classifier import processors

ROWS = [  # (id, text_a, text_b, label): what every format below holds
    ("a1", "good cat", "yes", "pos"),
    ("a2", 'the "big" dog, it ran', "", "neg"),
    ("a3", "ok", "no", "mixed"),
]


def _write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _csv_text(header, rows):
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])  # Python's writer: RFC 4180 quoting, "\r\n" line ends
    return out.getvalue()


def _jsonl(objects):
    return "".join(json.dumps(o) + "\n" for o in objects)


def _summary(examples):
    return [(e.guid, e.text_a, e.text_b, e.label, e.example_id) for e in examples]


def _write_all_formats(d, split, header, rows):
    """`rows` under `header` as d/tsv/<split>.tsv, d/csv/<split>.csv, d/jsonl/<split>.jsonl."""
    write_lines(f"{d}/tsv/{split}.tsv", [tsv_line(*header)] + [tsv_line(*row) for row in rows])
    _write_bytes(f"{d}/csv/{split}.csv", _csv_text(header, rows).encode())
    _write_bytes(f"{d}/jsonl/{split}.jsonl", _jsonl(dict(zip(header, row)) for row in rows).encode())


def test_each_format_reads_the_same_data_into_the_same_examples(tmp_path):
    d = str(tmp_path)
    _write_all_formats(d, "train", ("id", "text_a", "text_b", "label", "note"), [(*row, "x") for row in ROWS])
    _write_all_formats(d, "dev", ("label", "text_a"), [(label, text) for _, text, _, label in ROWS[:2]])
    _write_all_formats(d, "test", ("text_a", "id"), [("big cat", "t9"), ("sad dog", "t7")])
    expected = {"train": [(f"train-{i}", a, b, label, i) for i, a, b, label in ROWS],
                "dev": [(f"dev-{n}", a, None, label, str(n)) for n, (_, a, _, label) in enumerate(ROWS[:2])]}
    for task in ("tsv", "csv", "jsonl"):
        p = processors.get_processor(task)
        assert type(p).extension == task
        train = p.get_train_examples(f"{d}/{task}")
        assert _summary(train) == expected["train"], task
        assert [e.source for e in train] == [f"{d}/{task}/train.{task}:{n}" for n in (
            (1, 2, 3) if task == "jsonl" else (2, 3, 4))]
        assert _summary(p.get_dev_examples(f"{d}/{task}")) == expected["dev"], task
        assert p.learn_labels(f"{d}/{task}", train) == ["mixed", "neg", "pos"]
        assert _summary(p.get_test_examples(f"{d}/{task}")) == [("test-t9", "big cat", None, "mixed", "t9"),
                                                                 ("test-t7", "sad dog", None, "mixed", "t7")]


def test_csv_quoting_line_breaks_bom_and_blank_lines(tmp_path):
    text = ('\ufeff"Text_A",label\r\n'
            '"one, two",pos\r\n'
            '\r\n'
            '"a ""quoted""\r\nline break",neg\r\n'
            'plain,"p,o,s"\n')
    path = _write_bytes(f"{tmp_path}/train.csv", text.encode())
    assert [(line, line.source) for line in processors.read_csv(path)] == [
        (["Text_A", "label"], f"{path}:1"), (["one, two", "pos"], f"{path}:2"),
        (['a "quoted"\r\nline break', "neg"], f"{path}:4"), (["plain", "p,o,s"], f"{path}:6")]
    examples = processors.CsvProcessor().get_train_examples(str(tmp_path))
    assert [(e.text_a, e.label, e.source) for e in examples] == [
        ("one, two", "pos", f"{path}:2"), ('a "quoted"\r\nline break', "neg", f"{path}:4"),
        ("plain", "p,o,s", f"{path}:6")]


def test_jsonl_value_types(tmp_path):
    path = _write_bytes(f"{tmp_path}/train.jsonl", (
        '\ufeff{"text_a": "a", "label": "pos", "id": 7}\n'
        '\n'
        '{"text_a": "b", "text_b": null, "label": 1}\r\n'
        '{"text_a": "c", "label": 1.0, "text_b": "d \u2028 e"}\n'  # U+2028 as it is: not a line break here
        '   \n'
        '{"text_a": "e", "label": true}\n'
        '{"text_a": "f", "label": ["x", 2, false]}').encode())
    examples = processors.JsonlProcessor().get_train_examples(str(tmp_path))
    assert [(e.text_b, e.label, e.example_id, e.source) for e in examples] == [
        (None, "pos", "7", f"{path}:1"), (None, "1", "1", f"{path}:3"), ("d \u2028 e", "1.0", "2", f"{path}:4"),
        (None, "true", "3", f"{path}:6"), (None, ["x", "2", "false"], "4", f"{path}:7")]
    # The label list: every label of a list label, with the others, sorted
    assert processors.JsonlProcessor().learn_labels(str(tmp_path)) == ["1", "1.0", "2", "false", "pos", "true", "x"]


def test_column_names(tmp_path):
    d = str(tmp_path)
    write_lines(f"{d}/train.tsv", [tsv_line("Sentence", "Gold", "QID"), tsv_line("good cat", "pos", "q1")])
    _write_bytes(f"{d}/train.csv", _csv_text(["Sentence", "Gold", "QID"], [["good cat", "pos", "q1"]]).encode())
    _write_bytes(f"{d}/train.jsonl", _jsonl([{"sentence": "good cat", "gold": "pos", "qid": "q1"}]).encode())
    columns = {"text_a": "sentence", "label": "gold", "id": "qid"}
    for task in ("tsv", "csv", "jsonl"):  # header names in any case (Sentence = SENTENCE); JSON keys exactly
        named = {field: name.upper() for field, name in columns.items()} if task != "jsonl" else columns
        examples = processors.get_processor(task, columns=named).get_train_examples(d)
        assert _summary(examples) == [("train-q1", "good cat", None, "pos", "q1")], task
    with pytest.raises(ValueError, match=r"train\.jsonl:1: the object lacks the key\(s\) Sentence "):
        processors.get_processor("jsonl", columns={**columns, "text_a": "Sentence"}).get_train_examples(d)
    with pytest.raises(ValueError, match=r"train\.csv:1: the header \['Sentence', 'Gold', 'QID'\] lacks the "
                                         r"column\(s\) question \(expected sentence, gold, and optionally question "
                                         r"and qid\)"):
        processors.get_processor("csv", columns={**columns, "text_b": "question"}).get_train_examples(d)
    with pytest.raises(ValueError, match=r"--text_a_column: task MRPC reads fixed columns; column names are for "
                                         r"your own data"):
        processors.get_processor("MRPC", columns={"text_a": "sentence"})
    with pytest.raises(ValueError, match=r"unknown field\(s\) text in columns; the fields are text_a, text_b, "):
        processors.CsvProcessor(columns={"text": "x"})


# Each bad input of the csv and jsonl tasks: (file name, its bytes, the error's message as a regex after the path).
BAD = {
    "csv_no_header": ("train.csv", b"", r": empty file; expected a header line naming the columns \(text_a, label, "
                      r"and optionally text_b and id\)"),
    "csv_missing_column": ("train.csv", b"text,label\nx,pos\n", r":1: the header \['text', 'label'\] lacks the "
                           r"column\(s\) text_a"),
    "csv_fields": ("train.csv", b'text_a,label\nx,pos\n"y,z",neg,extra\n', r":3: 3 comma-separated fields, but the "
                   r"header names 2\."),
    "csv_quotes": ("train.csv", b'text_a,label\n"x"y,pos\n', r":2: ',' expected after '\"'"),
    "csv_utf8": ("train.csv", b"text_a,label\nok,pos\nbad \xff,neg\n", r":3: not valid UTF-8"),
    "jsonl_empty": ("train.jsonl", b"\n  \n", r": empty file; expected one JSON object per line \(keys text_a, "
                    r"label, and optionally text_b and id\)"),
    # column 16: the '"' of "label", after the 15 characters `{"text_a": "y" `
    "jsonl_malformed": ("train.jsonl", b'{"text_a": "x", "label": "pos"}\n{"text_a": "y" "label": 1}\n',
                        r":2:16: malformed JSON \(Expecting ',' delimiter\); expected one JSON object per line\."),
    "jsonl_not_object": ("train.jsonl", b'["x", "pos"]\n', r":1: expected a JSON object \(\{\.\.\.\}\) per line, "
                         r"found \[\"x\", \"pos\"\]\."),
    "jsonl_missing_key": ("train.jsonl", b'{"text_a": "x", "labels": ["pos"]}\n', r":1: the object lacks the "
                          r"key\(s\) label \(it has text_a, labels; expected text_a, label, and optionally text_b and "
                          r"id\)\."),
    "jsonl_text": ("train.jsonl", b'{"text_a": 5, "label": "pos"}\n', r":1: 'text_a' \(text_a\) is 5; expected a "
                   r"string\."),
    "jsonl_text_b": ("train.jsonl", b'{"text_a": "x", "text_b": ["y"], "label": "pos"}\n', r":1: 'text_b' "
                     r"\(text_b\) is \[\"y\"\]; expected a string or null\."),
    "jsonl_label": ("train.jsonl", b'{"text_a": "x", "label": {"a": 1}}\n', r":1: 'label' \(label\) is "
                    r"\{\"a\": 1\}; expected a string, number or boolean, or a list of them\."),
    "jsonl_label_item": ("train.jsonl", b'{"text_a": "x", "label": ["a", null]}\n', r":1: 'label' \(label\) is "
                         r"null; expected a string, number or boolean\."),
    "jsonl_id": ("train.jsonl", b'{"text_a": "x", "label": "a", "id": [1]}\n', r":1: 'id' \(id\) is \[1\]; "
                 r"expected a string, number or boolean\."),
    "jsonl_utf8": ("train.jsonl", b'{"text_a": "x", "label": "a"}\n{"text_a": "\xc3("}\n', r":2: not valid UTF-8"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_names_the_file_line_and_what_was_expected(tmp_path, case):
    name, data, message = BAD[case]
    path = _write_bytes(f"{tmp_path}/{name}", data)
    processor = processors.get_processor(name.split(".")[1])
    with pytest.raises(ValueError, match="^" + re.escape(path) + message):
        processor.get_train_examples(str(tmp_path))


@pytest.mark.slow
def test_readme_command_runs_as_written(tmp_path, run_main):
    """README's "Your own data" command on tiny data in its layout (csv: a review with a comma, quotes and a line
    break; a column the run ignores), its flags as written plus a tiny run's sizes, in one process with a GLUE task
    given a column name (refused)."""
    readme = pytest.importorskip("test_readme_checkpoint_examples")  # README's sections and commands (keras_hub)
    flags, values = readme.classifier_command("### Your own data", str(tmp_path))
    tiny_classifier.write_tiny_release(str(tmp_path / "base"), **tiny_classifier.L1_H16)
    rng, labels = random.Random(3), ["neg", "pos", "so, so"]
    header = ["id", values["text_a_column"].upper(), values["label_column"], "stars"]
    splits = {"train": [[f"r{i}", tiny_classifier.random_sentence(rng), labels[i % 3], i] for i in range(8)],
              "dev": [[f"d{i}", tiny_classifier.random_sentence(rng), labels[i % 3], i] for i in range(3)],
              "test": [[f"t{i}", tiny_classifier.random_sentence(rng)] for i in range(3)]}
    splits["train"][0][1] = 'the "cat", it sat\non the mat'
    for split, rows in splits.items():
        _write_bytes(os.path.join(values["data_dir"], f"{split}.csv"),
                     _csv_text(header[:2] if split == "test" else header, rows).encode())
    out = values["output_dir"]
    glue = ["--task_name=MRPC", "--do_predict", f"--data_dir={values['data_dir']}", f"--output_dir={out}-glue",
            f"--text_a_column={values['text_a_column']}"]
    errors, logs = run_main(tiny_classifier.SCRIPT, [*flags, "--max_seq_length=16", "--train_batch_size=4",
                                                     "--num_train_epochs=1"], glue, with_logs=True)
    assert errors[0] is None, logs[-4000:]
    assert errors[1].startswith("ValueError: --text_a_column: task MRPC reads fixed columns")
    with open(f"{out}/model_metadata.json") as f:
        assert json.load(f)["labels"] == labels  # sorted
    results = tiny_classifier.eval_results(out)
    assert results["global_step"] == "2"  # 8 examples / 4 x 1 epoch
    assert np.loadtxt(f"{out}/test_results.tsv", ndmin=2).shape == (3, 3)
    with open(f"{out}/predictions.tsv") as f:
        rows = [line.split("\t") for line in f.read().splitlines()]
    assert rows[0] == ["id", "prediction"] and [row[0] for row in rows[1:]] == ["t0", "t1", "t2"]
    assert {row[1] for row in rows[1:]} <= set(labels)
