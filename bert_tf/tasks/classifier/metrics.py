"""run_classifier.py's metrics: `eval_accuracy` / `eval_loss` / `loss` as its Estimator computed them, plus a GLUE
task's own (its processor's `metrics`: MCC for CoLA, F1 for MRPC and QQP, Pearson and Spearman for STS-B), and
eval_metrics.json (classification, run_ner.py's too): per-class precision, recall, F1 and support, macro and
weighted F1, and the confusion matrix (rows true, columns predicted, in label_list order).
"""
import json

import numpy as np

from bert_tf import fileio


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
        elif name == "pearson":
            from scipy.stats import pearsonr
            result["eval_pearson"] = pearsonr(predictions, labels)[0] if len(labels) > 1 else float("nan")
        elif name == "spearman":
            from scipy.stats import spearmanr
            result["eval_spearman"] = spearmanr(predictions, labels)[0] if len(labels) > 1 else float("nan")
        else:
            raise ValueError(f"Unknown metric {name!r}.")
    return result


def _gather(batches, features, regression):
    """(per-example losses, the batches' mean losses, scores, real-example mask, labels) of the input order's
    `batches` of outputs for `features`."""
    losses, batch_means, scores = [], [], []
    for batch in batches:
        per_example = np.asarray(batch["per_example_loss"], np.float32)
        losses.append(per_example)
        batch_means.append(np.float32(per_example.mean()))
        scores.append(np.asarray(batch["predictions"] if regression else batch["logits"]))
    losses, scores = np.concatenate(losses), np.concatenate(scores)
    if len(losses) != len(features):
        raise ValueError(f"Got {len(losses)} predictions for {len(features)} examples.")
    real = np.array([f.is_real_example for f in features], bool)
    labels = np.array([f.label_id for f in features], np.float32 if regression else np.int64)
    if not real.any():
        raise ValueError("The eval set has no examples.")
    return losses, batch_means, scores, real, labels


def eval_metrics(batches, features, global_step, regression=False, metric_names=()):
    """The original's eval results from the input order's batches of outputs: eval_accuracy and eval_loss over real
    examples; loss, the mean of the batches' means (all examples, as the Estimator's); global_step; GLUE metrics.
    """
    losses, batch_means, scores, real, labels = _gather(batches, features, regression)
    result = {
        "eval_loss": np.float32(losses[real].mean()),
        "global_step": int(global_step),
        "loss": np.float32(np.mean(batch_means)),
    }
    predictions = scores if regression else np.argmax(scores, axis=-1)
    if not regression:
        result["eval_accuracy"] = np.float32(np.mean(predictions[real] == labels[real]))
    for key, value in glue_metrics(metric_names, predictions[real], labels[real]).items():
        result[key] = np.float32(value)
    return result


def class_metrics(per_class, label_list, true_ids, predicted_ids):
    """eval_metrics.json's figures. `per_class`: {name: (precision, recall, f1, support)}; macro and weighted F1 are
    the mean and the support-weighted mean of its F1s (scikit-learn's and seqeval's); the confusion matrix counts
    the label ids `true_ids` (rows) x `predicted_ids` (columns) in `label_list` order."""
    from sklearn.metrics import confusion_matrix

    f1 = np.array([scores[2] for scores in per_class.values()], np.float64)
    support = np.array([scores[3] for scores in per_class.values()], np.float64)
    counts = confusion_matrix(true_ids, predicted_ids, labels=np.arange(len(label_list)))
    return {
        "per_class": {name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for name, (p, r, f, s) in per_class.items()},
        "macro_f1": float(f1.mean()) if len(f1) else 0.0,
        "weighted_f1": float(np.average(f1, weights=support)) if support.sum() else 0.0,
        "confusion_matrix": {"labels": list(label_list), "counts": counts.tolist()},
    }


def label_metrics(batches, features, label_list):
    """`class_metrics` of a classifier's real examples, per label of `label_list` (scikit-learn's
    precision_recall_fscore_support)."""
    from sklearn.metrics import precision_recall_fscore_support

    _, _, scores, real, labels = _gather(batches, features, regression=False)
    true_ids, predicted_ids = labels[real], np.argmax(scores, axis=-1)[real]
    per_label = precision_recall_fscore_support(true_ids, predicted_ids, labels=np.arange(len(label_list)),
                                                zero_division=0)
    return class_metrics(dict(zip(label_list, zip(*per_label))), label_list, true_ids, predicted_ids)


def write_class_metrics(path, metrics):
    """Writes `class_metrics`' figures to `path` (eval_metrics.json) atomically."""
    fileio.write_text_atomically(path, json.dumps(metrics, indent=2) + "\n")
