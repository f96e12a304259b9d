"""Every script that loads a pre-trained model takes a TF Hub BERT SavedModel alone as --init_checkpoint (its
vocab_file asset, casing and config; no --vocab_file, --bert_config_file or --do_lower_case), through the one loading
path (`checkpoints.load_pretrained`): extract_features.py and predict_masked_lm.py give the outputs of the original
release the SavedModel was exported from; export_saved_model.py, convert_checkpoint.py and run_ner.py run from it
(run_classifier.py from a Model Garden TF Hub model: tests/tasks/test_classifier_with_tfhub.py); every training
script's task starts from it through the runner.
"""
import json
import os

import numpy as np
import pytest
import script_steps
import tensorflow as tf
from export.test_tfhub import hub_export, tiny_release  # noqa: F401, F811 (a fixture)
from tasks import test_ner

from bert_tf import checkpoints
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import classifier, ner, pretraining, runner, squad, swag

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = ["the quick brown [MASK]", "hello world ||| the lazy [MASK] jumps", "[MASK] is it ?"]
pytestmark = pytest.mark.slow  # a script process


def _script(name):
    return os.path.join(REPO, "run_scripts", name)


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_release):  # noqa: F811 (the fixture imported above)
    """tests/export/test_tfhub.py's original release (a tiny BERT with its masked-LM head, random weights), its
    bert-tf TF Hub export, and the input lines."""
    d = tmp_path_factory.mktemp("tfhub_alone")
    hub = hub_export("masked_lm", tiny_release["vocab"], d / "hub", bert_config_file=tiny_release["config"],
                     init_checkpoint=tiny_release["ckpt"], max_seq_length=16)
    (d / "input.txt").write_text("".join(line + "\n" for line in LINES))
    return d, tiny_release["dir"], hub


def _release_flags(release):
    return [f"--vocab_file={release / 'vocab.txt'}", f"--bert_config_file={release / 'bert_config.json'}",
            f"--init_checkpoint={release / 'bert_model.ckpt'}"]


@pytest.fixture(scope="module")
def runs(models, tmp_path_factory, child_env):
    """The script runs of the tests below, one after the other in one process (tests/script_steps.py):
    extract_features.py and predict_masked_lm.py from the Hub model alone and from the release; export_saved_model.py
    and convert_checkpoint.py from the Hub model alone; run_ner.py fine-tuning it. Returns the output directory and
    {script: its runs' errors}."""
    d, release, hub = models
    out = tmp_path_factory.mktemp("runs")
    steps = {}
    for script in ("extract_features.py", "predict_masked_lm.py"):
        common = [f"--input_file={d / 'input.txt'}", "--max_seq_length=16"]
        common += ["--layers=-1,-2"] if script == "extract_features.py" else []
        steps[script] = [[*common, f"--output_file={out / f'{script}.hub.jsonl'}", f"--init_checkpoint={hub}"],
                         [*common, f"--output_file={out / f'{script}.release.jsonl'}", *_release_flags(release)]]
    steps["export_saved_model.py"] = [["--task=encoder", f"--init_checkpoint={hub}", f"--export_dir={out / 'serving'}",
                                       "--max_seq_length=16"]]
    steps["convert_checkpoint.py"] = [[f"--init_checkpoint={hub}", f"--output_dir={out / 'converted'}"]]
    (out / "conll").mkdir()
    (out / "conll" / "train.txt").write_text(test_ner.CONLL_SAMPLE)
    steps["run_ner.py"] = [[f"--data_dir={out / 'conll'}", f"--output_dir={out / 'ner'}", f"--init_checkpoint={hub}",
                            "--do_train", "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1"]]
    done, _ = script_steps.run([(_script(name), argvs) for name, argvs in steps.items()], REPO, child_env())
    return out, {name: step["errors"] for name, step in zip(steps, done)}


@pytest.mark.parametrize("script", ["extract_features.py", "predict_masked_lm.py"])
def test_the_hub_model_alone_gives_the_release_outputs(runs, script):
    out, errors = runs
    assert errors[script] == [None, None]
    got, expected = ([json.loads(line) for line in open(out / f"{script}.{source}.jsonl")]
                     for source in ("hub", "release"))
    assert len(got) == len(LINES)
    if script == "extract_features.py":
        for a, b in zip(got, expected):
            assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
            np.testing.assert_allclose([[layer["values"] for layer in f["layers"]] for f in a["features"]],
                                       [[layer["values"] for layer in f["layers"]] for f in b["features"]], atol=1e-5)
    else:
        assert [[[p["token"] for p in m["predictions"]] for m in line["masks"]] for line in got] == \
            [[[p["token"] for p in m["predictions"]] for m in line["masks"]] for line in expected]


def test_export_and_convert_from_the_hub_model_alone(models, runs):
    _, release, _ = models
    out, errors = runs
    assert errors["export_saved_model.py"] == [None]
    served = tf.saved_model.load(str(out / "serving" / "1"))
    assert served.signatures["serving_text"](text_a=tf.constant(["eu rejects"]))["pooled_output"].shape == (1, 32)
    assert errors["convert_checkpoint.py"] == [None]
    original = tf.train.load_checkpoint(str(release / "bert_model.ckpt"))
    converted = tf.train.load_checkpoint(str(out / "converted" / "bert_model.ckpt"))
    names = [n for n in original.get_variable_to_shape_map() if n.startswith("bert/")]
    for name in names:
        np.testing.assert_array_equal(converted.get_tensor(name), original.get_tensor(name), err_msg=name)
    assert (out / "converted" / "vocab.txt").read_text() == (release / "vocab.txt").read_text()


def test_run_ner_fine_tunes_the_hub_model_alone(runs):
    out, errors = runs
    assert errors["run_ner.py"] == [None]
    assert checkpoints.latest_checkpoint(str(out / "ner"))


def test_every_training_task_starts_from_the_hub_model_alone(models, tmp_path):
    """The runner's one loading path for every training script (run_classifier, run_ner, run_squad, run_swag,
    run_pretraining): the Hub model's vocab_file asset, casing and config, its weights restored by the Pretrained
    the Trainer gets (every encoder variable; the task's head left to its initial values)."""
    _, release, hub = models
    (tmp_path / "train.json").write_text("{}")
    tasks = {"classifier": classifier.ClassifierTask("mrpc", str(tmp_path)), "ner": ner.NerTask(str(tmp_path)),
             "squad": squad.SquadTask(train_file=str(tmp_path / "train.json")), "swag": swag.SwagTask(str(tmp_path)),
             "pretraining": pretraining.PretrainingTask(input_file="unused", max_predictions_per_seq=2)}
    expected = BertConfig.from_json_file(str(release / "bert_config.json")).to_dict()
    for name, task in tasks.items():
        run = runner.RunConfig(None, None, init_checkpoint=hub, output_dir=str(tmp_path / name), do_train=True,
                               max_seq_length=16)
        run, pretrained = runner.prepare(run, task)
        assert run.vocab_file and tf.io.gfile.exists(run.vocab_file) and run.do_lower_case is True, name
        assert pretrained.config.to_dict() == expected and pretrained.tokenizer is not None, name
        # the task's model, as its build_model makes it once read_inputs has read the labels
        model = task_models.build_task_model(name, pretrained.config, num_labels=3, restored=pretrained.restored)
        report = pretrained.restore(model)
        encoder = [n for n in checkpoints.original_variable_map(model) if n.startswith("bert/")]
        assert encoder and set(encoder) <= set(report.loaded), name
        if name == "pretraining":  # the Hub model's masked-LM head; it has no next-sentence head
            assert report.heads == ["masked_lm"] and report.missing_heads == ["next_sentence"]
        else:
            assert report.heads == [] and report.missing_heads == list(task.spec.head_names), name
