"""The export's documentation against the code: docs/serving.md's tasks and their outputs are those of the task
models (bert_tf.model.task_models.REGISTRY) and every bert_tf name it cites exists. (Package docstrings naming their
modules: tests/test_architecture.py, for every package; the documented commands run: tests/test_docs_commands.py.)
And the export's versions (`exporter.version_dir`): an export never rewrites a version directory; and its options."""
import importlib
import json
import os
import re
import types

import pytest
import tiny_classifier

from bert_tf import checkpoints, fileio
from bert_tf.export import exporter
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import runner, swag

SERVING_MD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                          "serving.md")


def read_serving_md():
    with open(SERVING_MD, encoding="utf-8") as f:
        return f.read()


def test_serving_md_lists_every_task_with_its_outputs(tiny_config):
    """The `--task` list names every task of the serving format, in order; the table of task outputs has a row for
    each task of the registry, in order, naming exactly its model's outputs and its label output, and saying "no
    text signatures" where text does not apply."""
    text = read_serving_md()
    tasks = re.search(r"^\* `--task`: (.*?)^\* ", text, re.M | re.S).group(1)
    assert re.findall(r"`(\w+)`", tasks) == list(exporter.format_tasks("serving"))
    table = text.split("\nTask outputs", 1)[1].split("\n\n")[1]
    rows = dict(re.findall(r"^\| (\w+) \| (.*) \|$", table, re.M))
    assert rows.pop("task") == "outputs"
    assert list(rows) == list(task_models.REGISTRY)
    for task, row in rows.items():
        spec = task_models.REGISTRY[task]
        model = spec.build(tiny_config, 2 if spec.labelled else None)
        outputs = task_models.output_names(model)
        assert set(re.findall(r"`(\w+)`", row)) == {*outputs, *filter(None, [spec.label_output])}, task
        assert ("no text signatures" in row) == (not task_models.takes_text(model)), task


def test_every_bert_tf_name_cited_exists():
    """Every dotted bert_tf name of docs/serving.md is a module, or a name in one."""
    for name in sorted(set(re.findall(r"bert_tf(?:\.\w+)+", read_serving_md()))):
        parts = name.split(".")
        obj = importlib.import_module("bert_tf")
        for i, part in enumerate(parts[1:], 2):  # an attribute, else a submodule (ModuleNotFoundError: neither)
            obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(".".join(parts[:i]))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(vocab_file, an L=2, H=32 BertConfig) of tests/tiny_classifier.py."""
    vocab_file, config_file = tiny_classifier.write_tiny_model(str(tmp_path_factory.mktemp("tiny")))
    return vocab_file, BertConfig.from_json_file(config_file)


def files_of(directory):
    """{relative path: (bytes, mtime in ns)} of every file under `directory`."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = (f.read(), os.stat(path).st_mtime_ns)
    return found


def test_an_export_takes_the_next_free_version_and_refuses_an_existing_one(tmp_path, tiny):
    """Without a version an export takes one above every numbered entry of export_dir (a killed export's directory
    without its saved_model.pb, a live export's staging directory), the versions before untouched; a given version
    that exists is refused naming --version and the next free one."""
    vocab_file, config = tiny
    model = task_models.build_task_model("classifier", config, 2)
    base = tmp_path / "m"

    def export(**fields):
        return exporter.export("classifier", str(base), model, max_seq_length=8, text_ops="none",
                               vocab_file=vocab_file, **fields)

    assert export() == str(base / "1")
    first = files_of(base / "1")
    assert "saved_model.pb" in first
    tiny_classifier.write_lines(str(base / "2" / "variables" / "variables.index"), ["a killed export's"])
    os.makedirs(fileio.temp_path(str(base / ".3")))  # a live export's staging directory (`staged_directory`'s name)
    assert export() == str(base / "4")
    assert files_of(base / "1") == first
    for taken in (1, 2):
        with pytest.raises(FileExistsError, match=rf"m/{taken} already exists .*--version.* \(5\)"):
            export(version=taken)
    assert sorted(name for name in os.listdir(base) if fileio.TEMP_MARK not in name) == ["1", "2", "4"]


def test_a_rerun_exports_a_new_version_above_the_served_one(tmp_path, tiny):
    """The runner's export after training (`runner.export`, what every run script's --export_dir calls) is version
    <global step>; a rerun with the same step count, or fewer, takes the next free version above the highest, and
    the served version's files stay as they were."""
    vocab_file, config = tiny
    task = swag.SwagTask(data_dir=str(tmp_path))  # swag: no text signatures, a cheap export
    run = runner.RunConfig(bert_config_file=None, vocab_file=vocab_file, output_dir=str(tmp_path / "out"),
                           do_train=True, max_seq_length=8, export_dir=str(tmp_path / "serving"))
    model = task.build_model(config)
    assert runner.export(run, task, types.SimpleNamespace(step=343, model=model)) == [str(tmp_path / "serving" / "343")]
    served = files_of(tmp_path / "serving" / "343")
    for step, version in ((343, "344"), (20, "345")):
        assert runner.export(run, task, types.SimpleNamespace(step=step, model=model)) == [
            str(tmp_path / "serving" / version)]
    assert sorted(os.listdir(tmp_path / "serving")) == ["343", "344", "345"]
    assert files_of(tmp_path / "serving" / "343") == served


def test_options_reach_the_writer_or_the_model_and_no_other_is_taken(tmp_path, tiny):
    """An export's options are its writer's keyword arguments and, where it loads the model, the task model's
    (--normalize_embeddings): from a checkpoint they reach the model and the
    metadata; one that the format does not take, or a model option with a built model, is a TypeError naming it
    and the format, before anything is written."""
    vocab_file, config = tiny
    config_file = str(tmp_path / "bert_config.json")
    config.to_json_file(config_file)
    prefix = checkpoints.save_original_checkpoint(task_models.build_task_model("encoder", config),
                                                  str(tmp_path / "ckpt" / "bert_model.ckpt"))
    path = exporter.export("embedding", str(tmp_path / "e"), init_checkpoint=prefix, bert_config_file=config_file,
                           vocab_file=vocab_file, max_seq_length=8, text_ops="none", pooling="cls",
                           normalize_embeddings=False)
    with open(os.path.join(path, "assets.extra", "export_metadata.json")) as f:
        meta = json.load(f)
    assert (meta["pooling"], meta["normalize_embeddings"], meta["text_ops"]) == ("cls", False, "none")
    model = task_models.build_task_model("embedding", config)
    for fmt, option in (("litert", "use_xla"), ("serving", "pooling")):
        with pytest.raises(TypeError, match=f"^--{option} does not apply to --format={fmt} --task=embedding"):
            exporter.export("embedding", str(tmp_path / "x"), model, format=fmt, vocab_file=vocab_file,
                            **{option: "cls"})
    assert not (tmp_path / "x").exists()
