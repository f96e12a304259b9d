"""run_classifier.py's task: `ClassifierTask` (run by `bert_tf.tasks.runner`), its losses (--class_weights' is
run_ner.py's too), evaluation (eval_results.txt, eval_metrics.json) and prediction (test_results.tsv, GLUE submission
files).

--multi_label: an example's label is a list, or a string joined by --label_separator; a label is predicted where its
probability is >= its threshold (`task_models.DEFAULT_THRESHOLD`, or with --tune_thresholds one tuned on the dev set at
each evaluation and recorded in model_metadata.json for runs that do not train). --doc_stride=N > 0: a longer text
becomes windows (`features.convert_example_windows`); training takes each window as an example with its text's label
(--class_weights=balanced counts texts), evaluation and prediction pool each text's windows (`pool_windows`), so every
result counts texts.
"""
import collections
import itertools
import math
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.model import task_models
from bert_tf.tasks import result_files, run_record
from bert_tf.tasks.classifier.features import (
    check_dev_labels,
    check_windows,
    features_to_arrays,
    file_based_convert_examples_to_features,
    file_based_input_fn_builder,
)
from bert_tf.tasks.classifier.metrics import (
    eval_metrics,
    label_metrics,
    multi_label_metrics,
    multi_label_scores,
    tune_thresholds,
    write_class_metrics,
)
from bert_tf.tasks.classifier.processors import (
    get_processor,
    prepare_label_list,
)
from bert_tf.tasks.task import Task, TrainData
from bert_tf.text import packing
from bert_tf.training import losses, prediction


def classification_loss(labels, outputs):
    """The original's per-example loss [B]: softmax cross-entropy of `logits` [B, num_labels] with `label_ids` [B]."""
    logits = tf.cast(outputs["logits"], tf.float32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label_ids"], tf.int32),
                                                          logits=logits)


def regression_loss(labels, outputs):
    """Per-example squared error [B] of the predicted score `predictions` [B] against `label_ids` [B] (STS-B)."""
    predictions = tf.cast(outputs["predictions"], tf.float32)
    return tf.square(predictions - tf.cast(labels["label_ids"], tf.float32))


def multi_label_loss(labels, outputs, positive_weights=None):
    """Per-example loss [B]: the mean over labels of the sigmoid cross-entropy of `logits` [B, L] with multi-hot
    `label_ids` [B, L], positives weighted by `positive_weights` (BCEWithLogitsLoss's pos_weight)."""
    logits = tf.cast(outputs["logits"], tf.float32)
    targets = tf.cast(labels["label_ids"], tf.float32)
    if positive_weights is None:
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), -1)
    return tf.reduce_mean(tf.nn.weighted_cross_entropy_with_logits(targets, logits, positive_weights), -1)


def split_labels(label, separator):
    """A multi-label example's labels: a list's, or a string's split by `separator`; stripped, empties dropped, each
    once, in order (None: none)."""
    pieces = label if isinstance(label, (list, tuple)) else [] if label is None else str(label).split(separator)
    return list(dict.fromkeys(piece for piece in (str(p).strip() for p in pieces) if piece))


def parse_class_weights(text):
    """--class_weights: "" -> None (unweighted, the original), "balanced", or the comma list's numbers (each > 0)."""
    if not text or text == "balanced":
        return text or None
    expected = "expected 'balanced' or a comma list of positive numbers, one per label in label_list order"
    try:
        weights = [float(value) for value in text.split(",")]
    except ValueError:
        raise ValueError(f"--class_weights={text}: {expected}.") from None
    bad = [w for w in weights if not (math.isfinite(w) and w > 0)]
    if bad:
        raise ValueError(f"--class_weights={text}: {bad[0]} is not a positive number; {expected}.")
    return weights


def class_weights(text, label_list, train_labels, multi_label=False):
    """Each label's loss weight from --class_weights `text`. "balanced": n_samples / (n_classes * count) of
    `train_labels` (0 for an absent label); `multi_label`: a positive term's weight, negatives over positives (1 if all
    or none)."""
    weights = parse_class_weights(text)
    if weights == "balanced" and multi_label:
        counts = collections.Counter(label for labels in train_labels for label in labels)
        total = len(train_labels)
        weights = [(total - counts[label]) / counts[label] if 0 < counts[label] < total else 1.0
                   for label in label_list]
    elif weights == "balanced":
        counts = collections.Counter(train_labels)
        present = [label for label in label_list if counts[label]]
        total = sum(counts[label] for label in present)
        weights = [total / (len(present) * counts[label]) if counts[label] else 0.0 for label in label_list]
    elif len(weights) != len(label_list):
        raise ValueError(f"--class_weights={text}: {len(weights)} weights for {len(label_list)} labels "
                         f"({', '.join(label_list)}); give one per label, in this order.")
    logging.info("Class weights: %s", ", ".join(f"{label} {w:.4g}" for label, w in zip(label_list, weights)))
    return weights


class ClassWeightedLoss:
    """Cross-entropy of `logits` with `label_ids` ([B], or [B, S] with -1 unlabelled) weighted per label, as a batch
    loss `sum(w * l) / sum(w)` (CrossEntropyLoss(weight=...)); a position's weight is divided by its example's labelled
    positions, so equal weights give the original loss. `multi_label`: `multi_label_loss` with the weights on each
    label's positives, averaged over the update's batch. Called: the unweighted `loss_fn`."""
    terms = {"loss": losses.Term()}

    def __init__(self, loss_fn, class_weights, multi_label=False):
        self.loss_fn = loss_fn
        self.class_weights = np.asarray(class_weights, np.float32)
        self.multi_label = multi_label

    def __call__(self, labels, outputs):
        return self.loss_fn(labels, outputs)

    def _positions(self, labels):
        """(each position's weight [B, S], its label id [B, S], -1 made 0)."""
        ids = tf.cast(labels["label_ids"], tf.int32)
        if ids.shape.rank == 1:
            ids = ids[:, None]
        labelled = tf.cast(ids >= 0, tf.float32)
        ids = tf.maximum(ids, 0)
        share = labelled / tf.maximum(tf.reduce_sum(labelled, -1, keepdims=True), 1.0)
        return tf.gather(self.class_weights, ids) * share, ids

    def weights(self, labels):
        if self.multi_label:
            return {"loss": tf.ones(tf.shape(labels["label_ids"])[:1], tf.float32)}
        return {"loss": tf.reduce_sum(self._positions(labels)[0], -1)}

    def values(self, labels, outputs):
        if self.multi_label:
            return {"loss": multi_label_loss(labels, outputs, self.class_weights)}
        weights, ids = self._positions(labels)
        logits = tf.cast(outputs["logits"], tf.float32)
        if logits.shape.rank == 2:
            logits = logits[:, None]
        cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=logits)
        return {"loss": tf.reduce_sum(weights * cross_entropy, -1)}


def format_submission(ids, predictions, label_list, id_header="index", thresholds=None, separator=","):
    """A GLUE submission file: `index<TAB>prediction`, then each example's id and predicted label (regression: the
    score; multi-label, with `thresholds`: the labels at or above theirs, joined by `separator`)."""
    lines = [f"{id_header}\tprediction\n"]
    for example_id, output in zip(ids, predictions):
        if label_list is None:
            value = str(np.float32(output))
        elif thresholds is not None:
            value = separator.join(label for label, p, t in zip(label_list, output, thresholds) if p >= t)
        else:
            value = label_list[int(np.argmax(output))]
        lines.append(f"{example_id}\t{value}\n")
    return "".join(lines)


def pool_windows(batches, features, batch_size, pooling, multi_label=False):
    """Yields `batch_size` texts' outputs a batch, each pooled over its windows (`pool_document`) as `batches` come."""
    rows = (dict(zip(batch, values)) for batch in batches for values in zip(*batch.values()))
    texts = itertools.accumulate(not feature.window for feature in features)
    pooled = (pool_document([row for _, _, row in windows], windows[0][1].label_id, pooling, multi_label)
              for windows in (list(group) for _, group in itertools.groupby(zip(texts, features, rows),
                                                                           key=lambda item: item[0])))
    while chunk := list(itertools.islice(pooled, batch_size)):
        yield {name: np.stack([text[name] for text in chunk]) for name in chunk[0]}


def _log_pool(log_values, pooling):
    """log(mean) (or max, `pooling`) over axis 0 of the values whose logs are `log_values`."""
    if pooling == "max":
        return log_values.max(0)
    return np.logaddexp.reduce(log_values, 0) - np.log(len(log_values))


def pool_document(rows, label_id, pooling, multi_label=False):
    """One text's outputs from its windows' `rows`: the mean or max (`pooling`) of their probabilities (the max rescaled
    to sum to 1), with `logits` their logs (multi-label: log-odds), or of regression predictions; the loss recomputed.
    Float64, in log space."""
    if len(rows) == 1:
        return rows[0]
    logits = np.array([row["logits"] for row in rows], np.float64)
    if "predictions" in rows[0]:
        predictions = np.array([row["predictions"] for row in rows], np.float64)
        prediction = predictions.max() if pooling == "max" else predictions.mean()
        pooled, loss = {"logits": [prediction], "predictions": prediction}, (prediction - label_id) ** 2
    elif multi_label:  # log p and log(1 - p): the max p has the least 1 - p
        log_p, log_q = -np.logaddexp(0, -logits), -np.logaddexp(0, logits)
        log_p, log_q = _log_pool(log_p, pooling), log_q.min(0) if pooling == "max" else _log_pool(log_q, pooling)
        targets = np.asarray(label_id, np.float64)
        pooled = {"logits": log_p - log_q, "probabilities": np.exp(log_p)}
        loss = -np.mean(targets * log_p + (1 - targets) * log_q)
    else:
        log_p = _log_pool(logits - np.logaddexp.reduce(logits, -1, keepdims=True), pooling)
        log_p -= np.logaddexp.reduce(log_p)  # the max's scaled to sum to 1 (the mean's sum is 1)
        pooled, loss = {"logits": log_p, "probabilities": np.exp(log_p)}, -log_p[label_id]
    if "per_example_loss" in rows[0]:
        pooled["per_example_loss"] = loss
    return {name: np.asarray(value, np.float32) for name, value in pooled.items()}


class ClassifierTask(Task):
    """run_classifier.py's task: a processor's data sets (`get_processor`) -> BertClassifier. `doc_stride`,
    `window_pooling` None: the training run's, else 0 and mean."""
    def __init__(self, task_name, data_dir, xnli_language="zh", columns=None, doc_stride=None,
                 window_pooling=None):
        self.processor = get_processor(task_name, xnli_language=xnli_language, columns=columns)
        self.data_dir = data_dir
        self.doc_stride, self.window_pooling = doc_stride, window_pooling
        self.label_list = None  # read_inputs sets it (None for regression)
        self.train_examples, self.dev_splits, self.test_splits = None, (), ()  # read_inputs reads them
        self.loss = regression_loss if self.processor.is_regression else classification_loss
        self.multi_label, self.thresholds = False, None  # read_inputs sets them: the run's

    @property
    def spec(self):
        return task_models.REGISTRY["regression" if self.processor.is_regression
                                    else "multi_label" if self.multi_label else "classifier"]

    @property
    def answer_settings(self):
        """--doc_stride's windows, which bert_tf.load's answers and the run's export take too."""
        return {"doc_stride": self.doc_stride, "window_pooling": self.window_pooling} if self.doc_stride else {}

    export_options = answer_settings

    def check_flags(self, run):
        for flag in ("class_weights", "multi_label"):
            if getattr(run, flag) and self.processor.is_regression:
                raise ValueError(f"--{flag} applies to classification; {type(self.processor).__name__} is a "
                                 f"regression task.")
        if run.tune_thresholds and not (run.multi_label and run.do_eval):
            raise ValueError("--tune_thresholds chooses a multi-label classifier's thresholds on the dev set: it needs "
                             "--multi_label and --do_eval.")
        if run.multi_label and not run.label_separator:
            raise ValueError("--label_separator is empty: give the string that joins an example's labels.")
        parse_class_weights(run.class_weights)
        # A run that does not train: what the training run in output_dir recorded (`checkpoints.run_record`).
        recorded = (checkpoints.run_record(run.output_dir) if not run.do_train and fileio.isdir(run.output_dir)
                    else None) or {}
        if recorded.get("task") in ("classifier", "multi_label") and (recorded["task"] == "multi_label") != \
                run.multi_label:
            kind = "multi-label" if run.multi_label else "single-label"
            raise ValueError(f"{run.output_dir} holds a {'single' if run.multi_label else 'multi'}-label classifier "
                             f"(its {task_models.METADATA_FILE}), not a {kind} one: "
                             f"{'drop' if run.multi_label else 'add'} --multi_label.")
        if self.doc_stride is None:  # not given: the trained run's, else no windows
            self.doc_stride = recorded.get("doc_stride", 0)
            if self.doc_stride:
                logging.info("--doc_stride=%d, --window_pooling=%s: the training run's (%s)", self.doc_stride,
                             recorded["window_pooling"], task_models.METADATA_FILE)
        if self.window_pooling is None:
            self.window_pooling = recorded.get("window_pooling", packing.WINDOW_POOLINGS[0])
        packing.check_doc_stride(self.doc_stride)
        if self.window_pooling not in packing.WINDOW_POOLINGS:
            raise ValueError(f"--window_pooling={self.window_pooling}: expected "
                             f"{' or '.join(packing.WINDOW_POOLINGS)}.")
        if self.window_pooling != packing.WINDOW_POOLINGS[0] and not self.doc_stride:
            raise ValueError(f"--window_pooling={self.window_pooling} pools the windows of --doc_stride, which is 0 "
                             "(no windows: a longer text is cut): give --doc_stride=N > 0.")

    def read_inputs(self, run, config):
        """Reads each input file once (an unknown dev label fails before training), splits multi-label labels, reads
        the recorded thresholds unless training, and weighs the loss by --class_weights."""
        self.multi_label = run.multi_label
        if run.do_train:
            self.train_examples = self._labelled(run, self.processor.get_train_examples(self.data_dir))
        self.label_list = prepare_label_list(self.processor, self.data_dir, run.output_dir, run.do_train,
                                             train_examples=self.train_examples)
        loss_fn = multi_label_loss if self.multi_label else classification_loss
        if self.multi_label:
            self.loss = loss_fn
            saved = None if run.do_train else run_record.recorded_thresholds(run.output_dir, self.label_list)
            self.thresholds = saved or [task_models.DEFAULT_THRESHOLD] * len(self.label_list)
        if run.do_train and run.class_weights:
            weights = class_weights(run.class_weights, self.label_list,
                                    [example.label for example in self.train_examples], self.multi_label)
            self.loss = ClassWeightedLoss(loss_fn, weights, self.multi_label)
        if run.do_eval:
            self.dev_splits = [(suffix, self._labelled(run, examples))
                               for suffix, examples in self.processor.dev_splits(self.data_dir)]
            check_dev_labels(self.dev_splits, self.label_list, self.multi_label)
        if run.do_predict:
            self.test_splits = [(suffix, self._labelled(run, examples), submission)
                                for suffix, examples, submission in self.processor.test_splits(self.data_dir)]

    def _labelled(self, run, examples):
        """`examples`, with multi-label labels split into lists (`split_labels`)."""
        if self.multi_label:
            for example in examples:
                example.label = split_labels(example.label, run.label_separator)
        return examples

    def build_model(self, config, restored=False):
        """The spec's model; multi-label with the run's thresholds."""
        model = super().build_model(config, restored)
        if self.multi_label:
            model.thresholds = self.thresholds
        return model

    def train_data(self, run, tokenizer, trainer):
        """Writes work_dir/train.tf_record. With --doc_stride, checks the dev/test windows fit before training and
        records the window settings."""
        if self.doc_stride:
            check_windows([example for split in (*self.dev_splits, *self.test_splits) for example in split[1]],
                          run.max_seq_length, tokenizer, self.doc_stride)
        examples = self.train_examples
        train_file = os.path.join(trainer.work_dir, "train.tf_record")
        _, written = file_based_convert_examples_to_features(examples, self.label_list, run.max_seq_length, tokenizer,
                                                             train_file, self.multi_label, self.doc_stride)
        if self.doc_stride:
            logging.info("Training on %d examples split into %d windows", len(examples), written.count)
        dataset_fn = file_based_input_fn_builder(train_file, run.max_seq_length, is_training=True,
                                                 drop_remainder=True, regression=self.processor.is_regression,
                                                 lengths=run.sequence_lengths,
                                                 label_shape=(len(self.label_list),) if self.multi_label else ())
        return TrainData(dataset_fn, written.count, (train_file,), written.fingerprint, self.answer_settings or None)

    def _inputs(self, features, seq_length, with_labels):
        """The prediction loop's inputs of `features`; `with_labels`: (inputs, labels)."""
        inputs, labels = features_to_arrays(features, seq_length, regression=self.label_list is None,
                                            label_shape=(len(self.label_list),) if self.multi_label else ())
        return (inputs, labels) if with_labels else inputs

    def prepare_evaluation(self, run, trainer):
        """Traces evaluation's forward pass (`Trainer.train`'s `meanwhile`) before the dev set exists, on an empty dev
        set."""
        spec = lengths_lib.batch_spec(self._inputs([], run.max_seq_length, with_labels=True), run.eval_batch_size,
                                      run.sequence_lengths, packing.INPUT_NAMES, run.fixed_batches)
        trainer.prepare_predict(spec, with_loss=True)

    def _run_model(self, run, tokenizer, trainer, examples, record_name, batch_size, with_labels):
        """Writes `examples` to output_dir/`record_name` as the original's records (windows with --doc_stride; whole
        batches for TPUs) and runs the model on them. -> (features, [each batch's outputs]); with windows, each text's
        first window and pooled outputs."""
        features, _ = file_based_convert_examples_to_features(
            examples, self.label_list, run.max_seq_length, tokenizer, os.path.join(run.output_dir, record_name),
            self.multi_label, self.doc_stride, batch_size if run.fixed_batches else 1)
        padding = sum(not feature.is_real_example for feature in features)
        logging.info("  Num examples = %d (%d actual, %d padding)", len(examples) + padding, len(examples), padding)
        if self.doc_stride:
            logging.info("  Num windows = %d", len(features))
        logging.info("  Batch size = %d", batch_size)
        outputs = prediction.predict_in_order(
            trainer, self._inputs(features, run.max_seq_length, with_labels), batch_size, run.sequence_lengths,
            packing.INPUT_NAMES, run.fixed_batches, with_loss=with_labels)
        if not self.doc_stride:
            return features, list(outputs)
        return ([feature for feature in features if not feature.window],
                list(pool_windows(outputs, features, batch_size, self.window_pooling, self.multi_label)))

    def evaluate(self, run, tokenizer, trainer):
        """Evaluates each dev set into eval_results<suffix>.txt, eval_metrics<suffix>.json and eval<suffix>.tf_record;
        -> {suffix: results}. --tune_thresholds: the multi-label thresholds tuned on the first dev set, recorded
        (`run_record.record_thresholds`) and set in the model."""
        regression = self.processor.is_regression
        results = {}
        for suffix, examples in self.dev_splits:
            logging.info("***** Running evaluation%s *****", suffix)
            features, outputs = self._run_model(run, tokenizer, trainer, examples, f"eval{suffix}.tf_record",
                                                run.eval_batch_size, with_labels=True)
            if run.tune_thresholds and not results:
                self.thresholds[:] = tune_thresholds(*multi_label_scores(outputs, features))
                run_record.record_thresholds(run.output_dir, self.thresholds)
                logging.info("Thresholds tuned on the dev set: %s", ", ".join(
                    f"{label} {t:.4g}" for label, t in zip(self.label_list, self.thresholds)))
            result = eval_metrics(outputs, features, trainer.step, regression, self.processor.metrics, self.thresholds)
            if not regression:
                write_class_metrics(os.path.join(run.output_dir, f"eval_metrics{suffix}.json"),
                                    multi_label_metrics(outputs, features, self.label_list, self.thresholds)
                                    if self.multi_label else label_metrics(outputs, features, self.label_list))
            result_files.write_eval_results(os.path.join(run.output_dir, f"eval_results{suffix}.txt"), result,
                                            f"Eval results{suffix}")
            results[suffix] = result
        if run.tune_thresholds:
            trainer.model.thresholds = self.thresholds
        return results

    def flat_results(self, results):
        """The first dev set's results (MNLI: matched) and the others' keys with their suffix (eval_accuracy_mm)."""
        first, *others = results
        return {**results[first], **{f"{key}{suffix}": value for suffix in others
                                     for key, value in results[suffix].items() if key != "global_step"}}

    def predict(self, run, tokenizer, trainer):
        """Predicts each test set into test_results<suffix>.tsv, its submission file and predict<suffix>.tf_record;
        -> {suffix: rows}."""
        output_key = "predictions" if self.processor.is_regression else "probabilities"
        all_rows = {}
        for suffix, examples, submission in self.test_splits:
            logging.info("***** Running prediction%s *****", suffix)
            _, outputs = self._run_model(run, tokenizer, trainer, examples, f"predict{suffix}.tf_record",
                                         run.predict_batch_size, with_labels=False)
            rows = [row for batch in outputs for row in np.asarray(batch[output_key], np.float32)][:len(examples)]
            fileio.write_text_atomically(os.path.join(run.output_dir, f"test_results{suffix}.tsv"),
                                         result_files.format_probabilities(rows))
            if submission:
                ids = [e.example_id if e.example_id is not None else str(i) for i, e in enumerate(examples)]
                fileio.write_text_atomically(os.path.join(run.output_dir, f"{submission}.tsv"), format_submission(
                    ids, rows, self.label_list,
                    getattr(self.processor, "submission_id_header", "index"), self.thresholds, run.label_separator))
            all_rows[suffix] = rows
        return all_rows
