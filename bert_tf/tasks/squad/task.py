"""run_squad.py's job: `predict` (features, model, the post-processed JSON files) and `SquadTask`, which
`bert_tf.tasks.runner` runs.
"""
import functools
import os
import random

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.data import lengths
from bert_tf.model import task_models
from bert_tf.tasks.squad import evaluate as squad_evaluate
from bert_tf.tasks.squad.examples import has_answers, read_predict_file, read_squad_examples
from bert_tf.tasks.squad.features import (
    EVAL_RECORD_FILE,
    TRAIN_RECORD_FILE,
    make_dataset,
    span_loss,
    validate_lengths,
    write_eval_features,
    write_train_features,
)
from bert_tf.tasks.squad.postprocess import (
    NBEST_FILE,
    NULL_ODDS_FILE,
    PREDICTIONS_FILE,
    raw_results,
    write_json,
    write_predictions,
)
from bert_tf.tasks.task import Task, TrainData
from bert_tf.text import packing


def predict(predict_batches, examples, tokenizer, output_dir, max_seq_length, doc_stride, max_query_length,
            predict_batch_size, n_best_size, max_answer_length, do_lower_case, version_2_with_negative=False,
            null_score_diff_threshold=0.0, verbose_logging=False, fixed_batches=False, compiled=False):
    """The original's prediction run: eval.tf_record, the model over its features in input order (`predict_batches`),
    then predictions.json, nbest_predictions.json and (v2) null_odds.json; -> (predictions, nbest, null_odds)."""
    eval_file = os.path.join(output_dir, EVAL_RECORD_FILE)
    features = write_eval_features(examples, tokenizer, eval_file, max_seq_length, doc_stride, max_query_length)
    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(examples))
    logging.info("  Num split examples = %d", len(features))
    logging.info("  Batch size = %d", predict_batch_size)
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32).reshape(len(features), max_seq_length)
              for name in packing.INPUT_NAMES}
    batches = lengths.LengthSorted(inputs, predict_batch_size, lengths.SequenceLengths(pad=True, compiled=compiled),
                                   packing.INPUT_NAMES, fixed_batches)  # the input order: nothing is sorted
    results = raw_results(features, batches.in_input_order(predict_batches(batches.dataset)))
    return write_predictions(
        examples, features, results, n_best_size, max_answer_length, do_lower_case,
        os.path.join(output_dir, PREDICTIONS_FILE), os.path.join(output_dir, NBEST_FILE),
        os.path.join(output_dir, NULL_ODDS_FILE), version_2_with_negative, null_score_diff_threshold,
        verbose_logging)


class SquadTask(Task):
    """run_squad.py's task: SQuAD json files -> BertSpanLabeler. No do_eval: a predict_file with answers is evaluated by
    the official metrics into output_dir/eval_results.json (as is --eval_every_steps)."""
    spec = task_models.REGISTRY["squad"]
    # What predictions from raw text take of the run (bert_tf.tasks.answers), recorded in its output_dir.
    ANSWER_SETTINGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "version_2_with_negative",
                       "null_score_diff_threshold")
    modes = ("do_train", "do_predict")
    evaluated_by = "do_predict"
    loss = staticmethod(span_loss)

    def __init__(self, train_file=None, predict_file=None, doc_stride=128, max_query_length=64, n_best_size=20,
                 max_answer_length=30, version_2_with_negative=False, null_score_diff_threshold=0.0,
                 verbose_logging=False):
        self.train_file, self.predict_file = train_file, predict_file
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        self.verbose_logging = verbose_logging
        self.train_examples = self.predict_examples = self.predict_dataset = None

    def check_flags(self, run):
        """The original's input file checks, in its order. --group_by_length is refused: the span loss and n-best lists
        take every position, padding included."""
        if run.group_by_length:
            raise ValueError("--group_by_length does not apply to run_squad.py: its batches keep max_seq_length "
                             "(the original's span loss and n-best lists take every position, padding included).")
        for mode, name in (("do_train", "train_file"), ("do_predict", "predict_file")):
            path = getattr(self, name)
            if getattr(run, mode) and not path:
                raise ValueError(f"If `{mode}` is True, then `{name}` must be specified.")
            if getattr(run, mode) and not fileio.exists(path):
                raise FileNotFoundError(f"--{name} not found: {path}")

    def read_inputs(self, run, config):
        """Checks the window lengths, then reads the input files, before any model work."""
        validate_lengths(run.max_seq_length, self.max_query_length, self.doc_stride, config.max_position_embeddings)
        if self.n_best_size < 1 or self.max_answer_length < 1:
            raise ValueError("n_best_size and max_answer_length must be at least 1.")
        if run.do_predict:
            self.predict_dataset, self.predict_examples = read_predict_file(self.predict_file,
                                                                            self.version_2_with_negative)
            if run.eval_every_steps and not has_answers(self.predict_dataset):
                raise ValueError(f"--eval_every_steps evaluates the predictions of --predict_file="
                                 f"{self.predict_file} with the official SQuAD evaluation: its questions need "
                                 f"answers.")
        if run.do_train:
            self.train_examples = read_squad_examples(self.train_file, is_training=True,
                                                      version_2_with_negative=self.version_2_with_negative)

    @property
    def answer_settings(self):
        return {name: getattr(self, name) for name in self.ANSWER_SETTINGS}

    def _windows(self, run):
        return dict(max_seq_length=run.max_seq_length, doc_stride=self.doc_stride,
                    max_query_length=self.max_query_length)

    def train_data(self, run, tokenizer, trainer):
        """The original's training data: examples pre-shuffled (random.Random(12345)), their features in
        work_dir/train.tf_record."""
        examples = list(self.train_examples)
        random.Random(12345).shuffle(examples)
        train_file = os.path.join(trainer.work_dir, TRAIN_RECORD_FILE)
        written = write_train_features(examples, tokenizer, train_file, **self._windows(run))
        logging.info("Training on %d examples split into %d features", len(examples), written.count)
        dataset_fn = functools.partial(make_dataset, train_file, run.max_seq_length, True)
        return TrainData(dataset_fn, len(examples), (train_file,), written.fingerprint)

    def predict(self, run, tokenizer, trainer):
        """predictions.json, nbest_predictions.json, null_odds.json (v2) and, for a predict file with answers,
        eval_results.json; -> that evaluation's results or None."""
        predictions, _, null_odds = predict(
            trainer.predict, self.predict_examples, tokenizer, run.output_dir, **self._windows(run),
            predict_batch_size=run.predict_batch_size, n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length, do_lower_case=run.do_lower_case,
            version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.null_score_diff_threshold, verbose_logging=self.verbose_logging,
            fixed_batches=run.fixed_batches, compiled=run.sequence_lengths.compiled)
        if has_answers(self.predict_dataset):
            data = self.predict_dataset["data"]
            results = (squad_evaluate.evaluate_v2(data, predictions, null_odds) if self.version_2_with_negative
                       else squad_evaluate.evaluate_v1(data, predictions))
            write_json(results, os.path.join(run.output_dir, "eval_results.json"))
            logging.info("***** Eval results (official SQuAD %s evaluation) *****",
                         "v2.0" if self.version_2_with_negative else "v1.1")
            for key, value in results.items():
                logging.info("  %s = %s", key, value)
            return results
        return None
