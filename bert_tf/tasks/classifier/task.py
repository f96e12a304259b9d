"""run_classifier.py's job: evaluation (eval_results.txt), prediction (test_results.tsv as the original
prints float32, and the GLUE submission files) and `ClassifierTask`, which `bert_tf.tasks.runner` runs.
"""
import os

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.model import task_models
from bert_tf.tasks import result_files
from bert_tf.tasks.classifier.features import (
    check_dev_labels,
    file_based_convert_examples_to_features,
    file_based_input_fn_builder,
    prediction_batches,
)
from bert_tf.tasks.classifier.metrics import GLUE_METRICS, eval_metrics, loss_fn_for, task_key
from bert_tf.tasks.classifier.processors import get_processor, pad_examples, prepare_label_list
from bert_tf.tasks.task import Task, TrainData


def format_submission(ids, predictions, label_list, id_header="index"):
    """A GLUE submission file: header `index<TAB>prediction`, then each test example's id and predicted label
    (or score for regression)."""
    lines = [f"{id_header}\tprediction\n"]
    for example_id, prediction in zip(ids, predictions):
        if label_list is None:
            value = str(np.float32(prediction))
        else:
            value = label_list[int(np.argmax(prediction))]
        lines.append(f"{example_id}\t{value}\n")
    return "".join(lines)


def evaluate(trainer, processor, tokenizer, label_list, data_dir, output_dir, max_seq_length, eval_batch_size,
             global_step, fixed_batches=False, lengths=None):
    """Evaluates on every dev set; writes `eval_results.txt` (`eval_results_mm.txt` for MNLI mismatched).

    `fixed_batches` pads the set with PaddingInputExample to whole batches (TPU), which the metrics ignore.
    `lengths` (bert_tf.data.lengths.SequenceLengths): the model runs on length-sorted batches cut to their longest
    text; the metrics see the outputs in the input order's batches. Returns {suffix: result dict}.
    """
    regression = processor.is_regression
    metric_names = GLUE_METRICS.get(task_key(processor), ())
    results = {}
    for suffix, examples in processor.dev_splits(data_dir):
        num_actual = len(examples)
        if fixed_batches:
            examples = pad_examples(examples, eval_batch_size)
        eval_file = os.path.join(output_dir, f"eval{suffix}.tf_record")
        features = file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                                           eval_file)
        logging.info("***** Running evaluation%s *****", suffix)
        logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual,
                     len(examples) - num_actual)
        logging.info("  Batch size = %d", eval_batch_size)
        batches = prediction_batches(features, max_seq_length, eval_batch_size, lengths, fixed_batches, regression,
                                     label_list=label_list)
        result = eval_metrics(batches.in_input_order(trainer.predict(batches.dataset, with_loss=True)), features,
                              global_step, regression, metric_names)
        result_files.write_eval_results(os.path.join(output_dir, f"eval_results{suffix}.txt"), result,
                                        f"Eval results{suffix}")
        results[suffix] = result
    return results


def predict(trainer, processor, tokenizer, label_list, data_dir, output_dir, max_seq_length, predict_batch_size,
            fixed_batches=False, lengths=None):
    """Predicts every test set; writes `test_results.tsv` (class probabilities, or the score for regression,
    per real example) and the submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...; `predictions.tsv` for tsv).
    MNLI mismatched goes to `test_results_mm.tsv` and `MNLI-mm.tsv`. `lengths`: as for `evaluate`.
    Returns {suffix: [rows]}."""
    regression = processor.is_regression
    output_key = "predictions" if regression else "probabilities"
    all_rows = {}
    for suffix, examples, submission in processor.test_splits(data_dir):
        num_actual = len(examples)
        real_examples = list(examples)
        if fixed_batches:
            examples = pad_examples(examples, predict_batch_size)
        predict_file = os.path.join(output_dir, f"predict{suffix}.tf_record")
        features = file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                                           predict_file)
        logging.info("***** Running prediction%s *****", suffix)
        logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual,
                     len(examples) - num_actual)
        logging.info("  Batch size = %d", predict_batch_size)
        rows = []
        if examples:
            batches = prediction_batches(features, max_seq_length, predict_batch_size, lengths, fixed_batches,
                                         regression, with_labels=False, label_list=label_list)
            for batch in batches.in_input_order(trainer.predict(batches.dataset)):
                rows.extend(np.asarray(batch[output_key], np.float32))
        rows = rows[:num_actual]
        if len(rows) != num_actual:
            raise ValueError(f"Got {len(rows)} predictions for {num_actual} examples.")
        fileio.write_text_atomically(os.path.join(output_dir, f"test_results{suffix}.tsv"),
                                     result_files.format_probabilities(rows))
        if submission:
            ids = [e.example_id if e.example_id is not None else str(i) for i, e in enumerate(real_examples)]
            fileio.write_text_atomically(os.path.join(output_dir, f"{submission}.tsv"),
                              format_submission(ids, rows, None if regression else label_list,
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
        """Resolves the label list (tsv: learned from train.tsv, or the training run's); checks the dev labels."""
        self.labels = prepare_label_list(self.processor, self.data_dir, run.output_dir, run.do_train,
                                         save=run.is_chief)
        if run.do_eval:  # a dev label the model cannot know: an error now, not after training
            check_dev_labels(self.processor, self.data_dir, self.labels)

    def _common(self, run, tokenizer, trainer):
        return dict(trainer=trainer, processor=self.processor, tokenizer=tokenizer, label_list=self.labels,
                    data_dir=self.data_dir, output_dir=run.output_dir, max_seq_length=run.max_seq_length)

    def train_data(self, run, tokenizer):
        """Converts the training set to work_dir/train.tf_record (a TrainData)."""
        examples = self.processor.get_train_examples(self.data_dir)
        train_file = os.path.join(run.work_dir, "train.tf_record")
        file_based_convert_examples_to_features(examples, self.labels, run.max_seq_length, tokenizer, train_file)
        dataset_fn = file_based_input_fn_builder(train_file, run.max_seq_length, is_training=True,
                                                 drop_remainder=True, regression=self.processor.is_regression,
                                                 lengths=run.sequence_lengths)
        return TrainData(dataset_fn, len(examples), (train_file,))

    def prepare_evaluation(self, run, trainer):
        """Traces the evaluation's forward pass (see `Trainer.train`'s `meanwhile`), before the dev set exists:
        on the batches of an empty dev set, which have the spec of any other."""
        spec = prediction_batches([], run.max_seq_length, run.eval_batch_size, run.sequence_lengths,
                                  run.fixed_batches, self.processor.is_regression,
                                  label_list=self.labels).dataset.element_spec
        trainer.prepare_predict(spec, with_loss=True)

    def evaluate(self, run, tokenizer, trainer):
        """eval_results.txt of every dev set; -> {suffix: results}."""
        return evaluate(**self._common(run, tokenizer, trainer), eval_batch_size=run.eval_batch_size,
                        global_step=trainer.step, fixed_batches=run.fixed_batches, lengths=run.sequence_lengths)

    def predict(self, run, tokenizer, trainer):
        """test_results.tsv and the submission file of every test set."""
        return predict(**self._common(run, tokenizer, trainer), predict_batch_size=run.predict_batch_size,
                       fixed_batches=run.fixed_batches, lengths=run.sequence_lengths)
