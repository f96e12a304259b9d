"""Extract pre-computed per-token feature vectors from BERT (the original extract_features.py, same flags).

Example:
  python run_scripts/extract_features.py --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.inference import extract_features
from bert_tf.text import packing

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example per line; `text_a ||| text_b` for pairs.")
flags.DEFINE_string("output_file", None, "Where to write the JSON lines.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes to output (negative counts "
                    "from the top).")
bert_flags.define_model_flags()
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.", lower_bound=1)
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility with the original; use --distribution_strategy "
                  "in the training scripts for TPUs.")
flags.DEFINE_string("master", None, "Accepted for compatibility with the original (TPU master); unused.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility with the original; unused.", lower_bound=1)
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility with the original; the lookup "
                  "is the same either way.")
flags.DEFINE_bool("use_xla", False, "Compile the forward pass with XLA.")
bert_flags.define_length_flags()
flags.DEFINE_integer("doc_stride", 0, packing.DOC_STRIDE_HELP + " Each token's features come from the window where it "
                     "has the most context, [CLS] from the first window; a pair keeps text_b whole in every window and "
                     "windows text_a (R = max_seq_length - 3 - text_b's tokens, an error if below 1), the [SEP] after "
                     "text_a, text_b and its [SEP] from the last window.", lower_bound=0)


def main(_):
    extract_features.run(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, init_checkpoint=FLAGS.init_checkpoint, layers=FLAGS.layers,
        max_seq_length=FLAGS.max_seq_length, do_lower_case=bert_flags.given(FLAGS, "do_lower_case"),
        batch_size=FLAGS.batch_size, use_xla=FLAGS.use_xla, pad_to_max_seq_length=FLAGS.pad_to_max_seq_length,
        seq_length_multiple=FLAGS.seq_length_multiple, doc_stride=FLAGS.doc_stride)


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file"])
