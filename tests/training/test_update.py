"""The update step under XLA (bert_tf.training.update): one compiled program per update where the strategy allows,
the same numbers as without XLA (mixed_float16's loss scaling inside it, a skipped overflow step:
tests/training/test_precision.py)."""
import re

import numpy as np
import tensorflow as tf
import toy_task

from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute, losses, update
from bert_tf.training.config import TrainingConfig
from bert_tf.training.trainer import Trainer


def loud_loss(labels, outputs):
    """Gradients far beyond global norm 1: clipping decides every update."""
    return 20.0 * toy_task.loss_fn(labels, outputs)


def _train(output_dir, use_xla):
    tf.keras.utils.set_random_seed(1)
    trainer = Trainer(lambda: BertClassifier(toy_task.CONFIG, 2), loud_loss, str(output_dir), use_xla=use_xla,
                      strategy=distribute.get_strategy("one_device"), learning_rate=1e-3,
                      gradient_accumulation_steps=2)
    trainer.train(toy_task.dataset_fn, 16, 3, 1)
    return trainer, [v.numpy() for v in trainer.model.weights]


def _max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_the_whole_update_under_xla_equals_the_update_without(tmp_path):
    """Clipped updates of 2 micro-batches: the compiled update's weights are the uncompiled one's to float32
    rounding."""
    compiled, compiled_weights = _train(tmp_path / "xla", True)
    _, plain_weights = _train(tmp_path / "plain", False)
    assert compiled.figures["gradient_norm"] > 2  # clipped
    assert _max_diff(compiled_weights, plain_weights) < 1e-5


def _update(use_xla, whole_step=None):
    strategy = distribute.get_strategy("one_device")
    with strategy.scope():
        model = BertClassifier(toy_task.CONFIG, 2)
    optimizer = update.build_optimizer(strategy, model, TrainingConfig(use_xla=use_xla), 10, 1)
    loss = losses.as_batch_loss(toy_task.loss_fn)
    step = update.Update(strategy, model, loss, optimizer,
                         lambda features, labels, totals: update.gradients(model, loss, optimizer, features, labels,
                                                                           totals), use_xla=use_xla,
                         whole_step=whole_step)
    return strategy, step


def test_the_compiled_program_holds_the_norm_clipping_and_the_optimizer():
    """The HLO of one update holds the gradients, the global norm (L2Loss) and the optimizer's update
    (ResourceApplyAdam for each variable, the fused AdamWeightDecay); without XLA, or with whole_step=False, there is
    no compiled update."""
    strategy, step = _update(True)
    assert update.compiles_whole_step(strategy) and step.compiled_step is not None
    batch = next(iter(toy_task.dataset_fn(16)))
    hlo = strategy.run(lambda b: step.compiled_step.experimental_get_compiler_ir(b)(stage="hlo"), args=(batch,))
    op_types = set(re.findall(r'op_type="(\w+)"', hlo))
    assert {"ResourceApplyAdam", "L2Loss", "MatMul", "SparseSoftmaxCrossEntropyWithLogits"} <= op_types
    assert _update(False)[1].compiled_step is None
    assert _update(True, whole_step=False)[1].compiled_step is None
