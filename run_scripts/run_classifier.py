"""Fine-tune BERT for sentence (pair) classification: the original run_classifier.py, same flags and outputs.

Tasks: cola, mnli, mrpc, xnli (as the original), sst-2, qqp, qnli, rte, sts-b (regression), wnli, and your own data
as tsv, csv (a header naming text_a, label, optional text_b and id) or jsonl (README, "Your own data"). See also the
README's "Your own classification task", "Multi-label" and "Long texts".

Example (MRPC, as in the original README):
  python run_scripts/run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Outputs in output_dir: checkpoints (ckpt-<step>), train/eval/predict.tf_record, eval_results.txt,
eval_metrics.json (per label precision, recall, F1, support; macro and weighted F1; the confusion matrix),
test_results.tsv, the GLUE submission file (MRPC.tsv, MNLI-m.tsv, ...; predictions.tsv for your own data) and
model_metadata.json (what it trains: labels, thresholds, casing, ...) with vocab.txt.
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import runner

FLAGS = flags.FLAGS
bert_flags.define_classifier_flags()
bert_flags.define_model_flags()
bert_flags.define_run_flags()


def main(_):
    runner.run(bert_flags.classifier_task(FLAGS), bert_flags.run_config(FLAGS))


if __name__ == "__main__":
    bert_flags.run(main, required=["data_dir", "task_name", "output_dir"])
