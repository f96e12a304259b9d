"""The export's documentation against the code: docs/serving.md's tasks and their outputs are those of the task
specs (bert_tf.model.task_models.REGISTRY) and every bert_tf name it cites exists. (Package docstrings naming their
modules: tests/test_architecture.py, for every package.)"""
import importlib
import os
import re

from bert_tf.export import exporter
from bert_tf.model import task_models

SERVING_MD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                          "serving.md")


def read_serving_md():
    with open(SERVING_MD, encoding="utf-8") as f:
        return f.read()


def test_serving_md_lists_every_task_with_its_outputs():
    """The `--task` list names every task of the serving format, in order; the table of task outputs has a row for
    each task of the registry, in order, naming exactly its outputs and label output, and saying "no text
    signatures" where text does not apply."""
    text = read_serving_md()
    tasks = re.search(r"^\* `--task`: (.*?)^\* ", text, re.M | re.S).group(1)
    assert re.findall(r"`(\w+)`", tasks) == list(exporter.format_tasks("serving"))
    table = text.split("\nTask outputs", 1)[1].split("\n\n")[1]
    rows = dict(re.findall(r"^\| (\w+) \| (.*) \|$", table, re.M))
    assert rows.pop("task") == "outputs"
    assert list(rows) == list(task_models.REGISTRY)
    for task, row in rows.items():
        spec = task_models.REGISTRY[task]
        assert set(re.findall(r"`(\w+)`", row)) == {*spec.outputs, *filter(None, [spec.label_output])}, task
        assert ("no text signatures" in row) == (not spec.text), task


def test_every_bert_tf_name_cited_exists():
    """Every dotted bert_tf name of docs/serving.md is a module, or a name in one."""
    for name in sorted(set(re.findall(r"bert_tf(?:\.\w+)+", read_serving_md()))):
        parts = name.split(".")
        obj = importlib.import_module("bert_tf")
        for i, part in enumerate(parts[1:], 2):  # an attribute, else a submodule (ModuleNotFoundError: neither)
            obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(".".join(parts[:i]))

