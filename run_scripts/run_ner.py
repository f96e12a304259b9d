"""BERT fine-tuning for named-entity recognition on CoNLL-2003 (flags in the style of run_classifier.py).

data_dir holds train.txt, valid.txt (or dev.txt) and test.txt (`token POS chunk NER` per line). Writes to
output_dir: model_metadata.json (what it trains: labels, casing, ...), checkpoints, eval_results.txt (seqeval's
entity-level precision/recall/F1), eval_report.txt (seqeval's table), eval_metrics.json (per type, macro and weighted
F1, confusion matrix), eval_predictions.txt and test_results.txt (`token gold predicted` per line, a blank line
between sentences).

Example:
  python run_scripts/run_ner.py --data_dir=$CONLL_DIR --output_dir=/tmp/ner \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=False \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
    --num_train_epochs=3
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import ner, runner

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory with train.txt, valid.txt (or dev.txt) and test.txt in the "
                    "CoNLL-2003 format.")
flags.DEFINE_string("label_list", None, "Comma-separated labels in the order of the model's outputs (default: "
                    "those the training run recorded in output_dir, else the sorted labels of train.txt).")
bert_flags.define_class_weights_and_predict_text_flags()
bert_flags.define_model_flags()
bert_flags.define_run_flags()


def main(_):
    runner.run(ner.NerTask(data_dir=FLAGS.data_dir, label_list=FLAGS.label_list), bert_flags.run_config(FLAGS))


if __name__ == "__main__":
    bert_flags.run(main, required=["data_dir", "output_dir"])
