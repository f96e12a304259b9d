"""Fine-tune BERT on SQuAD 1.1 / 2.0 and predict answers: the original run_squad.py, same flags and outputs.

Example (SQuAD 1.1, as in the original README):
  python run_scripts/run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

SQuAD 2.0: add --version_2_with_negative=True (and tune --null_score_diff_threshold with the best_f1_thresh
that the evaluation reports).

Outputs in output_dir: checkpoints (ckpt-<step>), train.tf_record, eval.tf_record, predictions.json,
nbest_predictions.json, null_odds.json (v2) and, when predict_file has answers, eval_results.json (the official
SQuAD evaluation: exact_match/f1 for v1.1; exact, f1, HasAns_*, NoAns_*, best_* for v2.0).
"""
import json
import os

import keras
import tensorflow as tf
from absl import app, flags, logging

from bert_tf import checkpoints, tokenization
from bert_tf import flags as bert_flags
from bert_tf.config import BertConfig
from bert_tf.heads import BertSpanLabeler
from bert_tf.tasks import job, squad
from bert_tf.training.trainer import Trainer

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question; longer questions are "
                     "truncated to this length.")
flags.DEFINE_integer("n_best_size", 20, "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be generated (start and "
                     "end predictions are not conditioned on one another).")
flags.DEFINE_bool("verbose_logging", False, "Print all warnings of the data processing (a number of them are "
                  "expected for a normal SQuAD evaluation).")
flags.DEFINE_bool("version_2_with_negative", False, "The SQuAD examples include questions without an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict null if null_score - best_non_null is greater "
                   "than the threshold.")
flags.DEFINE_integer("seed", None, "Seed for Python, NumPy and TensorFlow (head initialization, dropout, "
                     "shuffling); unset: not seeded, as the original.")
bert_flags.define_model_flags()
bert_flags.define_run_flags()
FLAGS.set_default("max_seq_length", 384)


def validate_flags_or_throw(config):
    """The original's checks, before any work is done."""
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    if not FLAGS.do_train and not FLAGS.do_predict:
        raise ValueError("At least one of `do_train` or `do_predict` must be True.")
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("If `do_train` is True, then `train_file` must be specified.")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("If `do_predict` is True, then `predict_file` must be specified.")
    for name in ("train_file", "predict_file"):
        path = getattr(FLAGS, name)
        if getattr(FLAGS, "do_train" if name == "train_file" else "do_predict") and not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"--{name} not found: {path}")
    squad.validate_lengths(FLAGS.max_seq_length, FLAGS.max_query_length, FLAGS.doc_stride,
                           config.max_position_embeddings)
    if FLAGS.n_best_size < 1 or FLAGS.max_answer_length < 1:
        raise ValueError("n_best_size and max_answer_length must be at least 1.")


def main(_):
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    validate_flags_or_throw(config)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    tokenizer = tokenization.FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    checkpoints.check_vocab_size(config, tokenizer.vocab, FLAGS.vocab_file)
    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)

    if FLAGS.do_predict:  # read and checked before any model work
        dataset, eval_examples = squad.read_predict_file(FLAGS.predict_file, FLAGS.version_2_with_negative)
    trainer = Trainer.from_flags(FLAGS, lambda: BertSpanLabeler(config), squad.span_loss)
    windows = dict(max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride,
                   max_query_length=FLAGS.max_query_length)

    if FLAGS.do_train:
        train_examples = squad.read_squad_examples(FLAGS.train_file, is_training=True,
                                                   version_2_with_negative=FLAGS.version_2_with_negative)
        squad.train(trainer, train_examples, tokenizer, FLAGS.output_dir, **windows,
                    train_batch_size=FLAGS.train_batch_size, num_train_epochs=FLAGS.num_train_epochs,
                    warmup_proportion=FLAGS.warmup_proportion, shuffle_seed=FLAGS.seed)
    elif FLAGS.do_predict:
        # Fails early if the checkpoint has no trained span head.
        trainer.restore_for_predict(required_heads=("span",))

    if FLAGS.do_predict:
        predictions, _, null_odds = squad.predict(
            trainer.predict, eval_examples, tokenizer, FLAGS.output_dir, **windows,
            predict_batch_size=FLAGS.predict_batch_size, n_best_size=FLAGS.n_best_size,
            max_answer_length=FLAGS.max_answer_length, do_lower_case=FLAGS.do_lower_case,
            version_2_with_negative=FLAGS.version_2_with_negative,
            null_score_diff_threshold=FLAGS.null_score_diff_threshold, verbose_logging=FLAGS.verbose_logging)
        if squad.has_answers(dataset):
            results = squad.evaluate_predictions(dataset, predictions, null_odds, FLAGS.version_2_with_negative)
            results_file = os.path.join(FLAGS.output_dir, "eval_results.json")
            squad.write_json(results, results_file)
            logging.info("***** Eval results (official SQuAD %s evaluation) *****",
                         "v2.0" if FLAGS.version_2_with_negative else "v1.1")
            for key, value in results.items():
                logging.info("  %s = %s", key, value)
            print(json.dumps(results))
    job.export_if_requested(FLAGS, trainer, "squad")
    logging.info("Done; outputs in %s", FLAGS.output_dir)


if __name__ == "__main__":
    flags.mark_flags_as_required(["vocab_file", "bert_config_file", "output_dir"])
    app.run(main)
