"""Prediction over a task's examples in the original's batches, for the tasks whose evaluation loss is per example
(run_ner.py, run_swag.py): length-sorted batches (bert_tf.data.lengths.LengthSorted), outputs given back in the
input order, TPU-style whole batches padded and their padding dropped, and the Estimator's two losses.
"""
import numpy as np

from bert_tf.data import lengths as lengths_lib


def _padded(arrays, count, fill):
    """`arrays` (name -> [N, ...]) with `count` rows of `fill` appended."""
    return {k: np.concatenate([v, np.full((count,) + v.shape[1:], fill, v.dtype)]) for k, v in arrays.items()}


def predict_examples(trainer, inputs, labels, batch_size, lengths, names, fixed_batches=False, label_fill=0, *,
                     output_bytes):
    """Runs `trainer.predict` on the examples of `inputs` (name -> [N, ...] arrays; `names`: those cut to the
    batch's longest text) and, unless `labels` is None, their per-example loss.

    With `fixed_batches` (TPU) the last batch is filled up with padding examples (zero inputs, labels
    `label_fill`), whose outputs are dropped. `lengths` (bert_tf.data.lengths): the model runs on length-sorted
    batches cut to their longest text; the outputs come back as the input order's batches of `batch_size`.
    `output_bytes`: what one example's outputs take, `per_example_loss` included (`lengths_lib.OutputBytes`).
    Returns (the outputs of each input-order batch for its real examples, None or the losses: `eval_loss`, the
    mean per-example loss, and `loss`, the mean of the batches' means, as the Estimator's).
    """
    count = len(next(iter(inputs.values())))
    padding = -count % batch_size if fixed_batches else 0
    if padding:
        inputs = _padded(inputs, padding, 0)
        labels = None if labels is None else _padded(labels, padding, label_fill)
    batches = lengths_lib.LengthSorted(inputs if labels is None else (inputs, labels), batch_size, lengths, names,
                                       fixed_batches, output_bytes=output_bytes)
    outputs, done = [], 0
    for batch in batches.in_input_order(trainer.predict(batches.dataset, with_loss=labels is not None)):
        real = min(len(next(iter(batch.values()))), count - done)
        outputs.append({name: values[:real] for name, values in batch.items()})
        done += real
    if done != count:
        raise RuntimeError(f"The model returned {done} predictions for {count} examples.")
    if labels is None:
        return outputs, None
    losses = [batch["per_example_loss"] for batch in outputs]
    return outputs, {"eval_loss": float(np.concatenate(losses).mean()),
                     "loss": float(np.mean([float(np.mean(batch)) for batch in losses]))}
