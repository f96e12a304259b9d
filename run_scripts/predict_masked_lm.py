"""Fill-mask prediction: the top-k wordpieces for every [MASK] of each input line, from a checkpoint with the
masked-LM head (a TF Hub SavedModel with its `mlm` needs no --vocab_file or --bert_config_file), as JSON lines
(bert_tf/inference/fill_mask.py).

Example:
  echo "the man went to the [MASK] to buy a gallon of milk ." > input.txt
  python run_scripts/predict_masked_lm.py --input_file=input.txt --output_file=masks.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --top_k=5
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.inference import fill_mask

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example per line (`text_a ||| text_b` for pairs); write "
                    "[MASK] where a wordpiece is to be predicted.")
flags.DEFINE_string("output_file", None, "Where to write the JSON lines.")
flags.DEFINE_integer("top_k", 5, "How many predictions to write for each mask, most probable first.", lower_bound=1)
flags.DEFINE_integer("batch_size", 8, "Batch size for predictions.", lower_bound=1)
flags.DEFINE_bool("use_xla", False, "Compile the forward pass with XLA.")
bert_flags.define_model_flags()
bert_flags.define_length_flags()


def main(_):
    fill_mask.run(input_file=FLAGS.input_file, output_file=FLAGS.output_file,
                  bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
                  init_checkpoint=FLAGS.init_checkpoint, do_lower_case=bert_flags.given(FLAGS, "do_lower_case"),
                  max_seq_length=FLAGS.max_seq_length, top_k=FLAGS.top_k, batch_size=FLAGS.batch_size,
                  use_xla=FLAGS.use_xla, pad_to_max_seq_length=FLAGS.pad_to_max_seq_length,
                  seq_length_multiple=FLAGS.seq_length_multiple)


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file", "init_checkpoint"])
