"""Evaluation during training, the best checkpoint and early stopping (bert_tf.tasks.evaluation) through
run_classifier.py on tiny MRPC data: the history, best/, patience, the outputs made with the best weights, a rerun
into a finished output_dir, a kill -9 mid-history, the flags' errors (the runs share one process: `run_main`), two
workers; and the history's rules on a task of given losses."""
import json
import os
import random
import subprocess
import sys

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier

from bert_tf.tasks import evaluation
from bert_tf.tasks.runner import RunConfig
from bert_tf.tasks.task import Task

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "training"))
import test_multi_worker  # noqa: E402
import test_resume_scripts  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_readme_checkpoint_examples as readme  # noqa: E402

SCRIPT = tiny_classifier.SCRIPT
NUM_STEPS = 12  # 12 examples / 2 x 2 epochs
# Stops at step 6: with a min_delta no accuracy can beat, the evaluations at 4 and 6 do not improve on step 2's.
EARLY_STOP = ["--eval_every_steps=2", "--best_metric=eval_accuracy", "--early_stopping_patience=2",
              "--early_stopping_min_delta=100"]


def _history(out):
    return evaluation.read_history(str(out))


def _assert_same_variables(got, expected):
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def _start(command, log, env=None):
    with open(log, "w") as stderr:
        return forkserver.popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tiny_classifier.REPO,
                                env=env)


def _run_and_kill(command, output_dir, log):
    """Runs `command`, SIGKILLs it once its first evaluation is in the history; returns that history."""
    forkserver.kill_once_exists(command, os.path.join(output_dir, evaluation.HISTORY_FILE), log,
                                cwd=tiny_classifier.REPO)
    return _history(output_dir)


def _common(d):
    """MRPC data and a tiny model in `d`; the flags of a run on them."""
    tiny_classifier.write_mrpc(d / "data", random.Random(0), train=12, dev=5, test=3)
    return ["--task_name=MRPC", f"--data_dir={d / 'data'}", *tiny_classifier.model_flags(d, **tiny_classifier.L1_H16),
            "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=2", "--learning_rate=1e-3", "--seed=3",
            "--eval_batch_size=5", "--predict_batch_size=3"]


def _readme_command(d):
    """README's "Training controls" command, its flags as written, on tiny stand-ins for the quickstart's outputs in
    d/quickstart_output: a 1-layer release, 248 train / 20 dev reviews (4 epochs: 62 steps of 16)."""
    (command,) = readme.bash_commands(readme.section("### Training controls"))
    assert command[:2] == [".venv/bin/python", "run_scripts/run_classifier.py"], command
    quickstart, rng = d / "quickstart_output", random.Random(0)
    tiny_classifier.write_tiny_release(quickstart / "minilm_original", **tiny_classifier.L1_H16)
    for split, count in (("train", 248), ("dev", 20)):
        tiny_classifier.write_lines(quickstart / "rotten_tomatoes" / f"{split}.tsv", [tiny_classifier.tsv_line(
            "id", "label", "text_a")] + [tiny_classifier.tsv_line(i, rng.choice(["fresh", "rotten"]),
                                                                  tiny_classifier.random_sentence(rng))
                                         for i in range(count)])
    return [flag.replace("quickstart_output/", f"{quickstart}/").replace("/tmp/controls", str(d / "readme"))
            for flag in command[2:]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, run_main):
    """The directory of the runs and the logs of their process: early_stop (trains, evaluates, predicts; rerun once
    as is, then predict-only into it), from_best (predicts from early_stop's best/ as an init_checkpoint), killed
    (early_stop's training, killed after its first evaluation, then rerun), then the errors, then README's command
    (readme)."""
    d = tmp_path_factory.mktemp("controls")
    common = _common(d)
    train = [*common, "--do_train", "--do_eval", *EARLY_STOP]
    killed = _run_and_kill([sys.executable, SCRIPT, *train, f"--output_dir={d / 'killed'}"], d / "killed",
                           d / "killed.log")
    early_stop = [*train, "--do_predict", "--save_original_checkpoint", f"--output_dir={d / 'early_stop'}"]
    errors, logs = run_main(
        SCRIPT, early_stop, early_stop, [*common, "--do_predict", f"--output_dir={d / 'early_stop'}"],
        [*common, "--do_predict", f"--output_dir={d / 'from_best'}",
         f"--init_checkpoint={d / 'early_stop' / 'best' / 'ckpt-2'}"],
        [*train, f"--output_dir={d / 'killed'}"],
        [*common, "--do_train", "--do_eval", "--best_metric=eval_loss", f"--output_dir={d / 'e1'}"],
        [*common, "--do_train", "--do_eval", "--eval_every_steps=2", "--early_stopping_patience=1",
         f"--output_dir={d / 'e2'}"],
        [*common, "--do_train", "--eval_every_steps=2", f"--output_dir={d / 'e3'}"],
        _readme_command(d),
        with_logs=True)
    return d, killed, errors, logs


def test_standing_picks_the_best_and_counts_the_evaluations_since():
    losses = [{"global_step": step, "eval_loss": loss} for step, loss in [(2, 0.9), (4, 0.5), (6, 0.7), (8, 0.6)]]
    best, waited = evaluation.standing(losses, "eval_loss", "min")
    assert (best["global_step"], waited) == (4, 2)
    assert evaluation.standing(losses, "eval_loss", "max")[0]["global_step"] == 2
    assert evaluation.standing(losses, "eval_loss", "min", min_delta=0.45)[0]["global_step"] == 2


def test_early_stopping_keeps_the_best_and_uses_it(runs):
    d, _, errors, logs = runs
    assert errors[:4] == [None] * 4, (errors, logs[-4000:])
    out = d / "early_stop"
    history = _history(out)
    assert [entry["global_step"] for entry in history] == [2, 4, 6]
    assert sorted(history[0]) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    assert "Early stopping at step 6: eval_accuracy has not improved on" in logs
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-6")  # the rerun did not train on
    assert sorted(os.listdir(out / "best")) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert tiny_classifier.eval_results(out)["global_step"] == "2"
    assert float(tiny_classifier.eval_results(out)["eval_loss"]) == pytest.approx(history[0]["eval_loss"], rel=1e-6)
    assert os.listdir(out / "eval")  # TensorBoard's events
    # The predictions after training, and those of the predict-only rerun, are the best weights' (step 2)
    assert f"Using the best checkpoint {out / 'best' / 'ckpt-2'} (step 2)" in logs
    with open(out / "test_results.tsv") as f, open(d / "from_best" / "test_results.tsv") as g:
        assert f.read() == g.read()
    # and so is the model in the original format (as the exports: the trainer's model after training)
    head = tf.train.load_checkpoint(str(out / "original" / "bert_model.ckpt")).get_tensor("output_weights")
    variables = test_resume_scripts.checkpoint_variables
    assert [name for name, value in variables(out / "best").items() if np.array_equal(value, head)]
    assert not [name for name, value in variables(out).items() if np.array_equal(value, head)]


def test_a_run_killed_mid_history_resumes_it_exactly(runs):
    d, killed_history, errors, logs = runs
    assert errors[4] is None, (errors, logs[-4000:])
    killed, straight = d / "killed", d / "early_stop"
    assert 1 <= len(killed_history) < 3, killed_history
    assert _history(killed) == _history(straight)
    variables = test_resume_scripts.checkpoint_variables
    _assert_same_variables(variables(killed), variables(straight))
    _assert_same_variables(variables(killed / "best"), variables(straight / "best"))
    assert tiny_classifier.eval_results(killed) == tiny_classifier.eval_results(straight)


def test_the_readme_command_runs_as_written(runs):
    d, _, errors, logs = runs
    assert errors[-1] is None, logs[-4000:]
    history = _history(d / "readme")
    assert [entry["global_step"] for entry in history] == [31, 62]
    best = max(history, key=lambda entry: entry["eval_accuracy"])
    assert tiny_classifier.eval_results(d / "readme")["global_step"] == str(best["global_step"])


def test_bad_flag_combinations_are_named(runs):
    errors = runs[2][5:-1]
    assert errors[0] == ("ValueError: --best_metric and --early_stopping_patience need --eval_every_steps > 0 "
                         "(evaluations during training to compare).")
    assert errors[1] == ("ValueError: --early_stopping_patience needs --best_metric: the metric whose improvement "
                         "it awaits.")
    assert errors[2] == "ValueError: --eval_every_steps evaluates while training: it needs --do_train and --do_eval."


class _Losses(Task):
    """A task whose evaluations give the eval_loss values of `losses` ({step: loss}), listing their steps."""
    modes = ("do_train", "do_eval")
    spec = None
    train_data = None

    def __init__(self, losses):
        self.losses, self.evaluated = losses, []

    def evaluate(self, run, tokenizer, trainer):
        self.evaluated.append(trainer.step)
        return {"eval_loss": self.losses[trainer.step], "global_step": trainer.step}


class _Step:
    def __init__(self):
        self.step = 0


def _on_evaluations(tmp_path, losses, steps, **settings):
    """Controls.on_evaluation at each of `steps` (no model: none may be a new best) -> (its decisions, the steps
    evaluated)."""
    run = RunConfig(output_dir=str(tmp_path), eval_every_steps=2, **settings)
    task, trainer = _Losses(losses), _Step()
    controls = evaluation.Controls(run, task, None, trainer)
    decisions = []
    for step in steps:
        trainer.step = step
        decisions.append(controls.on_evaluation(step))
    return decisions, task.evaluated


def test_patience_and_history_resume_from_the_history_file(tmp_path):
    """A resume at step 4 of a run that got to step 8: the entries after 4 are dropped and evaluated again; 0.495
    does not improve on 0.5 by more than min_delta, so the second evaluation without improvement (6) stops."""
    losses = {2: 0.5, 4: 0.6, 6: 0.495}
    patience = dict(best_metric="eval_loss", early_stopping_patience=2, early_stopping_min_delta=0.01)
    with pytest.raises(ValueError, match=r"--best_metric=eval_f2 is not a key of the task's eval results: "
                                         r"eval_loss, global_step\.$"):
        _on_evaluations(tmp_path / "bad", losses, [2], best_metric="eval_f2")
    (tmp_path / evaluation.HISTORY_FILE).write_text("".join(
        json.dumps({"global_step": step, "eval_loss": loss}) + "\n" for step, loss in [(2, 0.5), (4, 0.6), (6, 9),
                                                                                       (8, 9)]))
    assert _on_evaluations(tmp_path, losses, [4, 6], **patience) == ([False, True], [6])
    assert _history(tmp_path) == [{"global_step": step, "eval_loss": loss} for step, loss in losses.items()]
    assert _on_evaluations(tmp_path, losses, [6], **patience) == ([True], [])  # a rerun stops at once


def test_two_workers_stop_at_the_same_step(tmp_path):
    """Two loopback workers (multi_worker_mirrored): the chief evaluates and decides, both stop at step 6."""
    out = tmp_path / "out"
    command = [sys.executable, SCRIPT, *_common(tmp_path), "--do_train", "--do_eval", *EARLY_STOP,
               f"--output_dir={out}", "--distribution_strategy=multi_worker_mirrored"]
    cluster = {"worker": [f"localhost:{port}" for port in test_multi_worker._free_ports(2)]}
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    processes = {f"worker-{i}": _start(command, tmp_path / f"worker-{i}.log", {**env, "TF_CONFIG": json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}})}) for i in range(2)}
    failed = test_multi_worker._wait(processes, 600)
    assert not failed, "\n".join(f"{n}: {(tmp_path / f'{n}.log').read_text()[-3000:]}" for n in failed)
    for name, directory in (("worker-0", out), ("worker-1", out / "workers" / "worker-1")):
        assert tf.train.latest_checkpoint(str(directory)).endswith("ckpt-6"), name
        assert "Training stops at step 6" in (tmp_path / f"{name}.log").read_text(), name
    assert [entry["global_step"] for entry in _history(out)] == [2, 4, 6]
    assert tiny_classifier.eval_results(out)["global_step"] == "2"
    assert not {evaluation.HISTORY_FILE, evaluation.BEST_DIR} & set(os.listdir(out / "workers" / "worker-1"))
