"""Evaluation and prediction: `Predictor` (a loss's figures over a dataset, outputs batch by batch) and
`predict_in_order`, the one prediction loop over examples in memory (bert_tf.tasks, bert_tf.inference).

A Predictor traces once per dataset element_spec and keeps its traces, so one made ahead of time is reused; under XLA
each input shape compiles a program, which `predict_in_order` keeps to one per length.
"""
import collections
import functools

import numpy as np
import tensorflow as tf

from bert_tf.data import lengths as lengths_lib
from bert_tf.training import losses


class Predictor:
    """Evaluates and predicts with `model(features) -> {name: tensor}`; `loss_fn`: a per-example or batch-level loss
    (bert_tf.training.losses), None without labels; `use_xla`: compile the traces."""

    def __init__(self, model, loss_fn=None, use_xla=False):
        self.infer = model  # not `model`: a Trainer is a Predictor whose `model` is the Keras model
        self.loss_fn = loss_fn
        self.loss = None if loss_fn is None else losses.as_batch_loss(loss_fn)
        self.use_xla = use_xla
        self._forward_functions = {}

    def evaluate(self, dataset):
        """({name: float32}, number of batches) over `dataset`'s (features, labels) batches, streamed as the original's
        tf.metrics: each term's sum(values) / sum(weights), and `loss`, the mean of the batch losses."""
        @tf.function(input_signature=list(dataset.element_spec), jit_compile=self.use_xla, autograph=False)
        def batch_figures(features, labels):  # each term's sum of values and of weights, the batch's loss
            sums = losses.sums(self.loss, self.loss.values(labels, self.infer(features)))
            totals = losses.sums(self.loss, self.loss.weights(labels))
            return sums, totals, losses.ratios(self.loss, sums, totals)["loss"]

        sums, totals, batch_losses = collections.Counter(), collections.Counter(), []
        for features, labels in dataset:
            batch_sums, batch_totals, loss = batch_figures(features, labels)
            sums.update({name: float(value) for name, value in batch_sums.items()})
            totals.update({name: float(value) for name, value in batch_totals.items()})
            batch_losses.append(float(loss))
        if not batch_losses:
            raise ValueError("Nothing to evaluate: the evaluation data holds no full batch.")
        figures = {name: np.float32(sums[name] / totals[name]) for name in self.loss.terms}
        figures["loss"] = np.float32(np.mean(batch_losses))
        return figures, len(batch_losses)

    def predict(self, dataset, with_loss=False):
        """Yields the model's outputs per batch as numpy dicts, in dataset order; with labels and `with_loss`, also
        `per_example_loss` [B]."""
        labelled = isinstance(dataset.element_spec, tuple)
        forward = self.prepare_predict(dataset.element_spec, with_loss)
        for batch in dataset:
            features, labels = batch if labelled else (batch, None)
            outputs = forward(features, labels) if with_loss and labelled else forward(features)
            yield tf.nest.map_structure(lambda t: t.numpy(), outputs)

    def prepare_predict(self, element_spec, with_loss=False):
        """The traced function `predict` runs on `element_spec`, made once and reused. With a batch size not fixed it
        also runs an empty batch now, so TensorFlow optimizes the graph before the first batch (not under XLA)."""
        labelled = isinstance(element_spec, tuple)
        with_loss = with_loss and labelled
        key = (repr(element_spec), with_loss)  # the structure, names, shapes and dtypes
        if key not in self._forward_functions:
            signature = list(element_spec) if with_loss else [element_spec[0] if labelled else element_spec]
            function = tf.function(lambda features: self.infer(features), jit_compile=self.use_xla,
                                   input_signature=signature[:1], autograph=False)
            if with_loss:
                function = tf.function(functools.partial(self._with_loss, function), input_signature=signature,
                                       autograph=False)
            function.get_concrete_function()
            if not self.use_xla and all(spec.shape.rank and spec.shape[0] is None
                                        for spec in tf.nest.flatten(signature)):
                function(*tf.nest.map_structure(
                    lambda spec: tf.zeros([0] + [1 if n is None else n for n in spec.shape[1:]], spec.dtype),
                    signature))
            self._forward_functions[key] = function
        return self._forward_functions[key]

    def _with_loss(self, forward, features, labels):
        outputs = forward(features)
        return {**outputs, "per_example_loss": tf.cast(self.loss_fn(labels, outputs), tf.float32)}


def predict_in_order(predictor, inputs, batch_size, lengths, names, fixed_batches=False, with_loss=False):
    """Yields `predictor`'s outputs on `inputs` for the input order's batches of `batch_size`, as dicts of NumPy arrays;
    `with_loss`: `inputs` is (features, labels). Runs `lengths.LengthSorted`'s batches; `names`: the inputs with the
    sequence last."""
    window = 1
    if lengths_lib.sorts(lengths, fixed_batches):
        spec = lengths_lib.batch_spec(inputs, batch_size, lengths, names)
        outputs = predictor.prepare_predict(spec, with_loss).get_concrete_function().structured_outputs
        seq_length = np.shape((inputs[0] if isinstance(inputs, tuple) else inputs)[lengths_lib.MASK])[-1]
        window = lengths_lib.window_batches(outputs, batch_size, seq_length)
    batches = lengths_lib.LengthSorted(inputs, batch_size, lengths, names, fixed_batches, window)
    yield from batches.in_input_order(predictor.predict(batches.dataset, with_loss))


def estimator_losses(batches):
    """The Estimator's evaluation losses from the `per_example_loss` of `predict_in_order`'s batches: `eval_loss` (mean
    over examples) and `loss` (mean of batch means)."""
    per_batch = [batch["per_example_loss"] for batch in batches]
    return {"eval_loss": float(np.concatenate(per_batch).mean()),
            "loss": float(np.mean([float(np.mean(batch)) for batch in per_batch]))}
