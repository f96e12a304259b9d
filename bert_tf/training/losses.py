"""A task's loss and training metrics as the Trainer computes them: weighted means over one update's whole batch.

Every figure is a ratio `sum(values) / (sum(weights) + epsilon)` over all the examples of one update: every
replica, every accumulated micro-batch. The Trainer sums the weights over the whole update first (an all-reduce
across replicas), then each micro-batch contributes `sum(its values) / (that total + epsilon)`, so that the
replicas' and micro-batches' shares add up to the ratio a single device computes on the whole batch. That is what
makes the original's batch-level masked-LM loss, `sum(w * nll) / (sum(w) + 1e-5)`, the same number on one device,
on many, and with gradient accumulation.

A loss (the `loss` argument of `Trainer`) is either
- an object with `terms` (name -> `Term`), `weights(labels)` and `values(labels, outputs)`: dicts of float32
  tensors by term name, `values` already weighted (e.g. `bert_tf.tasks.pretraining.PretrainingLoss`), or
- a function `loss_fn(labels, outputs) -> [B]` of per-example losses: their mean over the update's batch (the
  fine-tuning tasks); `as_batch_loss` makes it such an object, of one term, `loss`.
The loss is the sum of the terms with `in_loss`; the others are metrics (accuracies), summarized with it.
Each task's own loss lives in its task module (e.g. bert_tf.tasks.classifier's `classification_loss`).
"""
import types
from typing import NamedTuple

import tensorflow as tf


class Term(NamedTuple):
    """One figure: `sum(values) / (sum(weights) + epsilon)`; part of the loss when `in_loss`."""
    epsilon: float = 0.0
    in_loss: bool = True


def as_batch_loss(loss):
    """`loss` as an object with terms/weights/values: a per-example loss function becomes one term, `loss`, of
    weight 1 per example."""
    if hasattr(loss, "terms"):
        return loss
    return types.SimpleNamespace(
        terms={"loss": Term()},
        weights=lambda labels: {"loss": tf.ones(tf.shape(tf.nest.flatten(labels)[0])[:1], tf.float32)},
        values=lambda labels, outputs: {"loss": tf.cast(loss(labels, outputs), tf.float32)})


def weight_totals(loss, labels):
    """Each term's summed weights over `labels` (a batch): dict name -> float32 scalar."""
    weights = loss.weights(labels)
    return {name: tf.reduce_sum(weights[name]) for name in loss.terms}


def shares(loss, labels, outputs, totals):
    """This batch's share of each term, `sum(values) / (totals[name] + epsilon)`, and of the loss (key `loss`,
    the sum of the `in_loss` terms). `totals`: the weights summed over the whole update."""
    values = loss.values(labels, outputs)
    return ratios(loss, {name: tf.reduce_sum(values[name]) for name in loss.terms}, totals)


def ratios(loss, sums, totals):
    """Each term's `sums[name] / (totals[name] + epsilon)`, and `loss`: the sum of the `in_loss` ones."""
    result = {name: sums[name] / (totals[name] + term.epsilon) for name, term in loss.terms.items()}
    result["loss"] = tf.add_n([result[name] for name, term in loss.terms.items() if term.in_loss])
    return result

