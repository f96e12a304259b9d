"""The Trainer with gradient_checkpointing=True (--gradient_checkpointing): the toy task trains to the weights it
reaches without it, and a run stopped and resumed ends bit-identical to the uninterrupted one (dropout on: the
recomputed blocks replay the masks of the checkpointed random state)."""
import logging

import numpy as np
import tensorflow as tf
import toy_task
from pretraining_worker import copy_checkpoint

from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer

CONFIG = toy_task.config(dropout_prob=0.2, num_hidden_layers=1)  # one layer: each training traces less


def _trainer(output_dir, seed=1, **settings):
    """A Trainer of the toy task with dropout, after seeding Python, NumPy and TensorFlow with `seed` (TensorFlow's
    global seed then unset, as a script run without --seed)."""
    tf.keras.utils.set_random_seed(seed)
    tf.random.set_seed(None)
    return Trainer(lambda: BertClassifier(CONFIG, 2), toy_task.loss_fn, str(output_dir), learning_rate=1e-3,
                   strategy=distribute.get_strategy("one_device"), save_checkpoints_steps=5, **settings)


def _weights(trainer):
    return [v.numpy() for v in trainer.model.weights]


def test_checkpointing_trains_as_without_and_resumes_exactly(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    without = _trainer(tmp_path / "without")
    without.train(toy_task.dataset_fn, 16, 10, 2, seed=4)
    straight = _trainer(tmp_path / "straight", gradient_checkpointing=True)
    assert all(block.gradient_checkpointing for block in straight.model.bert.encoder_layers)
    assert "Gradient checkpointing: each transformer layer recomputes its activations" in caplog.text
    straight.train(toy_task.dataset_fn, 16, 10, 2, seed=4)
    # The same masks, the same updates to float32 rounding (the recomputed ops are fused differently: measured
    # 1.3e-8 apart after 10 updates; Adam moves a weight by about the learning rate, 1e-3, whatever the gradient).
    for expected, got in zip(_weights(without), _weights(straight)):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    resumed_dir = tmp_path / "resumed"
    copy_checkpoint(str(tmp_path / "straight"), 5, str(resumed_dir))
    resumed = _trainer(resumed_dir, seed=2, gradient_checkpointing=True)
    resumed.train(toy_task.dataset_fn, 16, 10, 2)
    assert resumed.step == 10
    for expected, got in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_array_equal(got, expected)
