"""SavedModel export of BERT task models for TF Serving, with tensor and raw-text signatures: the format
"serving" of `bert_tf.export.exporter.export` (which writes `export_dir/<version>/`, the TF Serving layout, as a
whole; `run_scripts/export_saved_model.py` is its CLI). `write` writes the SavedModel into the directory it is
given.

Signatures (named inputs and outputs; batch-major, any batch size):

| signature           | inputs                                                    | outputs                          |
|---------------------|-----------------------------------------------------------|----------------------------------|
| `serving_default`   | int32 `input_ids`, `input_mask`, `segment_ids` [B, S]      | the task's outputs (below)       |
|                     | (+ int32 `masked_lm_positions` [B, P] for pretraining,      |                                  |
|                     | masked_lm)                                                |                                  |
| `serving_text`      | string `text_a` [B]                                        | the task's outputs + the packed  |
| `serving_text_pair` | string `text_a`, `text_b` [B] (an empty `text_b` row is    | `input_ids`, `input_mask`,       |
|                     | packed as a single segment, as the original does)          | `segment_ids` [B, S]             |

S: the tensor signature takes any length (up to max_position_embeddings); the text signatures pack each request to
its longest text (truncated at max_seq_length as the original), so a short request costs what its texts need,
not max_seq_length (`pad_to_max_seq_length=True`: always max_seq_length, the original's fixed shape). The real
positions' outputs are the same either way, to float rounding (bert_tf.data.lengths says why).

Task outputs: encoder `sequence_output` [B,S,H], `pooled_output` [B,H]; classifier `logits`, `probabilities`
[B,L] and `predicted_label` (string [B]) (a regression
classifier: `logits` [B,1], `predictions` [B]); squad `start_logits`, `end_logits` [B,S]; ner `logits`,
`probabilities` [B,S,L] and `predicted_labels` (string [B,S]); pretraining `masked_lm_logits` [B,P,V],
`next_sentence_logits` [B,2], `sequence_output`, `pooled_output`; masked_lm (the masked-LM head alone, e.g. of a
`--next_sentence=false` run) the same without `next_sentence_logits`. These two have no text signature.
embedding `embedding` [B,H] (float32: the mean of the last layer over the real tokens, or its [CLS] vector,
L2-normalized: sentence-transformers' pooling; `bert_tf.inference.embeddings`).

The text signatures tokenize and pack in graph exactly like the Python pipeline (`FullTokenizer` + the original
`convert_single_example` truncation). `text_ops` chooses how:

* `"tf_text"` (default): `bert_tf.text.preprocessing.InGraphPreprocessor` (TensorFlow Text ops; fastest). Loading
  the model needs `import tensorflow_text` first, and TF Serving needs a build with the TF Text ops.
* `"core"`: only core TensorFlow ops (`bert_tf.text.core_ops`: the code-point basic tokenizer of
  `bert_tf.text.in_graph` plus a greedy WordPiece loop over a `StaticHashTable`), so stock `tensorflow/serving`
  and a plain `import tensorflow` load it.
* `"none"`: no text signatures (tensor signature only).

`use_xla=True` compiles the model's computation in every signature with XLA (`jit_compile`; the tokenizer, the
packing and the label lookup stay outside it). On CPU that cuts batch-1 latency (one fused program instead of
oneDNN's per-op kernels and transposes), while the default is faster at large batches (BENCHMARKS.md). Each new
input shape compiles once, on its first request, so the sequence length is rounded up to a multiple of
`length_multiple` (default 32) in every signature, the tensor signature's inputs padded to it and its per-token
outputs cut back to the length sent: at most max_seq_length / 32 lengths compile per batch size. TF Serving runs
such a model only when started with `--xla_cpu_compilation_enabled=true`.

Assets (under `assets/`): `vocab.txt` (the vocabulary), and `labels.txt` for the classifier and NER (one label
per line). `export_metadata.json` in assets.extra describes task, signatures and settings.
"""
import tensorflow as tf

from bert_tf.data import lengths
from bert_tf.model import task_models
from bert_tf.text import core_ops, preprocessing

# The exportable tasks: their models, the heads an export needs from the checkpoint, their outputs and those with a
# sequence axis (under use_xla computed on the inputs padded to a rounded length and cut back to the length sent)
# are `task_models.REGISTRY`'s.
TASKS = ("encoder", "classifier", "squad", "ner", "pretraining", "masked_lm", "embedding")
_PRETRAINING = ("pretraining", "masked_lm")  # the tasks with masked_lm_positions among their inputs
TEXT_OPS = ("tf_text", "core", "none")
_TENSOR_INPUTS = ("input_ids", "input_mask", "segment_ids")


def make_preprocessor(vocab_file, do_lower_case, max_seq_length, text_ops="tf_text", pad_to_max_seq_length=True,
                      length_multiple=1):
    """The in-graph text -> inputs module the text signatures use (see the module docstring)."""
    padding = dict(pad_to_max_seq_length=pad_to_max_seq_length, length_multiple=length_multiple)
    if text_ops == "tf_text":
        return preprocessing.InGraphPreprocessor(vocab_file, do_lower_case, max_seq_length, **padding)
    if text_ops == "core":
        return core_ops.CorePreprocessor(vocab_file, do_lower_case, max_seq_length, **padding)
    raise ValueError(f"text_ops must be one of {TEXT_OPS} for a preprocessor, got {text_ops!r}.")


def function_variables(concrete_functions):
    """The tf.Variables the concrete functions read, each once, in order. An export tracks these (not the Keras
    model, whose variables are Keras 3 wrappers) so that every loader restores what its functions read."""
    seen, variables = set(), []
    for fn in concrete_functions:
        for v in fn.variables:
            if id(v) not in seen:
                seen.add(id(v))
                variables.append(v)
    return variables


# --- the serving module ------------------------------------------------------------------------------------

class _ServingModule(tf.Module):
    def __init__(self, model, task, vocab_file, labels, preprocessor=None, use_xla=False, length_multiple=1):
        super().__init__()
        # The Keras model is not tracked itself: the tf.Variables its traced functions read are, as a flat list
        # (see `track_variables`, as keras.export does), so that the TF1 loader TF Serving and saved_model_cli
        # use restores every variable a signature reads.
        forward = lambda inputs: model(inputs, training=False)
        self._forward = core_ops.Untracked(tf.function(forward, jit_compile=True) if use_xla else forward)
        self.length_multiple = length_multiple if use_xla else 1
        self.max_length = (model if task == "encoder" else model.bert).config.max_position_embeddings
        self.task = task
        self.output_names = task_models.REGISTRY[task].outputs
        if task == "classifier" and getattr(model, "regression", False):
            self.output_names = ("logits", "predictions")  # STS-B style regression: no labels
        if vocab_file:
            self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.preprocessor = preprocessor
        self._labels = labels

    def track_variables(self, concrete_functions):
        self.model_variables = function_variables(concrete_functions)

    def outputs(self, inputs):
        result = self._forward_rounded(inputs) if self.length_multiple > 1 else self._forward.obj(inputs)
        out = {name: tf.identity(result[name], name=name) for name in self.output_names}
        if self._labels is not None:  # a constant of each function (a captured tensor would be an ONNX input)
            labels = tf.constant(self._labels, tf.string)
            predicted = tf.gather(labels, tf.argmax(out["logits"], axis=-1, output_type=tf.int32))
            out["predicted_label" if self.task == "classifier" else "predicted_labels"] = predicted
        return out

    def _forward_rounded(self, inputs):
        """The model on `inputs` zero-padded to a length rounded up to `length_multiple` (at least the length sent,
        at most max_position_embeddings), its per-token outputs cut back to the length sent."""
        length = tf.shape(inputs["input_ids"], out_type=tf.int64)[1]
        rounded = tf.maximum(length, preprocessing.longest_length([length], self.max_length, self.length_multiple))
        padding = [[0, 0], [0, rounded - length]]
        result = self._forward.obj({name: tf.pad(t, padding) if name in _TENSOR_INPUTS else t
                                    for name, t in inputs.items()})
        return {name: t[:, :length] if name in task_models.REGISTRY[self.task].sequence_outputs else t
                for name, t in result.items() if name in self.output_names}

    def text_outputs(self, packed):
        out = self.outputs(packed)
        out.update({name: tf.identity(packed[name]) for name in _TENSOR_INPUTS})
        return out


def tensor_specs(task):
    """The tensor signature's inputs of `task`: int32 input_ids, input_mask, segment_ids [B, S] (pretraining and
    masked_lm: also masked_lm_positions [B, P]), by name."""
    names = _TENSOR_INPUTS + (("masked_lm_positions",) if task in _PRETRAINING else ())
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


def tensor_function(model, task, labels=None):
    """`serving_default`'s computation for the formats converted from it (bert_tf.export.portable): a tf.function
    of `tensor_specs(task)` (keyword arguments) returning the task's outputs by name, `labels` (classifier and
    ner) giving `predicted_label(s)`, as the SavedModel's signature does."""
    module = _ServingModule(model, task, None, labels)
    return tf.function(lambda **inputs: module.outputs(inputs), autograph=False)


def write(model, request, sources, out):
    """Writes `model` (a built Keras task model of `request.task`, weights loaded; see the module docstring for
    each task's outputs) as a SavedModel into the directory `out`, with the text signatures of `request.text_ops`
    over `sources.vocab_file` (exporter.Sources) and `sources.labels` (classifier, ner) as assets/labels.txt.
    Returns this format's settings for the export's metadata."""
    task, text_ops = request.task, request.text_ops or "tf_text"
    use_xla, pad = bool(request.use_xla), bool(request.pad_to_max_seq_length)
    length_multiple = lengths.SequenceLengths.for_run(pad, use_xla, request.length_multiple).multiple
    has_text = text_ops != "none" and task not in _PRETRAINING
    preprocessor = make_preprocessor(sources.vocab_file, sources.do_lower_case, request.max_seq_length, text_ops, pad,
                                     length_multiple) if has_text else None
    module = _ServingModule(model, task, sources.vocab_file, sources.labels, preprocessor, use_xla, length_multiple)
    if sources.labels is not None:
        module.labels_asset = tf.saved_model.Asset(sources.labels_file())
    signatures = {"serving_default": tf.function(
        lambda **inputs: module.outputs(inputs)).get_concrete_function(**tensor_specs(task))}
    if has_text:
        signatures["serving_text"] = tf.function(
            lambda text_a: module.text_outputs(preprocessor.encode(text_a))).get_concrete_function(
                tf.TensorSpec([None], tf.string, name="text_a"))
        signatures["serving_text_pair"] = tf.function(
            lambda text_a, text_b: module.text_outputs(preprocessor.encode_pair(text_a, text_b))
        ).get_concrete_function(tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string, name="text_b"))
    module.track_variables(signatures.values())
    tf.saved_model.save(module, out, signatures=signatures)
    return {"text_ops": text_ops if has_text else "none", "signatures": sorted(signatures), "use_xla": use_xla,
            "pad_to_max_seq_length": pad, "length_multiple": length_multiple}
