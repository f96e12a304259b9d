"""run_classifier.py's metrics: the Estimator's `eval_accuracy`, `eval_loss` and `loss`, a GLUE task's own (its
processor's `metrics`: MCC, F1, Pearson and Spearman), and eval_metrics.json (run_ner.py's too): per-class precision,
recall, F1 and support, macro and weighted F1, and the confusion matrix (rows true, columns predicted).

Multi-label: eval_micro_f1, eval_macro_f1 and eval_subset_accuracy (every label right) replace eval_accuracy.
`tune_thresholds` picks per label the dev probability t maximising the F1 of `probability >= t` (the highest of equal
F1s; `task_models.DEFAULT_THRESHOLD` without a positive example).
"""
import json

import numpy as np

from bert_tf import fileio
from bert_tf.model import task_models


def glue_metrics(metric_names, predictions, labels):
    """GLUE metrics of real examples: mcc (Matthews), f1 (positive class 1), pearson, spearman."""
    result = {}
    for name in metric_names:
        if name == "mcc":
            from sklearn.metrics import matthews_corrcoef
            result["eval_mcc"] = matthews_corrcoef(labels, predictions)
        elif name == "f1":
            from sklearn.metrics import f1_score
            result["eval_f1"] = f1_score(labels, predictions, pos_label=1, zero_division=0.0)
        elif name in ("pearson", "spearman"):
            from scipy import stats
            correlation = stats.pearsonr if name == "pearson" else stats.spearmanr
            result[f"eval_{name}"] = correlation(predictions, labels)[0] if len(labels) > 1 else float("nan")
        else:
            raise ValueError(f"Unknown metric {name!r}.")
    return result


def _gather(batches, features, regression, multi_label=False):
    """(per-example losses, the batches' mean losses, scores (regression: predictions; multi-label: probabilities; else
    logits), real-example mask, labels) of `features`' batches of outputs."""
    losses, batch_means, scores = [], [], []
    score = "predictions" if regression else "probabilities" if multi_label else "logits"
    for batch in batches:
        per_example = np.asarray(batch["per_example_loss"], np.float32)
        losses.append(per_example)
        batch_means.append(np.float32(per_example.mean()))
        scores.append(np.asarray(batch[score]))
    losses, scores = np.concatenate(losses), np.concatenate(scores)
    if len(losses) != len(features):
        raise ValueError(f"Got {len(losses)} predictions for {len(features)} examples.")
    real = np.array([f.is_real_example for f in features], bool)
    labels = np.array([f.label_id for f in features], np.float32 if regression else np.int64)
    if not real.any():
        raise ValueError("The eval set has no examples.")
    return losses, batch_means, scores, real, labels


def eval_metrics(batches, features, global_step, regression=False, metric_names=(), thresholds=None):
    """The original's eval results: eval_accuracy and eval_loss over real examples, loss (the mean of the batches'
    means), global_step, GLUE metrics; with multi-label `thresholds`, the multi-label figures instead."""
    losses, batch_means, scores, real, labels = _gather(batches, features, regression, thresholds is not None)
    result = {
        "eval_loss": np.float32(losses[real].mean()),
        "global_step": int(global_step),
        "loss": np.float32(np.mean(batch_means)),
    }
    if thresholds is not None:
        from sklearn.metrics import accuracy_score, f1_score

        true, predicted = labels[real], scores[real] >= np.asarray(thresholds)
        for average in ("micro", "macro"):
            result[f"eval_{average}_f1"] = np.float32(f1_score(true, predicted, average=average, zero_division=0))
        result["eval_subset_accuracy"] = np.float32(accuracy_score(true, predicted))
        return result
    predictions = scores if regression else np.argmax(scores, axis=-1)
    if not regression:
        result["eval_accuracy"] = np.float32(np.mean(predictions[real] == labels[real]))
    for key, value in glue_metrics(metric_names, predictions[real], labels[real]).items():
        result[key] = np.float32(value)
    return result


def _per_class_metrics(per_class):
    """`per_class` ({name: (precision, recall, f1, support)}) with its macro and support-weighted F1 (as
    scikit-learn's)."""
    f1 = np.array([scores[2] for scores in per_class.values()], np.float64)
    support = np.array([scores[3] for scores in per_class.values()], np.float64)
    return {
        "per_class": {name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for name, (p, r, f, s) in per_class.items()},
        "macro_f1": float(f1.mean()) if len(f1) else 0.0,
        "weighted_f1": float(np.average(f1, weights=support)) if support.sum() else 0.0,
    }


def class_metrics(per_class, label_list, true_ids, predicted_ids):
    """eval_metrics.json's figures: `_per_class_metrics` and the confusion matrix of `true_ids` (rows) x `predicted_ids`
    (columns) in `label_list` order."""
    from sklearn.metrics import confusion_matrix

    counts = confusion_matrix(true_ids, predicted_ids, labels=np.arange(len(label_list)))
    return {**_per_class_metrics(per_class), "confusion_matrix": {"labels": list(label_list),
                                                                  "counts": counts.tolist()}}


def label_metrics(batches, features, label_list):
    """`class_metrics` of a classifier's real examples (scikit-learn's precision_recall_fscore_support)."""
    from sklearn.metrics import precision_recall_fscore_support

    _, _, scores, real, labels = _gather(batches, features, regression=False)
    true_ids, predicted_ids = labels[real], np.argmax(scores, axis=-1)[real]
    per_label = precision_recall_fscore_support(true_ids, predicted_ids, labels=np.arange(len(label_list)),
                                                zero_division=0)
    return class_metrics(dict(zip(label_list, zip(*per_label))), label_list, true_ids, predicted_ids)


def multi_label_scores(batches, features):
    """(probabilities, multi-hot labels), each [real examples, labels], of a multi-label classifier's outputs."""
    _, _, probabilities, real, labels = _gather(batches, features, regression=False, multi_label=True)
    return probabilities[real], labels[real]


def multi_label_metrics(batches, features, label_list, thresholds):
    """A multi-label classifier's eval_metrics.json: per-label figures, macro, weighted and micro F1, and the
    thresholds."""
    from sklearn.metrics import f1_score, precision_recall_fscore_support

    probabilities, true = multi_label_scores(batches, features)
    predicted = probabilities >= np.asarray(thresholds)
    per_label = precision_recall_fscore_support(true, predicted, zero_division=0)
    return {**_per_class_metrics(dict(zip(label_list, zip(*per_label)))),
            "micro_f1": float(f1_score(true, predicted, average="micro", zero_division=0)),
            "thresholds": dict(zip(label_list, (float(t) for t in thresholds)))}


def tune_thresholds(probabilities, labels):
    """Each label's threshold (module docstring) from `probabilities` and 0/1 `labels` [examples, labels]."""
    thresholds = []
    for p, y in zip(np.asarray(probabilities).T, np.asarray(labels, bool).T):
        order = np.argsort(-p, kind="stable")
        p, y = p[order], y[order]
        last = np.r_[p[1:] != p[:-1], True]  # the last example of each value: predicted with every higher one
        true_positives, predicted = np.cumsum(y)[last], np.flatnonzero(last) + 1
        f1 = 2 * true_positives / (predicted + y.sum())
        thresholds.append(float(p[last][np.argmax(f1)]) if y.any() else task_models.DEFAULT_THRESHOLD)
    return thresholds


def write_class_metrics(path, metrics):
    """Writes `class_metrics`' figures to `path` (eval_metrics.json) atomically."""
    fileio.write_text_atomically(path, json.dumps(metrics, indent=2) + "\n")
