"""run_classifier.py's metrics: `eval_accuracy` / `eval_loss` / `loss` as its Estimator computed them, plus each GLUE
task's own metric (MCC for CoLA, F1 for MRPC and QQP, Pearson and Spearman for STS-B).
"""
import numpy as np

from bert_tf.tasks.classifier.processors import PROCESSORS

GLUE_METRICS = {"cola": ("mcc",), "mrpc": ("f1",), "qqp": ("f1",), "sts-b": ("pearson", "spearman")}


def task_key(processor):
    """The registered task name of a processor instance (PROCESSORS; None for a processor not registered)."""
    for name, cls in PROCESSORS.items():
        if type(processor) is cls:
            return name
    return None


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


def eval_metrics(batches, features, global_step, regression=False, metric_names=()):
    """The original's eval results from the input order's batches of outputs: eval_accuracy and eval_loss over real
    examples; loss, the mean of the batches' means (all examples, as the Estimator's); global_step; GLUE metrics.
    """
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
