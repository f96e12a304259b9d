"""Masked-LM + next-sentence pretraining: the original run_pretraining.py, same flags and outputs, on every
tf.distribute strategy.

Continued pretraining of a released BERT on your domain (the original README's demo):
  python run_scripts/create_pretraining_data.py --input_file=corpus.txt --output_file=/tmp/tf_examples.tfrecord \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5
  python run_scripts/run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining_output \
    --do_train=True --do_eval=True --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --train_batch_size=32 --max_seq_length=128 \
    --max_predictions_per_seq=20 --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Phase 2 (seq 512 from phase 1's weights; the optimizer and schedule start afresh):
  python run_scripts/run_pretraining.py --input_file=/tmp/tf_examples_512.tfrecord \
    --init_checkpoint=/tmp/phase1_output --output_dir=/tmp/phase2_output --max_seq_length=512 \
    --max_predictions_per_seq=80 --num_train_steps=100000 --num_warmup_steps=10000 --do_train=True ...

Outputs in output_dir: checkpoints (ckpt-<step>; rerunning the same command resumes), TensorBoard summaries
(train/), eval_results.txt; with --save_original_checkpoint, original/ (bert_model.ckpt under the original variable
names, bert_config.json).
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.tasks import pretraining, runner

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("eval_input_file", None, "Held-out TF example files for --do_eval (glob or comma separated); "
                    "default: --input_file, as the original.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence. Must "
                     "match data generation.", lower_bound=1)
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.", lower_bound=1)
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.", lower_bound=0)
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.", lower_bound=1)
flags.DEFINE_bool("next_sentence", True, "Train and evaluate the next-sentence head. False: the paper's \"No NSP\" "
                  "ablation (masked-LM loss only; no cls/seq_relationship head needed or written).")
flags.DEFINE_bool("dynamic_masking", False, "Mask every epoch afresh in the input pipeline (the original's 15% / "
                  "80-10-10 rule) from the same TFRecords; needs --vocab_file.")
flags.DEFINE_float("masked_lm_prob", 0.15, "--dynamic_masking: masked LM probability.", lower_bound=0.0,
                   upper_bound=1.0)
flags.DEFINE_bool("do_whole_word_mask", False, "--dynamic_masking: mask whole words rather than wordpieces.")
bert_flags.define_model_flags()
bert_flags.define_training_flags()


def main(_):
    task = pretraining.PretrainingTask(
        input_file=FLAGS.input_file, eval_input_file=FLAGS.eval_input_file,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, num_train_steps=FLAGS.num_train_steps,
        num_warmup_steps=FLAGS.num_warmup_steps, max_eval_steps=FLAGS.max_eval_steps,
        next_sentence=FLAGS.next_sentence, dynamic_masking=FLAGS.dynamic_masking,
        masked_lm_prob=FLAGS.masked_lm_prob, do_whole_word_mask=FLAGS.do_whole_word_mask)
    runner.run(task, bert_flags.run_config(FLAGS))


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "bert_config_file", "output_dir"])
