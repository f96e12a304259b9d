"""run_pretraining.py: masked-LM + next-sentence pretraining, from scratch or from a checkpoint, with the original's
model (`BertPretrainer`: `cls/predictions`, `cls/seq_relationship`) and numbers.

Masked-LM loss `sum(w * nll) / (sum(w) + 1e-5)` (w = masked_lm_weights), next-sentence loss the batch mean, loss their
sum, as batch-level ratios (`PretrainingLoss`), so they are the whole batch's under every strategy and accumulation.
Eval: the original's streaming metrics over max_eval_steps batches (masked_lm_accuracy, masked_lm_loss,
next_sentence_accuracy, next_sentence_loss, loss, global_step). `next_sentence=False`: the paper's "No NSP" ablation,
masked-LM loss alone.
"""
import os

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.data import records
from bert_tf.data.pretraining import dataset
from bert_tf.data.pretraining.dynamic_masking import DynamicMasking
from bert_tf.model import task_models
from bert_tf.tasks import result_files, run_record
from bert_tf.tasks.task import Task, TrainData
from bert_tf.text import tokenization
from bert_tf.training import losses


def log_likelihoods(logits, labels):
    """log p(label) under softmax(logits): [..., K], [...] int -> [...] float32. One fused op: its gradient is softmax -
    one_hot, where a gather's would scatter into all B*P*V log-probabilities."""
    return -tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32), tf.cast(logits, tf.float32))


def correct(logits, labels):
    """1.0 where argmax(logits) == label, else 0.0: [..., K], [...] -> [...] float32."""
    return tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), tf.cast(labels, tf.int32)), tf.float32)


class PretrainingLoss:
    """The original pretraining loss and metrics as Trainer terms (bert_tf.training.losses)."""

    def __init__(self, next_sentence=True):
        self.next_sentence = next_sentence
        self.terms = {"masked_lm_loss": losses.Term(epsilon=1e-5),
                      "masked_lm_accuracy": losses.Term(in_loss=False)}
        if next_sentence:
            self.terms.update(next_sentence_loss=losses.Term(), next_sentence_accuracy=losses.Term(in_loss=False))

    def weights(self, labels):
        w = tf.cast(labels["masked_lm_weights"], tf.float32)
        weights = {"masked_lm_loss": w, "masked_lm_accuracy": w}
        if self.next_sentence:
            ones = tf.ones(tf.shape(labels["next_sentence_labels"])[:1], tf.float32)
            weights.update(next_sentence_loss=ones, next_sentence_accuracy=ones)
        return weights

    def values(self, labels, outputs):
        w = tf.cast(labels["masked_lm_weights"], tf.float32)
        logits, ids = outputs["masked_lm_logits"], labels["masked_lm_ids"]
        values = {"masked_lm_loss": -w * log_likelihoods(logits, ids), "masked_lm_accuracy": w * correct(logits, ids)}
        if self.next_sentence:
            logits, nsp = outputs["next_sentence_logits"], labels["next_sentence_labels"][:, 0]
            values.update(next_sentence_loss=-log_likelihoods(logits, nsp),
                          next_sentence_accuracy=correct(logits, nsp))
        return values


class PretrainingTask(Task):
    """run_pretraining.py's task: pretraining records -> BertPretrainer."""
    modes = ("do_train", "do_eval")
    needs_vocab = False  # reads token ids

    def __init__(self, input_file, max_predictions_per_seq=20, num_train_steps=100000, num_warmup_steps=10000,
                 max_eval_steps=100, eval_input_file=None, next_sentence=True, dynamic_masking=False,
                 masked_lm_prob=0.15, do_whole_word_mask=False):
        self.input_file = input_file
        self.eval_input_file = eval_input_file or input_file
        self.max_predictions_per_seq = max_predictions_per_seq
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.max_eval_steps = max_eval_steps
        self.next_sentence = next_sentence
        self.dynamic_masking = dynamic_masking
        self.masked_lm_prob = masked_lm_prob
        self.do_whole_word_mask = do_whole_word_mask
        self.loss = PretrainingLoss(next_sentence)
        self.train_files = self.eval_files = None
        self.compression = {}

    @property
    def spec(self):
        """The pretraining model, without its next-sentence head (masked_lm) unless `next_sentence`."""
        return task_models.REGISTRY["pretraining" if self.next_sentence else "masked_lm"]

    def check_flags(self, run):
        """Checks the flags alone, before the model files are read."""
        if not 0 < self.max_predictions_per_seq <= run.max_seq_length:
            raise ValueError(f"max_predictions_per_seq must be in 1..max_seq_length ({run.max_seq_length}), got "
                             f"{self.max_predictions_per_seq}.")
        if run.do_train and self.num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {self.num_train_steps}.")
        if not 0 <= self.num_warmup_steps <= max(self.num_train_steps, 0):
            raise ValueError(f"num_warmup_steps must be in 0..num_train_steps, got {self.num_warmup_steps}.")
        if run.do_eval and self.max_eval_steps <= 0:
            raise ValueError(f"max_eval_steps must be positive, got {self.max_eval_steps}.")
        if run.export_dir and not run.vocab_file:
            raise ValueError("--export_dir needs --vocab_file: the SavedModel carries the model's vocabulary.")
        if self.dynamic_masking and not run.vocab_file:
            raise ValueError("--dynamic_masking needs --vocab_file (the vocabulary the data was made with): it masks "
                             "wordpieces with [MASK] and random vocabulary entries.")

    def read_inputs(self, run, config):
        """Finds the input files and checks their first records against the flags and the config."""
        def files(patterns, mode):
            found = fileio.expand_patterns(patterns)
            compression = dataset.check_input_files(found, run.max_seq_length, self.max_predictions_per_seq,
                                                    config.vocab_size)
            logging.info("*** %s input files: %d%s ***", mode, len(found), " (GZIP)" if compression else "")
            return found, compression

        if run.do_train:
            self.train_files, self.compression["train"] = files(self.input_file, "Training")
        if run.do_eval:
            self.eval_files, self.compression["eval"] = files(self.eval_input_file, "Evaluation")

    def train_steps(self, run, num_examples):
        return self.num_train_steps, self.num_warmup_steps

    def train_data(self, run, tokenizer, trainer):
        """A TrainData over the training files (bert_tf.data.pretraining.dataset): examples not counted (the flags give
        the steps), fingerprinted over all the files, the same on every worker."""
        masking = None
        if self.dynamic_masking:
            masking = DynamicMasking(tokenization.load_vocab(run.vocab_file), self.max_predictions_per_seq,
                                     self.masked_lm_prob, self.do_whole_word_mask)

        def dataset_fn(batch_size, input_context=None, seed=None):
            return dataset.training_dataset(self.train_files, batch_size, run.max_seq_length,
                                            self.max_predictions_per_seq, self.compression["train"], seed,
                                            input_context, masking, run.sequence_lengths)

        settings = {"max_predictions_per_seq": self.max_predictions_per_seq, "next_sentence": self.next_sentence,
                    "dynamic_masking": self.dynamic_masking}
        share = dataset.worker_files(self.train_files, trainer.worker_index, trainer.num_workers)  # this worker's
        return TrainData(dataset_fn, None, tuple(share), run_record.fingerprint(self.train_files), settings)

    def evaluate(self, run, tokenizer, trainer):
        """The original's eval over max_eval_steps batches in file order -> output_dir/eval_results.txt; -> the
        results."""
        data = dataset.evaluation_dataset(self.eval_files, run.eval_batch_size, run.max_seq_length,
                                          self.max_predictions_per_seq, self.compression["eval"],
                                          self.max_eval_steps, run.sequence_lengths)
        with records.naming_corrupt_records(self.eval_files):
            results, batches = trainer.evaluate(data)
        if batches < self.max_eval_steps:
            logging.warning("max_eval_steps=%d but the eval data holds %d full batch(es) of %d: evaluated those.",
                            self.max_eval_steps, batches, run.eval_batch_size)
        results["global_step"] = trainer.step
        result_files.write_eval_results(os.path.join(run.output_dir, "eval_results.txt"), results)
        return results
