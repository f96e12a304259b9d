import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import toy_task
from bert_tf import checkpoints
from bert_tf.heads import BertClassifier, BertSpanLabeler
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer, compute_train_steps


def _trainer(output_dir, **kwargs):
    tf.keras.utils.set_random_seed(1)
    kwargs.setdefault("learning_rate", 1e-3)
    return Trainer(lambda: BertClassifier(toy_task.CONFIG, 2), toy_task.loss_fn, str(output_dir),
                   strategy=distribute.get_strategy("one_device"), **kwargs)


def _weights(trainer):
    return [v.numpy() for v in trainer.model.weights]


def _max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


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


@pytest.mark.slow
def test_gradient_accumulation_equals_the_full_batch(tmp_path):
    full = _trainer(tmp_path / "full")
    full.train(toy_task.dataset_fn, 16, 6, 2)
    accumulated = _trainer(tmp_path / "accumulated", gradient_accumulation_steps=4)
    accumulated.train(toy_task.dataset_fn, 16, 6, 2)
    assert _max_diff(_weights(full), _weights(accumulated)) < 1e-5


def test_resume_continues_exactly(tmp_path):
    straight = _trainer(tmp_path / "straight", save_checkpoints_steps=5)
    straight.train(toy_task.dataset_fn, 16, 10, 2)
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    for name in os.listdir(tmp_path / "straight"):
        if name.startswith("ckpt-5."):
            shutil.copy(tmp_path / "straight" / name, resumed_dir / name)
    tf.compat.v1.train.update_checkpoint_state(str(resumed_dir), "ckpt-5")
    resumed = _trainer(resumed_dir, save_checkpoints_steps=5)
    resumed.train(toy_task.dataset_fn, 16, 10, 2)
    assert resumed.step == 10
    predictor = _trainer(resumed_dir)
    predictor.restore_for_predict(("classifier",))
    assert predictor.step == 10
    assert _max_diff(_weights(straight), _weights(predictor)) == 0.0
    assert _max_diff(_weights(straight), _weights(resumed)) < 1e-6
    again = _trainer(resumed_dir)
    assert again.train(toy_task.dataset_fn, 16, 10, 2) is None  # already finished


def test_init_from_original_and_from_ours(tmp_path):
    trained = _trainer(tmp_path / "ours")
    trained.train(toy_task.dataset_fn, 16, 4, 0)
    original = trained.export_original_checkpoint(str(tmp_path / "orig" / "bert_model.ckpt"))
    for init in (original, str(tmp_path / "ours")):
        other = _trainer(tmp_path / f"from_{os.path.basename(os.path.dirname(init))}", init_checkpoint=init)
        assert other.load_init_checkpoint(init) == []
        assert _max_diff(_weights(trained), _weights(other)) == 0.0
        span = Trainer(lambda: BertSpanLabeler(toy_task.CONFIG), toy_task.loss_fn, str(tmp_path / "span"),
                       init_checkpoint=init)
        assert span.load_init_checkpoint(init) == ["span"]
        np.testing.assert_array_equal(span.model.bert.get_embedding_table().numpy(),
                                      trained.model.bert.get_embedding_table().numpy())
        with pytest.raises(ValueError, match="has no trained span head .*cls/squad/output_weights"):
            span.restore_for_predict(required_heads=("span",))


def test_predict_without_any_checkpoint_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="Nothing to predict with"):
        _trainer(tmp_path).restore_for_predict(("classifier",))


def test_predict_with_loss(tmp_path):
    trainer = _trainer(tmp_path)
    data = tf.data.Dataset.from_tensor_slices((toy_task.features(), {"label_ids": toy_task.LABELS})).batch(10)
    outputs = list(trainer.predict(data, with_loss=True))
    assert [o["per_example_loss"].shape[0] for o in outputs] == [10] * 6 + [4]
    assert np.isfinite(np.concatenate([o["per_example_loss"] for o in outputs])).all()


def test_mixed_float16_trains_with_loss_scaling(tmp_path):
    try:
        trainer = _trainer(tmp_path, mixed_precision="mixed_float16")
        loss = trainer.train(toy_task.dataset_fn, 16, 4, 0)
        assert np.isfinite(loss)
        assert trainer.model.compute_dtype == "float16"
        assert type(trainer.optimizer).__name__ == "LossScaleOptimizer"
    finally:
        distribute.set_precision("float32")


def test_bad_batch_and_steps(tmp_path):
    with pytest.raises(ValueError, match="not divisible by replicas .* gradient_accumulation_steps \\(3\\)"):
        _trainer(tmp_path, gradient_accumulation_steps=3).train(toy_task.dataset_fn, 16, 4, 0)
    assert compute_train_steps(100, 32, 3.0, 0.1) == (9, 0)
    with pytest.raises(ValueError, match="No training steps"):
        compute_train_steps(3, 32, 1.0, 0.1)


MIRRORED = r"""
import sys, numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[1])
import toy_task
from bert_tf.heads import BertClassifier
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer
weights = {}
for name, accumulation in [("one_device", 1), ("mirrored", 1), ("mirrored", 2), ("multi_worker_mirrored", 1)]:
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: BertClassifier(toy_task.CONFIG, 2), toy_task.loss_fn, f"{sys.argv[2]}/{name}{accumulation}",
                      strategy=distribute.get_strategy(name), learning_rate=1e-3,
                      gradient_accumulation_steps=accumulation)
    trainer.train(toy_task.dataset_fn, 16, 4, 1)
    weights[(name, accumulation)] = [v.numpy() for v in trainer.model.weights]
    print(name, accumulation, "replicas", trainer.strategy.num_replicas_in_sync)
for key, value in weights.items():
    print(key, "max diff", max(float(np.abs(a - b).max()) for a, b in zip(weights[("one_device", 1)], value)))
"""


@pytest.mark.slow
def test_mirrored_replicas_match_one_device(tmp_path):
    """Two logical CPU devices: MirroredStrategy (with and without accumulation) = one device."""
    result = subprocess.run([sys.executable, "-c", MIRRORED, os.path.dirname(__file__), str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "mirrored 2 replicas 2" in lines
    diffs = [float(line.rsplit(" ", 1)[1]) for line in lines if "max diff" in line]
    assert len(diffs) == 4 and max(diffs) < 1e-5, lines
