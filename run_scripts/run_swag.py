"""BERT fine-tuning on SWAG, multiple choice over four endings (flags in the style of run_classifier.py).

data_dir holds the official SWAG train.csv, val.csv and test.csv. Writes to output_dir: checkpoints,
eval_results.txt (eval_accuracy, eval_loss, global_step) and test_results.tsv (each test example's four
probabilities, tab-separated). Defaults follow the paper's SWAG setup.

Example:
  python run_scripts/run_swag.py --data_dir=$SWAG_DIR --output_dir=/tmp/swag \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_train --do_eval --do_predict --max_seq_length=128
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import runner, swag

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory with the SWAG train.csv, val.csv and test.csv.")
bert_flags.define_model_flags()
bert_flags.define_run_flags()
FLAGS.set_default("learning_rate", 2e-5)
FLAGS.set_default("train_batch_size", 16)


def main(_):
    runner.run(swag.SwagTask(data_dir=FLAGS.data_dir), bert_flags.run_config(FLAGS))


if __name__ == "__main__":
    bert_flags.run(main, required=["data_dir", "output_dir"])
