"""Export a BERT task model for TF Serving, TF Hub, LiteRT or ONNX (`export_dir/<version>/`; bert_tf.export.exporter).

--format=serving (default): `serving_default` (the task's int32 input tensors) and, for the tasks that take text,
`serving_text` / `serving_text_pair` (docs/serving.md). A flag that the format or task does not take is an error.

Examples:
  python run_scripts/export_saved_model.py --task=classifier --bert_config_file=$BERT/bert_config.json \
    --vocab_file=$BERT/vocab.txt --init_checkpoint=$OUT --label_list=0,1 --max_seq_length=128 \
    --export_dir=/models/mrpc  # $OUT: run_classifier.py's --output_dir (its latest checkpoint)
  python run_scripts/export_saved_model.py --task=encoder --init_checkpoint=$BERT/bert_model.ckpt ... \
    --text_ops=core      # raw-text signatures without TensorFlow Text ops: stock tensorflow/serving loads it
  python run_scripts/export_saved_model.py --task=embedding --init_checkpoint=$MINILM/bert_model.ckpt ... \
    --max_seq_length=256 # sentence embeddings (`embedding` [batch, H]), as sentence-transformers computes them
  python run_scripts/export_saved_model.py --task=classifier --init_checkpoint=$OUT --label_list=0,1 ... \
    --doc_stride=64 --window_pooling=max  # long texts: windows every 64 tokens, pooled per text in the graph

--format=tfhub writes the formats of Model Garden's export_tfhub.py (see bert_tf/export/tfhub.py): --task=encoder
(hub.KerasLayer(path) takes input_word_ids, input_mask, input_type_ids), --task=masked_lm (plus the `mlm`
subobject); --task=preprocessing (with either format; needs only --vocab_file and --do_lower_case) writes the
preprocessing model (strings -> packed inputs at --max_seq_length; `tokenize`, `bert_pack_inputs`):
  python run_scripts/export_saved_model.py --format=tfhub --task=encoder --bert_config_file=$BERT/bert_config.json \
    --vocab_file=$BERT/vocab.txt --init_checkpoint=$BERT/bert_model.ckpt --export_dir=/hub/bert_encoder
  python run_scripts/export_saved_model.py --task=preprocessing --vocab_file=$BERT/vocab.txt \
    --export_dir=/hub/bert_preprocess

--format=litert / onnx write model.tflite / model.onnx (LiteRT's interpreter, onnxruntime; no TensorFlow needed to
run them) with the serving_default tensor signature; --quantization=dynamic_range stores the weights as int8:
  python run_scripts/export_saved_model.py --format=litert --quantization=dynamic_range --task=classifier \
    --init_checkpoint=$OUT --label_list=0,1 ... --export_dir=/models/mrpc_litert
"""
import inspect

from absl import flags, logging

from bert_tf import flags as bert_flags
from bert_tf.export import exporter, portable, saved_model
from bert_tf.model import heads, task_models
from bert_tf.text import packing


def default(function, name):
    """The default of `function`'s keyword `name`: an option flag's default, written there once."""
    return inspect.signature(function).parameters[name].default


FLAGS = flags.FLAGS
bert_flags.define_model_flags()
flags.DEFINE_enum("format", "serving", list(exporter.FORMATS),
                  "serving: TF Serving signatures (docs/serving.md); tfhub: the TF Hub BERT formats of Model "
                  "Garden's export_tfhub.py (tasks encoder, masked_lm, preprocessing); litert: "
                  "<export_dir>/<version>/model.tflite, onnx: model.onnx, each with the serving_default tensor "
                  "signature (bert_tf/export/portable.py).")
flags.DEFINE_enum("quantization", default(portable.write, "quantization"), list(portable.QUANTIZATIONS),
                  "--format=litert or onnx: dynamic_range stores the matrix weights as int8 (a quarter of the size; "
                  "activations quantized at run time).")
flags.DEFINE_enum("task", None, list(exporter.format_tasks("serving")),
                  "Which model to export. preprocessing: the TF Hub preprocessing model (with either --format).")
flags.DEFINE_integer("num_labels", None, "Number of labels of the classifier / ner head.", lower_bound=1)
flags.DEFINE_string("label_list", None, "Labels of the classifier / ner head: comma-separated, or a file with one "
                    "label per line. Saved as assets/labels.txt; gives --num_labels.")
flags.DEFINE_string("export_dir", None, "Base directory of the served model; the SavedModel goes to "
                    "<export_dir>/<version>/.")
flags.DEFINE_integer("version", None, "Model version (TF Serving's numbered subdirectory): by default the next "
                     "free one, above every version in --export_dir. An existing version is refused: TF Serving "
                     "serves a version number once, so an export never rewrites one.", lower_bound=1)
flags.DEFINE_enum("text_ops", default(saved_model.write, "text_ops"), list(saved_model.TEXT_OPS),
                  "Raw-text signatures: tf_text (TensorFlow Text ops; fastest, needs TF Text at serving time), "
                  "core (core TensorFlow ops only; stock TF Serving) or none. --format=serving only.")
flags.DEFINE_bool("use_xla", default(saved_model.write, "use_xla"), "Compile the model's computation in every "
                  "signature with XLA: lower batch-1 latency on a CPU with AVX2 only (not with AVX-512: "
                  "docs/serving.md), slower at large batches; each new input shape compiles on its first request, and "
                  "TF Serving needs --xla_cpu_compilation_enabled=true. --format=serving only.")
flags.DEFINE_integer("max_texts_per_request", default(saved_model.write, "max_texts_per_request"),
                     "The text signatures (--format=serving, --task=preprocessing) refuse a request of more texts "
                     "(an InvalidArgumentError naming this flag, before any tokenization). docs/serving.md.",
                     lower_bound=1)
flags.DEFINE_integer("max_request_bytes", default(saved_model.write, "max_request_bytes"),
                     "The text signatures refuse a request whose texts hold more UTF-8 bytes in all (text_a and "
                     "text_b each); tokenization memory grows with them. docs/serving.md.", lower_bound=1)
flags.DEFINE_enum("pooling", default(task_models.BertSentenceEncoder, "pooling"), list(heads.POOLINGS),
                  "--task=embedding: the sentence embedding is the mean of the last layer over the real tokens "
                  "(sentence-transformers' all-MiniLM-L6-v2) or its [CLS] vector.")
flags.DEFINE_bool("normalize_embeddings", default(task_models.BertSentenceEncoder, "normalize_embeddings"),
                  "--task=embedding: divide each embedding by its L2 norm (as all-MiniLM-L6-v2's Normalize module).")
flags.DEFINE_integer("doc_stride", default(saved_model.write, "doc_stride"), packing.DOC_STRIDE_HELP + " Here: the "
                     "raw-text signatures of --task=classifier, multi_label, regression or embedding window text_a "
                     "(text_b whole in every window), run the model on all windows of a request at once and pool "
                     "each text's outputs, as run_classifier.py and semantic_search.py --doc_stride do; they return "
                     "num_windows [B] instead of the packed inputs. docs/serving.md.", lower_bound=0)
flags.DEFINE_enum("window_pooling", default(saved_model.write, "window_pooling"), list(packing.WINDOW_POOLINGS),
                  "--doc_stride, the classifier tasks: a text's outputs from its windows', as run_classifier.py "
                  "--window_pooling: the mean of their probabilities, or each label's max (a softmax's then scaled "
                  "to sum to 1); logits their logs (multi_label: log-odds); regression the mean or max.")
flags.DEFINE_integer("max_windows_per_request", default(saved_model.write, "max_windows_per_request"),
                     "--doc_stride: the text signatures refuse a request whose texts take more windows in all (an "
                     "InvalidArgumentError naming this flag, after tokenization, before the model runs). Default: "
                     f"{saved_model.WINDOWS_PER_TEXT} x --max_texts_per_request.", lower_bound=1)
bert_flags.define_length_flags()
# The flags that are export options (`exporter.export`'s **options): given on the command line, else the default of
# the format's writer or the task's model (--pad_to_max_seq_length: the task's, true for squad).
OPTIONS = ("text_ops", "use_xla", "pad_to_max_seq_length", "seq_length_multiple", "max_texts_per_request",
           "max_request_bytes", "quantization", "pooling", "normalize_embeddings", "doc_stride", "window_pooling",
           "max_windows_per_request")


def main(_):
    options = {name: FLAGS[name].value for name in OPTIONS if FLAGS[name].present}
    try:  # before anything loads
        exporter.split_options(FLAGS.task, FLAGS.format, options)
    except TypeError as e:  # an option the format or task does not take, named as its flag
        raise ValueError(str(e)) from e
    path = exporter.export(FLAGS.task, FLAGS.export_dir, format=FLAGS.format, version=FLAGS.version,
                           max_seq_length=FLAGS.max_seq_length, num_labels=FLAGS.num_labels,
                           label_list=FLAGS.label_list, init_checkpoint=FLAGS.init_checkpoint,
                           bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
                           do_lower_case=bert_flags.given(FLAGS, "do_lower_case"), **options)
    logging.info("Export written to %s", path)
    print(path)


if __name__ == "__main__":
    bert_flags.run(main, required=["task", "export_dir"])
