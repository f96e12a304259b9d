"""A task's loss and training metrics as the Trainer computes them: weighted means over one update's whole batch.

Every figure is `sum(values) / (sum(weights) + epsilon)` over one update's examples. The Trainer all-reduces the
weights' total first; each micro-batch then adds `sum(its values) / (that total + epsilon)`, so the original's
masked-LM loss, `sum(w * nll) / (sum(w) + 1e-5)`, is the same on one device, on many, and with accumulation.

A loss (`Trainer`'s `loss`) is an object with `terms` (name -> `Term`), `weights(labels)` and
`values(labels, outputs)` (float32 tensors by term, values weighted; e.g. `bert_tf.tasks.pretraining.PretrainingLoss`),
or a per-example `loss_fn(labels, outputs) -> [B]` (`as_batch_loss`). The loss sums the `in_loss` terms; the others
are metrics.
"""
import types
from typing import NamedTuple

import tensorflow as tf


class Term(NamedTuple):
    """One figure: `sum(values) / (sum(weights) + epsilon)`; part of the loss when `in_loss`."""
    epsilon: float = 0.0
    in_loss: bool = True


def as_batch_loss(loss):
    """`loss` with terms/weights/values: a per-example function becomes one term, `loss`, of weight 1 per example."""
    if hasattr(loss, "terms"):
        return loss
    return types.SimpleNamespace(
        terms={"loss": Term()},
        weights=lambda labels: {"loss": tf.ones(tf.shape(tf.nest.flatten(labels)[0])[:1], tf.float32)},
        values=lambda labels, outputs: {"loss": tf.cast(loss(labels, outputs), tf.float32)})


def sums(loss, tensors):
    """Each term's sum of `tensors` (by term, e.g. `loss.weights(labels)`): float32 scalars."""
    return {name: tf.reduce_sum(tensors[name]) for name in loss.terms}


def shares(loss, labels, outputs, totals):
    """This batch's share of each term and of `loss` (`ratios`); `totals`: the weights summed over the update."""
    return ratios(loss, sums(loss, loss.values(labels, outputs)), totals)


def ratios(loss, sums, totals):
    """Each term's `sums[name] / (totals[name] + epsilon)`, and `loss`: the sum of the `in_loss` ones."""
    result = {name: sums[name] / (totals[name] + term.epsilon) for name, term in loss.terms.items()}
    result["loss"] = tf.add_n([result[name] for name, term in loss.terms.items() if term.in_loss])
    return result

