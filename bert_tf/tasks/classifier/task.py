"""run_classifier.py's job: evaluation (eval_results.txt), prediction (test_results.tsv as the original prints float32,
and the GLUE submission files) and `ClassifierTask`, which `bert_tf.tasks.runner` runs.

Evaluation and prediction take one path (`run_model`): the examples go to the original's record file
(eval.tf_record, predict.tf_record: a user's tooling may read them), and the model runs on their features, held in
memory, in the one prediction loop (`bert_tf.training.prediction.predict_in_order`).
"""
import functools
import os

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.model import task_models
from bert_tf.tasks import result_files
from bert_tf.tasks.classifier.features import (
    MODEL_INPUTS,
    check_dev_labels,
    features_to_arrays,
    file_based_convert_examples_to_features,
    file_based_input_fn_builder,
)
from bert_tf.tasks.classifier.metrics import GLUE_METRICS, eval_metrics, task_key
from bert_tf.tasks.classifier.processors import get_processor, pad_examples, prepare_label_list
from bert_tf.tasks.task import Task, TrainData
from bert_tf.training import losses, prediction


def loss_fn_for(processor):
    """The per-example loss of `processor`'s task: `losses.regression_loss` for regression (STS-B), else
    `losses.classification_loss`."""
    return losses.regression_loss if processor.is_regression else losses.classification_loss


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
    """Evaluation's and prediction's one path: writes `examples` (filled up with PaddingInputExample to whole
    batches where `fixed_batches`, TPU) to `record_file` as the original's records, and runs the model on their
    features in batches sorted by length and cut as `lengths` (bert_tf.data.lengths.SequenceLengths) says
    (`prediction.predict_in_order`). Returns (the features, the outputs of the input order's batches: logits and
    probabilities [len(label_list)] float32, or for regression logits [1] and predictions; with `with_labels`,
    per_example_loss)."""
    num_actual = len(examples)
    if fixed_batches:
        examples = pad_examples(examples, batch_size)
    features, _ = file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                                          record_file)
    logging.info("  Num examples = %d (%d actual, %d padding)", len(examples), num_actual, len(examples) - num_actual)
    logging.info("  Batch size = %d", batch_size)
    size = lengths_lib.OutputBytes(fixed=4 * (2 * (1 if label_list is None else len(label_list)) + 1))
    outputs = prediction.predict_in_order(
        functools.partial(trainer.predict, with_loss=with_labels),
        _prediction_inputs(features, max_seq_length, label_list, with_labels), batch_size, lengths, MODEL_INPUTS,
        fixed_batches, output_bytes=size)
    return features, outputs


def evaluate(trainer, processor, dev_splits, tokenizer, label_list, output_dir, max_seq_length, eval_batch_size,
             global_step, fixed_batches=False, lengths=None):
    """Evaluates on every dev set (`dev_splits`: [(suffix, examples)], the processor's `dev_splits`); writes
    `eval_results.txt` (`eval_results_mm.txt` for MNLI mismatched) and the original's `eval.tf_record`.

    `fixed_batches` pads the set with PaddingInputExample to whole batches (TPU), which the metrics ignore.
    `lengths` (bert_tf.data.lengths.SequenceLengths): the model runs on length-sorted batches cut to their longest
    text; the metrics see the outputs in the input order's batches. Returns {suffix: result dict}.
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
    """Predicts every test set (`test_splits`: [(suffix, examples, submission name)], the processor's
    `test_splits`); writes `test_results.tsv` (class probabilities, or the score for regression, per real example),
    the submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...; `predictions.tsv` for tsv) and the original's
    `predict.tf_record`. MNLI mismatched goes to `test_results_mm.tsv` and `MNLI-mm.tsv`. `lengths`: as for
    `evaluate`. Returns {suffix: [rows]}."""
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
                                         save=run.is_chief, train_examples=self.train_examples)
        if run.do_eval:
            self.dev_splits = self.processor.dev_splits(self.data_dir)
            check_dev_labels(self.dev_splits, self.labels)
        if run.do_predict:
            self.test_splits = self.processor.test_splits(self.data_dir)

    def _common(self, run, tokenizer, trainer):
        return dict(trainer=trainer, processor=self.processor, tokenizer=tokenizer, label_list=self.labels,
                    output_dir=run.output_dir, max_seq_length=run.max_seq_length, fixed_batches=run.fixed_batches,
                    lengths=run.sequence_lengths)

    def train_data(self, run, tokenizer):
        """Converts the training set to work_dir/train.tf_record (a TrainData)."""
        examples = self.train_examples
        train_file = os.path.join(run.work_dir, "train.tf_record")
        _, written = file_based_convert_examples_to_features(examples, self.labels, run.max_seq_length, tokenizer,
                                                             train_file)
        dataset_fn = file_based_input_fn_builder(train_file, run.max_seq_length, is_training=True,
                                                 drop_remainder=True, regression=self.processor.is_regression,
                                                 lengths=run.sequence_lengths)
        return TrainData(dataset_fn, len(examples), (train_file,), written.fingerprint)

    def prepare_evaluation(self, run, trainer):
        """Traces the evaluation's forward pass (see `Trainer.train`'s `meanwhile`), before the dev set exists:
        on the batches of an empty dev set, which have the spec of any other."""
        spec = prediction.batch_spec(_prediction_inputs([], run.max_seq_length, self.labels, with_labels=True),
                                     run.eval_batch_size, run.sequence_lengths, MODEL_INPUTS, run.fixed_batches)
        trainer.prepare_predict(spec, with_loss=True)

    def evaluate(self, run, tokenizer, trainer):
        """eval_results.txt of every dev set; -> {suffix: results}."""
        return evaluate(**self._common(run, tokenizer, trainer), dev_splits=self.dev_splits,
                        eval_batch_size=run.eval_batch_size, global_step=trainer.step)

    def predict(self, run, tokenizer, trainer):
        """test_results.tsv and the submission file of every test set."""
        return predict(**self._common(run, tokenizer, trainer), test_splits=self.test_splits,
                       predict_batch_size=run.predict_batch_size)
