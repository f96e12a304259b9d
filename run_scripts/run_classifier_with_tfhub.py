"""Fine-tune a TF Hub BERT for sentence (pair) classification: the original run_classifier_with_tfhub.py, same flags
(bert_hub_module_handle plus run_classifier.py's), outputs as run_classifier.py's.

bert_hub_module_handle is a local TF2 TF Hub BERT SavedModel directory (download and extract one first); weights,
vocabulary, casing and config come from it unless given by flags.

Example:
  python run_scripts/run_classifier_with_tfhub.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --bert_hub_module_handle=/path/to/bert_en_uncased_L-12_H-768_A-12_4 \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import runner

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_hub_module_handle", None, "Handle for the BERT TF-Hub module: a local TF2 SavedModel "
                    "directory.")
bert_flags.define_classifier_flags()
bert_flags.define_model_flags()
bert_flags.define_run_flags()


def main(_):
    if FLAGS.init_checkpoint:
        raise ValueError("--init_checkpoint: the weights come from --bert_hub_module_handle here; use "
                         "run_classifier.py to start from a checkpoint.")
    run = bert_flags.run_config(FLAGS, init_checkpoint=FLAGS.bert_hub_module_handle)
    runner.run(bert_flags.classifier_task(FLAGS), run)


if __name__ == "__main__":
    bert_flags.run(main, required=["data_dir", "task_name", "bert_hub_module_handle", "output_dir"])
