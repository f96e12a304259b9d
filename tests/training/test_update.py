"""The update step under XLA (bert_tf.training.update): the whole update as one compiled program (--use_xla's on
GPUs; forced here on the CPU, where --use_xla compiles the gradients only), the same numbers as without XLA (a
skipped float16 overflow step under --use_xla: tests/training/test_precision.py)."""
import re

import numpy as np
import tensorflow as tf
import toy_task

from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute, losses, update
from bert_tf.training.config import TrainingConfig


def loud_loss(labels, outputs):
    """Gradients far beyond global norm 1: clipping decides every update."""
    return 20.0 * toy_task.loss_fn(labels, outputs)


def _update(use_xla, whole_step=None, accumulation=1, loss_fn=toy_task.loss_fn, config=toy_task.CONFIG):
    """(strategy, Update) of a fresh toy classifier on one device, as the Trainer builds them."""
    strategy = distribute.get_strategy("one_device")
    with strategy.scope():
        model = BertClassifier(config, 2)
    optimizer = update.build_optimizer(strategy, model, TrainingConfig(use_xla=use_xla, learning_rate=1e-3), 10, 1)
    loss = losses.as_batch_loss(loss_fn)
    step = update.Update(strategy, model, loss, optimizer,
                         lambda features, labels, totals: update.gradients(model, loss, optimizer, features, labels,
                                                                           totals),
                         accumulation, use_xla=use_xla, whole_step=whole_step)
    return strategy, step


def _train(use_xla, whole_step, config=toy_task.CONFIG):
    """The weights and last gradient norm after 3 clipped updates of 2 micro-batches of 8."""
    tf.keras.utils.set_random_seed(1)
    strategy, step = _update(use_xla, whole_step, accumulation=2, loss_fn=loud_loss, config=config)
    run = tf.function(lambda batch: strategy.run(step.replica_step, args=(batch,)), autograph=False)
    for batch in toy_task.dataset_fn(16, seed=3).take(3):
        _, norm = run(batch)
    return [v.numpy() for v in step.model.weights], float(norm)


def test_the_whole_update_under_xla_equals_the_update_without():
    """Clipped updates of 2 micro-batches: the compiled update's weights are the uncompiled one's to float32
    rounding; with dropout too (XLA draws the same masks)."""
    compiled_weights, norm = _train(True, True)
    plain_weights, _ = _train(False, None)
    assert norm > 2  # clipped
    assert max(float(np.abs(a - b).max()) for a, b in zip(compiled_weights, plain_weights)) < 1e-5
    dropout = toy_task.config(dropout_prob=0.3)
    dropped_weights, _ = _train(False, None, dropout)
    assert max(float(np.abs(a - b).max()) for a, b in zip(dropped_weights, plain_weights)) > 1e-3
    compiled_weights, _ = _train(True, True, dropout)
    assert max(float(np.abs(a - b).max()) for a, b in zip(compiled_weights, dropped_weights)) < 1e-5


def test_the_compiled_program_holds_the_norm_clipping_and_the_optimizer():
    """The HLO of one update holds the gradients, the global norm (L2Loss) and the optimizer's update
    (ResourceApplyAdam for each variable, the fused AdamWeightDecay). --use_xla compiles it on GPUs only: on this
    CPU, without XLA, or with whole_step=False there is no compiled update."""
    strategy, step = _update(True, whole_step=True)
    batch = next(iter(toy_task.dataset_fn(16)))
    hlo = strategy.run(lambda b: step.compiled_step.experimental_get_compiler_ir(b)(stage="hlo"), args=(batch,))
    op_types = set(re.findall(r'op_type="(\w+)"', hlo))
    assert {"ResourceApplyAdam", "L2Loss", "MatMul", "SparseSoftmaxCrossEntropyWithLogits"} <= op_types
    assert not update.compiles_whole_step(strategy) and _update(True)[1].compiled_step is None
    assert _update(False, whole_step=True)[1].compiled_step is None
    assert _update(True, whole_step=False)[1].compiled_step is None
