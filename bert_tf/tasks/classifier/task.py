"""run_classifier.py's job: evaluation (eval_results.txt), prediction (test_results.tsv as the original prints float32,
and the GLUE submission files) and `ClassifierTask`, which `bert_tf.tasks.runner` runs.

Evaluation and prediction take one path (`run_model`): the examples go to the original's record file
(eval.tf_record, predict.tf_record: a user's tooling may read them), and the model runs on their features, held in
memory, in the one prediction loop (`bert_tf.training.prediction.predict_in_order`).
"""
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.data import label_lists
from bert_tf.data import lengths as lengths_lib
from bert_tf.model import task_models
from bert_tf.tasks import result_files
from bert_tf.tasks.classifier.features import (
    check_dev_labels,
    features_to_arrays,
    file_based_convert_examples_to_features,
    file_based_input_fn_builder,
)
from bert_tf.tasks.classifier.metrics import GLUE_METRICS, eval_metrics, task_key
from bert_tf.tasks.classifier.processors import (
    LABEL_LIST_FILE,
    TsvProcessor,
    get_processor,
    pad_examples,
    prepare_label_list,
)
from bert_tf.tasks.task import Task, TrainData
from bert_tf.text import packing
from bert_tf.training import prediction


def classification_loss(labels, outputs):
    """The original's per-example loss [B]: softmax cross-entropy of `logits` [B, num_labels] with `label_ids` [B]."""
    logits = tf.cast(outputs["logits"], tf.float32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label_ids"], tf.int32),
                                                          logits=logits)


def regression_loss(labels, outputs):
    """Per-example squared error [B] of the predicted score `predictions` [B] against `label_ids` [B] (STS-B)."""
    predictions = tf.cast(outputs["predictions"], tf.float32)
    return tf.square(predictions - tf.cast(labels["label_ids"], tf.float32))


def loss_fn_for(processor):
    return regression_loss if processor.is_regression else classification_loss


def format_submission(ids, predictions, label_list, id_header="index"):
    """A GLUE submission file: header `index<TAB>prediction`, then each test example's id and predicted label
    (or score for regression)."""
    lines = [f"{id_header}\tprediction\n"]
    for example_id, output in zip(ids, predictions):
        if label_list is None:
            value = str(np.float32(output))
        else:
            value = label_list[int(np.argmax(output))]
        lines.append(f"{example_id}\t{value}\n")
    return "".join(lines)


def _prediction_inputs(features, seq_length, label_list, with_labels):
    """The prediction loop's inputs of `features`: the model's inputs and, `with_labels`, (them, the labels)."""
    inputs, labels = features_to_arrays(features, seq_length, regression=label_list is None)
    return (inputs, labels) if with_labels else inputs


def run_model(trainer, examples, record_file, tokenizer, label_list, max_seq_length, batch_size, fixed_batches=False,
              lengths=None, with_labels=False):
    """Evaluation's and prediction's one path: writes `examples` (filled up to whole batches where `fixed_batches`)
    to `record_file` as the original's records, and runs the model on their features (`predict_in_order`).
    Returns (the features, the outputs of the input order's batches)."""
    num_actual = len(examples)
    if fixed_batches:
        examples = pad_examples(examples, batch_size)
    features, _ = file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                                          record_file)
    logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual, len(examples) - num_actual)
    logging.info("  Batch size = %d", batch_size)
    outputs = prediction.predict_in_order(
        trainer, _prediction_inputs(features, max_seq_length, label_list, with_labels), batch_size, lengths,
        packing.INPUT_NAMES, fixed_batches, with_loss=with_labels)
    return features, outputs


def evaluate(trainer, processor, dev_splits, tokenizer, label_list, output_dir, max_seq_length, eval_batch_size,
             global_step, fixed_batches=False, lengths=None):
    """Evaluates every dev set ([(suffix, examples)]) into `eval_results<suffix>.txt` and the original's
    `eval<suffix>.tf_record`; `fixed_batches`' filling examples are out of the metrics. Returns {suffix: results}.
    """
    regression = processor.is_regression
    metric_names = GLUE_METRICS.get(task_key(processor), ())
    results = {}
    for suffix, examples in dev_splits:
        logging.info("***** Running evaluation%s *****", suffix)
        features, outputs = run_model(trainer, examples, os.path.join(output_dir, f"eval{suffix}.tf_record"),
                                      tokenizer, label_list, max_seq_length, eval_batch_size, fixed_batches,
                                      lengths, with_labels=True)
        result = eval_metrics(outputs, features, global_step, regression, metric_names)
        result_files.write_eval_results(os.path.join(output_dir, f"eval_results{suffix}.txt"), result,
                                        f"Eval results{suffix}")
        results[suffix] = result
    return results


def predict(trainer, processor, test_splits, tokenizer, label_list, output_dir, max_seq_length, predict_batch_size,
            fixed_batches=False, lengths=None):
    """Predicts every test set ([(suffix, examples, submission name)]) into `test_results<suffix>.tsv` (a row per
    real example), the submission file (`MRPC.tsv`, `MNLI-mm.tsv`, ...) and `predict<suffix>.tf_record`.
    Returns {suffix: [rows]}."""
    output_key = "predictions" if processor.is_regression else "probabilities"
    all_rows = {}
    for suffix, examples, submission in test_splits:
        logging.info("***** Running prediction%s *****", suffix)
        _, outputs = run_model(trainer, examples, os.path.join(output_dir, f"predict{suffix}.tf_record"), tokenizer,
                               label_list, max_seq_length, predict_batch_size, fixed_batches, lengths)
        rows = [row for batch in outputs for row in np.asarray(batch[output_key], np.float32)][:len(examples)]
        fileio.write_text_atomically(os.path.join(output_dir, f"test_results{suffix}.tsv"),
                                     result_files.format_probabilities(rows))
        if submission:
            ids = [e.example_id if e.example_id is not None else str(i) for i, e in enumerate(examples)]
            fileio.write_text_atomically(os.path.join(output_dir, f"{submission}.tsv"),
                                         format_submission(ids, rows, None if processor.is_regression else label_list,
                                                           getattr(processor, "submission_id_header", "index")))
        all_rows[suffix] = rows
    return all_rows


class ClassifierTask(Task):
    """run_classifier.py's task (a bert_tf.tasks.task.Task): a processor's train/dev/test sets -> BertClassifier.

    `task_name`: a key of PROCESSORS (cola, mnli, mrpc, xnli, sst-2, qqp, qnli, rte, sts-b, wnli, tsv).
    """
    def __init__(self, task_name, data_dir, xnli_language="zh"):
        self.processor = get_processor(task_name, xnli_language=xnli_language)
        self.data_dir = data_dir
        self.labels = None
        self.train_examples, self.dev_splits, self.test_splits = None, (), ()  # read_inputs reads them
        self.loss = loss_fn_for(self.processor)

    @property
    def spec(self):
        """The regression task's model for a regression processor (STS-B), else the classifier's."""
        return task_models.REGISTRY["regression" if self.processor.is_regression else "classifier"]

    @property
    def label_list(self):
        """The labels of the head (None for regression)."""
        return None if self.processor.is_regression else self.labels

    def read_inputs(self, run, config):
        """Reads each input file the run needs once: the training set (do_train), then the label list (tsv: learned
        from those examples, or the training run's), the dev sets (do_eval; a label the model cannot know is an
        error now, not after training) and the test sets (do_predict)."""
        if run.do_train:
            self.train_examples = self.processor.get_train_examples(self.data_dir)
        self.labels = prepare_label_list(self.processor, self.data_dir, run.output_dir, run.do_train,
                                         train_examples=self.train_examples)
        if run.do_eval:
            self.dev_splits = self.processor.dev_splits(self.data_dir)
            check_dev_labels(self.dev_splits, self.labels)
        if run.do_predict:
            self.test_splits = self.processor.test_splits(self.data_dir)

    def _common(self, run, tokenizer, trainer):
        return dict(trainer=trainer, processor=self.processor, tokenizer=tokenizer, label_list=self.labels,
                    output_dir=run.output_dir, max_seq_length=run.max_seq_length, fixed_batches=run.fixed_batches,
                    lengths=run.sequence_lengths)

    def train_data(self, run, tokenizer, trainer):
        """Saves the tsv task's label list (the chief), converts the training set to work_dir/train.tf_record (a
        TrainData)."""
        if trainer.is_chief and isinstance(self.processor, TsvProcessor):
            label_lists.write(os.path.join(run.output_dir, LABEL_LIST_FILE), self.labels)
        examples = self.train_examples
        train_file = os.path.join(trainer.work_dir, "train.tf_record")
        _, written = file_based_convert_examples_to_features(examples, self.labels, run.max_seq_length, tokenizer,
                                                             train_file)
        dataset_fn = file_based_input_fn_builder(train_file, run.max_seq_length, is_training=True,
                                                 drop_remainder=True, regression=self.processor.is_regression,
                                                 lengths=run.sequence_lengths)
        return TrainData(dataset_fn, len(examples), (train_file,), written.fingerprint)

    def prepare_evaluation(self, run, trainer):
        """Traces the evaluation's forward pass (see `Trainer.train`'s `meanwhile`), before the dev set exists:
        on the batches of an empty dev set, which have the spec of any other."""
        spec = lengths_lib.batch_spec(_prediction_inputs([], run.max_seq_length, self.labels, with_labels=True),
                                      run.eval_batch_size, run.sequence_lengths, packing.INPUT_NAMES, run.fixed_batches)
        trainer.prepare_predict(spec, with_loss=True)

    def evaluate(self, run, tokenizer, trainer):
        """eval_results.txt of every dev set; -> {suffix: results}."""
        return evaluate(**self._common(run, tokenizer, trainer), dev_splits=self.dev_splits,
                        eval_batch_size=run.eval_batch_size, global_step=trainer.step)

    def predict(self, run, tokenizer, trainer):
        """test_results.tsv and the submission file of every test set."""
        return predict(**self._common(run, tokenizer, trainer), test_splits=self.test_splits,
                       predict_batch_size=run.predict_batch_size)
