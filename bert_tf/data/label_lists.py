"""Label lists, one set of rules for every run and export that keeps one:

- `label_list.txt` (`FILE_NAME`): one label per line in the model's output order, exactly as learned; blank lines
  skipped. A training run records its labels in its model_metadata.json; this file gives a model trained elsewhere
  its labels (put by hand in the output_dir), and an export's labels.txt has this form.
- On a command line: comma-separated, each label stripped (`parse`), or the path of such a file (`resolve`).
Readers refuse an empty list and a repeated label, naming where it came from.
"""
import os

from bert_tf import fileio

FILE_NAME = "label_list.txt"


def _checked(labels, source):
    if not labels:
        raise ValueError(f"{source} holds no labels.")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"{source} repeats {', '.join(repeated)}.")
    return labels


def read(path):
    """The labels of the file `path`."""
    text = fileio.read_text(path, "Label list")
    return _checked([line.rstrip("\r") for line in text.split("\n") if line.strip()], path)


def saved(output_dir):
    """(output_dir's label_list.txt, its labels or None)."""
    path = os.path.join(output_dir, FILE_NAME)
    return path, (read(path) if fileio.exists(path) else None)


def check_unchanged(labels, source, path, saved_labels):
    """Raises if `labels` (from `source`, e.g. "--label_list") differ from the `saved_labels` at `path` (None:
    none saved)."""
    if saved_labels is not None and saved_labels != labels:
        raise ValueError(f"{source} has the labels {labels}, which differs from the labels the run in that "
                         f"output_dir was trained with: {path} lists the labels {saved_labels}. Use another "
                         f"output_dir.")


def write(path, labels):
    """Writes `labels` to `path`, one per line, atomically."""
    bad = [label for label in labels if not label or "\n" in label or "\r" in label]
    if bad:
        raise ValueError(f"Cannot write the label {bad[0]!r} to {path}: labels must be non-empty, on one line.")
    fileio.write_text_atomically(path, "".join(label + "\n" for label in labels))


def parse(text):
    """"B-PER,I-PER,O" -> ["B-PER", "I-PER", "O"]; ValueError for an empty or repeated label."""
    labels = [label.strip() for label in text.split(",")]
    if not all(labels):
        raise ValueError(f"--label_list has an empty label: {text!r}.")
    return _checked(labels, "--label_list")


def resolve(label_list):
    """Labels from a list, a comma-separated string or a file; None -> None. A string without a comma names a file."""
    if label_list is None:
        return None
    if isinstance(label_list, (list, tuple)):
        return _checked([str(label) for label in label_list], "The label list")
    if fileio.isfile(label_list):
        return read(label_list)
    if "," not in label_list:
        expected = "give a file with one label per line, or the labels, comma-separated"
        if not label_list.strip():
            raise ValueError(f"--label_list is empty: {expected}.")
        raise FileNotFoundError(f"--label_list={label_list}: no such file; {expected}.")
    return parse(label_list)
