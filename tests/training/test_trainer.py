import collections
import functools
import logging
import os
import shutil
import socket
import subprocess
import sys
import time

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import toy_task

from bert_tf import checkpoints, fileio
from bert_tf.model.task_models import BertClassifier, BertSpanLabeler
from bert_tf.training import distribute, prediction
from bert_tf.training.trainer import Trainer, compute_train_steps

CONFIG = toy_task.config(num_hidden_layers=1)  # one layer: each Trainer traces and optimizes half the graph


def _trainer(output_dir, seed=1, config=CONFIG, loss_fn=toy_task.loss_fn, **kwargs):
    """A Trainer of the toy task, after seeding Python, NumPy and TensorFlow with `seed`."""
    tf.keras.utils.set_random_seed(seed)
    kwargs.setdefault("learning_rate", 1e-3)
    return Trainer(lambda: BertClassifier(config, 2), loss_fn, str(output_dir),
                   strategy=distribute.get_strategy("one_device"), **kwargs)


def _pretrained(init_checkpoint):
    """What checkpoints.load_pretrained gives the toy task's Trainer for `init_checkpoint`."""
    return checkpoints.Pretrained(CONFIG, None, True, init_checkpoint)


def _weights(trainer):
    return [v.numpy() for v in trainer.model.weights]


def _max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    """A Trainer after 6 steps (2 of warm-up) in input order 7, its ckpt-6 in its output_dir: tests only read it."""
    trainer = _trainer(tmp_path_factory.mktemp("seeded_run"))
    trainer.train(toy_task.dataset_fn, 16, 6, 2, seed=7)
    return trainer


def test_trains_saves_and_summarizes(tmp_path):
    trainer = _trainer(tmp_path, save_checkpoints_steps=10, iterations_per_loop=5)
    before = trainer.model(toy_task.features())["probabilities"].numpy()
    last_loss = trainer.train(toy_task.dataset_fn, 16, 30, 3)
    assert last_loss < 0.5
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-30")
    assert {f"ckpt-{s}.index" for s in (10, 20, 30)} <= set(os.listdir(tmp_path))
    events = os.listdir(tmp_path / "train")
    assert events and events[0].startswith("events.out.tfevents")
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(str(tmp_path / "train" / events[0]))
            for v in e.summary.value}
    assert {"loss", "learning_rate", "examples_per_second"} <= tags
    after = next(trainer.predict(tf.data.Dataset.from_tensor_slices(toy_task.features()).batch(64)))
    accuracy = (after["probabilities"].argmax(-1) == toy_task.LABELS).mean()
    assert accuracy > 0.75 and (before.argmax(-1) == toy_task.LABELS).mean() < accuracy


def test_a_loop_stops_after_the_first_non_finite_loss(tmp_path):
    """Inside a loop of 5 steps: at learning rate 1e30 the first update blows the weights up, so the second step's
    loss is not finite; the loop stops there (step 2, not 5) and nothing is saved."""
    trainer = _trainer(tmp_path, learning_rate=1e30, iterations_per_loop=5, save_checkpoints_steps=5)
    with pytest.raises(FloatingPointError, match=r"The loss is (nan|inf) at step 2: stopped without saving\. "
                                                 r"The last good checkpoint: none"):
        trainer.train(toy_task.dataset_fn, 16, 10, 0)
    assert trainer.step == 2 and trainer.latest_checkpoint() is None


@tf.custom_gradient
def _infinite_gradient(x):
    """x, whose gradient is infinite."""
    return tf.identity(x), lambda upstream: upstream * np.inf


def _loss_with_infinite_gradient(labels, outputs):
    """The toy task's loss, finite, with an infinite gradient."""
    return _infinite_gradient(toy_task.loss_fn(labels, outputs))


def test_a_non_finite_gradient_stops_before_saving(tmp_path):
    """A non-finite gradient with a finite loss: its update writes NaN into the weights, so the run stops there
    (step 1 of a loop of 5), with nothing saved. (Under mixed_float16, loss scaling skips such updates and the run
    goes on: test_precision's `test_float16_overflow_step_is_skipped`.)"""
    trainer = _trainer(tmp_path, loss_fn=_loss_with_infinite_gradient, iterations_per_loop=5,
                       save_checkpoints_steps=5)
    with pytest.raises(FloatingPointError, match=r"The gradient norm is (nan|inf) at step 1: stopped without "
                                                 r"saving\. The last good checkpoint: none"):
        trainer.train(toy_task.dataset_fn, 16, 10, 0)
    assert trainer.step == 1 and trainer.latest_checkpoint() is None


def test_a_copied_output_dir_uses_its_own_checkpoints(tmp_path, seeded_run):
    """A `checkpoint` state file recording absolute paths (as TF1 Savers wrote them) still names the copy's files:
    prediction and resumption read the copied directory, never the one it was copied from."""
    shutil.copytree(seeded_run.output_dir, tmp_path / "original")
    absolute = str(tmp_path / "original" / "ckpt-6")
    (tmp_path / "original" / "checkpoint").write_text(
        f'model_checkpoint_path: "{absolute}"\nall_model_checkpoint_paths: "{absolute}"\n')
    assert tf.train.get_checkpoint_state(str(tmp_path / "original")).model_checkpoint_path == absolute
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    shutil.rmtree(tmp_path / "original")
    copy = _trainer(tmp_path / "copy")
    assert copy.restore_for_predict() == str(tmp_path / "copy" / "ckpt-6") and copy.step == 6
    assert _max_diff(_weights(copy), _weights(seeded_run)) == 0.0
    resumed = _trainer(tmp_path / "copy")
    assert resumed.train(toy_task.dataset_fn, 16, 6, 2) is None and resumed.step == 6  # finished: nothing to do


@pytest.mark.slow
def test_gradient_accumulation_equals_the_full_batch(tmp_path, seeded_run):
    accumulated = _trainer(tmp_path, gradient_accumulation_steps=4)
    accumulated.train(toy_task.dataset_fn, 16, 6, 2, seed=7)
    assert _max_diff(_weights(seeded_run), _weights(accumulated)) < 1e-5


def _copy_checkpoint(source, name, target):
    """`target` holds checkpoint `name` of `source` as its latest, as a run killed after writing it would."""
    target.mkdir()
    for filename in os.listdir(source):
        if filename.startswith(name + "."):
            shutil.copy(source / filename, target / filename)
    tf.compat.v1.train.update_checkpoint_state(str(target), name)


def test_resume_continues_exactly(tmp_path, caplog):
    """As a script run without --seed (no global TensorFlow seed, the input order seed drawn at random), with
    dropout on: a run resumed from the step-5 checkpoint in another random state (Python and NumPy seeded with 2,
    not 1) ends bit-identical to the uninterrupted run; the checkpoint holds the input order and the dropout random
    state."""
    caplog.set_level(logging.INFO, logger="absl")  # absl logs under "absl", whatever other tests set
    config = toy_task.config(dropout_prob=0.2, num_hidden_layers=1)
    straight = _trainer(tmp_path / "straight", config=config, save_checkpoints_steps=5)
    tf.random.set_seed(None)
    straight.train(toy_task.dataset_fn, 16, 10, 2)
    seed = int(straight.input_seed.numpy())
    assert f"Input order seed: {seed} (drawn at random" in caplog.text
    resumed_dir = tmp_path / "resumed"
    _copy_checkpoint(tmp_path / "straight", "ckpt-5", resumed_dir)
    resumed = _trainer(resumed_dir, seed=2, config=config, save_checkpoints_steps=5)
    tf.random.set_seed(None)
    resumed.train(toy_task.dataset_fn, 16, 10, 2)
    assert f"Resuming from {resumed_dir}/ckpt-5 at step 5: restored the model (bert, classifier, model), the " \
           f"optimizer state, the dropout random state and the input position (seed {seed})" in caplog.text
    assert resumed.step == 10 and int(resumed.input_seed.numpy()) == seed
    predictor = _trainer(resumed_dir, seed=3, config=config)
    predictor.restore_for_predict(("classifier",))
    assert predictor.step == 10
    for expected, got, restored in zip(_weights(straight), _weights(resumed), _weights(predictor)):
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(restored, expected)
    again = _trainer(resumed_dir)
    assert again.train(toy_task.dataset_fn, 16, 10, 2, seed=7) is None  # already finished
    assert "Ignoring seed 7: the run being resumed was seeded with" in caplog.text


def test_the_input_order_follows_the_seed(tmp_path, seeded_run):
    """A given seed is the input order's seed; without one, the run draws its own and saves it with its checkpoints.
    From the same initial weights (global seed 1), the two orders give different weights."""
    drawn = _trainer(tmp_path)
    drawn.train(toy_task.dataset_fn, 16, 6, 2)
    seed = int(drawn.input_seed.numpy())
    assert int(seeded_run.input_seed.numpy()) == 7 and seed != 7
    assert _max_diff(_weights(seeded_run), _weights(drawn)) > 0
    assert int(tf.train.load_checkpoint(str(tmp_path / "ckpt-6")).get_tensor(
        "input_seed/.ATTRIBUTES/VARIABLE_VALUE")) == seed


def _dead_pid():
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_a_training_run_removes_stale_temporaries(tmp_path, caplog):
    """What a killed run leaves in its checkpoint directory (our temporaries left alone for a day, whoever wrote
    them; TensorFlow's checkpoint temporaries, which this run owns) goes, and is logged; young temporaries (a
    running writer's, of any process or host, or of one that has ended) and other files stay."""
    caplog.set_level(logging.INFO, logger="absl")  # absl logs under "absl", whatever other tests set
    host, dead = socket.gethostname(), _dead_pid()
    stale = [f"eval.tf_record.tmp-{host}-{dead}-0123abcd", f".export_3.tmp-{host}-{dead}-0-89abcdef",
             f"eval_results.txt.tmp-other-host-{os.getpid()}-00000000", "checkpoint.tmp5f3c",
             "ckpt-7.index.tempstate123", "ckpt-7_temp"]
    kept = ["train.tf_record", "notes.tmpl", "ckpt-7_template.txt", f"label_list.txt.tmp-{host}-{os.getpid()}-0badf00d",
            f"eval.tf_record.tmp-{host}-{dead}-not-hex", f"results.txt.tmp-other-host-{os.getpid()}-0-00000000",
            f"eval.tf_record.tmp-{host}-{dead}-89abcdef"]
    for name in stale[:-1] + kept:
        (tmp_path / name).write_text("x")
    long_ago = time.time() - fileio.STALE_AFTER_S - 60  # our temporaries, left alone that long
    for name in stale[:3]:
        os.utime(tmp_path / name, (long_ago, long_ago))
    (tmp_path / "ckpt-7_temp").mkdir()
    (tmp_path / "ckpt-7_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"\0" * 100)
    _trainer(tmp_path).train(toy_task.dataset_fn, 16, 2, 0)
    names = set(os.listdir(tmp_path))
    assert not names & set(stale) and set(kept) <= names and "ckpt-2.index" in names
    for name in stale:
        assert f"Removed {tmp_path / name} (left by a killed run)" in caplog.text


def test_init_from_original_and_from_ours(tmp_path, seeded_run):
    trained = seeded_run
    original = checkpoints.save_original_checkpoint(trained.model, str(tmp_path / "orig" / "bert_model.ckpt"))
    for init in (original, trained.output_dir):
        other = _trainer(tmp_path / f"from_{os.path.basename(os.path.dirname(init))}", pretrained=_pretrained(init))
        assert other.pretrained.restore(other.model).missing_heads == []
        assert _max_diff(_weights(trained), _weights(other)) == 0.0
        span = Trainer(lambda: BertSpanLabeler(CONFIG), toy_task.loss_fn, str(tmp_path / "span"),
                       pretrained=_pretrained(init))
        assert span.pretrained.restore(span.model).missing_heads == ["span"]
        np.testing.assert_array_equal(span.model.bert.get_embedding_table().numpy(),
                                      trained.model.bert.get_embedding_table().numpy())
        with pytest.raises(ValueError, match="has no trained span head .*cls/squad/output_weights"):
            span.restore_for_predict(required_heads=("span",))


def test_predict_without_any_checkpoint_is_an_error(tmp_path):
    for pretrained in (None, _pretrained(None)):
        with pytest.raises(ValueError, match="Nothing to predict with"):
            _trainer(tmp_path, pretrained=pretrained).restore_for_predict(("classifier",))


def _count_calls(layer):
    """Counts the Python runs of `layer.call` by its `training` argument: inside a tf.function, one per trace."""
    calls, call = collections.Counter(), layer.call

    @functools.wraps(call)
    def counted(*args, training=None, **kwargs):
        calls["training" if training else "inference"] += 1
        return call(*args, training=training, **kwargs)

    layer.call = counted
    return calls


def test_training_evaluation_and_prediction_trace_once(tmp_path):
    """Loops of 4, 4 and 2 steps run on one trace of the training loop (one forward pass traced); batches of 10 and
    a last one of 4 on one trace of each inference function."""
    trainer = _trainer(tmp_path, iterations_per_loop=4)
    calls = _count_calls(trainer.model.classifier)
    trainer.train(toy_task.dataset_fn, 16, 10, 0)
    assert trainer.step == 10 and calls == {"training": 1}
    data = tf.data.Dataset.from_tensor_slices((toy_task.features(), {"label_ids": toy_task.LABELS})).batch(10)
    outputs = list(trainer.predict(data, with_loss=True))
    assert [len(o["per_example_loss"]) for o in outputs] == [10] * 6 + [4]
    assert np.isfinite(np.concatenate([o["per_example_loss"] for o in outputs])).all()
    assert calls == {"training": 1, "inference": 1}
    assert [len(o["logits"]) for o in trainer.predict(data.map(lambda features, labels: features))] == [10] * 6 + [4]
    assert calls == {"training": 1, "inference": 2}
    figures, batches = trainer.evaluate(data)
    assert batches == 7 and np.isfinite(figures["loss"]) and calls == {"training": 1, "inference": 3}


def test_prepare_predict_warms_up_on_an_empty_batch_except_under_xla():
    """Traced ahead, a prediction runs once on an empty batch (TensorFlow optimizes its graph then), but not under XLA,
    where that batch would compile a program of its own."""
    runs = tf.Variable(0)

    def model(features):
        runs.assign_add(1)
        return {"mask": features["input_mask"] * 2}

    spec = {"input_mask": tf.TensorSpec([None, None], tf.int32)}
    prediction.Predictor(model, use_xla=True).prepare_predict(spec)
    assert int(runs.numpy()) == 0
    prediction.Predictor(model).prepare_predict(spec)
    assert int(runs.numpy()) == 1


def test_meanwhile_runs_on_the_loaded_weights_and_the_last_checkpoint_saves_in_the_background(tmp_path):
    """`meanwhile` runs once, after the training loop is traced and init_checkpoint loaded, before any update; the
    evaluation it prepares is not traced again. The last checkpoint, written in the background, is complete once
    waited for and holds the trained weights."""
    init = _trainer(tmp_path / "init", seed=2)  # weights other than the run's own (seed 1)
    init_checkpoint = checkpoints.save_original_checkpoint(init.model, str(tmp_path / "init" / "bert_model.ckpt"))
    trainer = _trainer(tmp_path / "run", pretrained=_pretrained(init_checkpoint), iterations_per_loop=3)
    calls = _count_calls(trainer.model.classifier)
    data = tf.data.Dataset.from_tensor_slices((toy_task.features(), {"label_ids": toy_task.LABELS})).batch(10)
    seen = []

    def meanwhile():
        seen.append((trainer.step, dict(calls), _max_diff(_weights(trainer), _weights(init))))
        trainer.prepare_predict(data.element_spec, with_loss=True)

    trainer.train(toy_task.dataset_fn, 16, 6, 0, meanwhile=meanwhile, save_last_in_background=True)
    assert seen == [(0, {"training": 1}, 0.0)]
    outputs = list(trainer.predict(data, with_loss=True))
    assert [len(o["per_example_loss"]) for o in outputs] == [10] * 6 + [4]
    assert calls == {"training": 1, "inference": 1}
    features, _ = next(iter(data))
    np.testing.assert_allclose(outputs[0]["logits"], trainer.model(features, training=False)["logits"], atol=1e-6)
    assert trainer.latest_checkpoint().endswith("ckpt-6")  # waits for the save
    saved = _trainer(tmp_path / "other", pretrained=_pretrained(str(tmp_path / "run")))
    saved.pretrained.restore(saved.model)
    assert _max_diff(_weights(trainer), _weights(saved)) == 0.0
    assert _max_diff(_weights(trainer), _weights(init)) > 0  # trained on


def test_bad_batch_and_steps(tmp_path):
    with pytest.raises(ValueError, match="not divisible by replicas .* gradient_accumulation_steps \\(3\\)"):
        _trainer(tmp_path, gradient_accumulation_steps=3).train(toy_task.dataset_fn, 16, 4, 0)
    assert compute_train_steps(100, 32, 3.0, 0.1) == (9, 0)
    with pytest.raises(ValueError, match="No training steps"):
        compute_train_steps(3, 32, 1.0, 0.1)


MIRRORED = r"""
import shutil, sys, numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[1])
import toy_task
from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer
CONFIG = toy_task.config(num_hidden_layers=1)  # one layer: each training traces less
def train(output_dir, name, accumulation=1):
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: BertClassifier(CONFIG, 2), toy_task.loss_fn, output_dir,
                      strategy=distribute.get_strategy(name), learning_rate=1e-3,
                      gradient_accumulation_steps=accumulation, save_checkpoints_steps=2)
    trainer.train(toy_task.dataset_fn, 16, 4, 1)
    print(name, accumulation, "replicas", trainer.strategy.num_replicas_in_sync)
    return [v.numpy() for v in trainer.model.weights]
def max_diff(x, y):
    return max(float(np.abs(a - b).max()) for a, b in zip(x, y))
weights = {}
for name, accumulation in [("one_device", 1), ("mirrored", 2), ("multi_worker_mirrored", 1)]:
    weights[(name, accumulation)] = train(f"{sys.argv[2]}/{name}{accumulation}", name, accumulation)
for key, value in weights.items():
    print(key, "max diff", max_diff(weights[("one_device", 1)], value))
# Resumed from the step-2 checkpoint (1 input pipeline, 2 replicas x 2 micro-batches: 4 batches per update to skip):
# the same weights as the uninterrupted mirrored run.
for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(f"{sys.argv[2]}/mirrored2/ckpt-2{suffix}", f"{sys.argv[2]}/ckpt-2{suffix}")
tf.compat.v1.train.update_checkpoint_state(sys.argv[2], "ckpt-2")
print("resumed diff", max_diff(weights[("mirrored", 2)], train(sys.argv[2], "mirrored", 2)))
"""


@pytest.mark.slow
def test_mirrored_replicas_match_one_device(tmp_path):
    """Two logical CPU devices: MirroredStrategy with accumulation and a one-worker MultiWorkerMirroredStrategy = one
    device; a run resumed under MirroredStrategy = the uninterrupted one. (Mirrored without accumulation:
    test_multi_worker's classifier on 2 devices; clipping on every update and --use_xla on replicas of CPU devices:
    test_update's `test_replicas_compile_...`, tests/test_pretraining_distribution.py and
    tests/test_training_flags.py.) The child sees no GPU (CUDA_VISIBLE_DEVICES=-1), where mirrored would take the
    GPUs instead of the CPU's logical devices."""
    result = forkserver.run([sys.executable, "-c", MIRRORED, os.path.dirname(__file__), str(tmp_path)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "mirrored 2 replicas 2" in lines
    diffs = [float(line.rsplit(" ", 1)[1]) for line in lines if "max diff" in line]
    assert len(diffs) == 3 and max(diffs) < 1e-5, lines
    assert "resumed diff 0.0" in lines, lines
