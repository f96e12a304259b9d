"""Fine-tune BERT on SQuAD 1.1 / 2.0 and predict answers: the original run_squad.py, same flags and outputs.

Example (SQuAD 1.1, as in the original README):
  python run_scripts/run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

SQuAD 2.0: add --version_2_with_negative=True (and tune --null_score_diff_threshold with the evaluation's
best_f1_thresh).

Outputs in output_dir: checkpoints (ckpt-<step>), train.tf_record, eval.tf_record, predictions.json,
nbest_predictions.json, null_odds.json (v2) and, when predict_file has answers, eval_results.json (the official
SQuAD evaluation).
"""
import json

from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import runner, squad

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.", lower_bound=1)
flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question; longer questions are "
                     "truncated to this length.", lower_bound=1)
flags.DEFINE_integer("n_best_size", 20, "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.", lower_bound=1)
flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be generated (start and "
                     "end predictions are not conditioned on one another).", lower_bound=1)
flags.DEFINE_bool("verbose_logging", False, "Print all warnings of the data processing (a number of them are "
                  "expected for a normal SQuAD evaluation).")
flags.DEFINE_bool("version_2_with_negative", False, "The SQuAD examples include questions without an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict null if null_score - best_non_null is greater "
                   "than the threshold.")
bert_flags.define_model_flags()
bert_flags.define_run_flags()
FLAGS.set_default("max_seq_length", 384)


def main(_):
    task = squad.SquadTask(
        train_file=FLAGS.train_file, predict_file=FLAGS.predict_file, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, version_2_with_negative=FLAGS.version_2_with_negative,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold, verbose_logging=FLAGS.verbose_logging)
    _, evaluation = runner.run(task, bert_flags.run_config(FLAGS))
    if evaluation is not None:
        print(json.dumps(evaluation))  # the official evaluation, as its script prints it


if __name__ == "__main__":
    bert_flags.run(main, required=["output_dir"])
