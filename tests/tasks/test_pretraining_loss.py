"""The pretraining loss terms against NumPy: log-likelihoods, their gradient, and PretrainingLoss's values."""
import numpy as np
import tensorflow as tf

from bert_tf.tasks.pretraining import PretrainingLoss, log_likelihoods


def numpy_log_softmax(logits):
    shifted = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_log_likelihoods_and_their_gradient_match_numpy():
    rng = np.random.RandomState(0)
    logits = (3 * rng.randn(2, 5, 50)).astype(np.float32)
    labels = rng.randint(0, 50, (2, 5))
    log_probs = numpy_log_softmax(logits)
    x = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(x)
        got = log_likelihoods(x, tf.constant(labels, tf.int32))
    np.testing.assert_allclose(got, np.take_along_axis(log_probs, labels[..., None], -1)[..., 0], atol=1e-5)
    one_hot = np.eye(50)[labels]
    np.testing.assert_allclose(tape.gradient(got, x), one_hot - np.exp(log_probs), atol=1e-6)


def test_pretraining_loss_values_are_the_originals_weighted_terms():
    rng = np.random.RandomState(1)
    mlm_logits, nsp_logits = rng.randn(3, 4, 30).astype(np.float32), rng.randn(3, 2).astype(np.float32)
    ids, nsp = rng.randint(0, 30, (3, 4)), rng.randint(0, 2, (3, 1))
    weights = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], np.float32)
    values = PretrainingLoss().values(
        {"masked_lm_ids": tf.constant(ids), "masked_lm_weights": tf.constant(weights),
         "next_sentence_labels": tf.constant(nsp)},
        {"masked_lm_logits": tf.constant(mlm_logits), "next_sentence_logits": tf.constant(nsp_logits)})
    mlm_nll = -np.take_along_axis(numpy_log_softmax(mlm_logits), ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(values["masked_lm_loss"], weights * mlm_nll, atol=1e-5)
    np.testing.assert_allclose(values["masked_lm_accuracy"], weights * (mlm_logits.argmax(-1) == ids))
    np.testing.assert_allclose(values["next_sentence_loss"],
                               -numpy_log_softmax(nsp_logits)[np.arange(3), nsp[:, 0]], atol=1e-5)
    np.testing.assert_allclose(values["next_sentence_accuracy"], nsp_logits.argmax(-1) == nsp[:, 0])
