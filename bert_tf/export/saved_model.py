"""SavedModel export of BERT task models for TF Serving, with tensor and raw-text signatures: the format
"serving" of `bert_tf.export.exporter.export` (which writes `export_dir/<version>/`, the TF Serving layout, as a
whole; `run_scripts/export_saved_model.py` is its CLI). `write` writes the SavedModel into the directory it is
given.

Signatures (named inputs and outputs; batch-major, any batch size):

| signature           | inputs                                                    | outputs                          |
|---------------------|-----------------------------------------------------------|----------------------------------|
| `serving_default`   | the task's inputs (`TaskSpec.inputs`): int32 `input_ids`,  | the task's outputs (below)       |
|                     | `input_mask`, `segment_ids` [B, S] (swag [B, 4, S];        |                                  |
|                     | pretraining, masked_lm + `masked_lm_positions` [B, P])     |                                  |
| `serving_text`      | string `text_a` [B]                                        | the task's outputs + the packed  |
| `serving_text_pair` | string `text_a`, `text_b` [B] (an empty `text_b` row is    | `input_ids`, `input_mask`,       |
|                     | packed as a single segment, as the original does)          | `segment_ids` [B, S]             |

The text signatures exist for the tasks whose inputs are the encoder's three (`TaskSpec.text`: not swag,
pretraining or masked_lm).

S: the tensor signature takes any length (up to max_position_embeddings); the text signatures pack each request to
its longest text (truncated at max_seq_length as the original), so a short request costs what its texts need,
not max_seq_length (`pad_to_max_seq_length=True`: always max_seq_length, the original's fixed shape). The real
positions' outputs are the same either way, to float rounding (bert_tf.data.lengths says why). SQuAD's export
packs to max_seq_length unless `pad_to_max_seq_length=False` (`TaskSpec.keeps_max_seq_length`): its start and end
logits at the real positions are the same either way, but run_squad.py's n-best lists take the best
`n_best_size` positions of all max_seq_length, padding included (a padded position is then skipped, not replaced),
so a client reproduces run_squad.py's predictions from logits at max_seq_length only.

Task outputs: the spec's (`TaskSpec.outputs`), and for a labelled head (classifier, ner) its
`label_output`, the label names of the argmax of `logits` (`predicted_label` string [B], `predicted_labels`
[B, S]); docs/serving.md lists each task's with its shapes.

The text signatures tokenize and pack in graph exactly like the Python pipeline (`FullTokenizer` + the original
`convert_single_example` truncation). `text_ops` chooses how:

* `"tf_text"` (default): `bert_tf.text.preprocessing.InGraphPreprocessor` (TensorFlow Text ops; fastest). Loading
  the model needs `import tensorflow_text` first, and TF Serving needs a build with the TF Text ops.
* `"core"`: only core TensorFlow ops (`bert_tf.text.core_ops`: the code-point basic tokenizer of
  `bert_tf.text.in_graph` plus a greedy WordPiece loop over a `StaticHashTable`), so stock `tensorflow/serving`
  and a plain `import tensorflow` load it.
* `"none"`: no text signatures (tensor signature only).

Every text signature refuses a request of more texts than `max_texts_per_request`, or whose texts hold more UTF-8
bytes in all than `max_request_bytes` (text_a and text_b each; export options, defaults
`bert_tf.text.in_graph.TextLimits`'s), with an InvalidArgumentError naming the option, checked in graph before any
tokenization (by the tokenizer, which every text signature goes through); export_metadata.json records them. The
tensor signature takes any request.

`use_xla=True` compiles the model's computation in every signature with XLA (`jit_compile`; the tokenizer, the
packing and the label lookup stay outside it). On CPU that cuts batch-1 latency (one fused program instead of
oneDNN's per-op kernels and transposes), while the default is faster at large batches (BENCHMARKS.md). Each new
input shape compiles once, on its first request, so the sequence length is rounded up to a multiple of
`length_multiple` (default 32) in every signature, the tensor signature's inputs padded to it and its per-token
outputs cut back to the length sent: the text signatures compile at most max_seq_length / 32 lengths per batch
size, the tensor signature, which takes any length up to max_position_embeddings, at most
max_position_embeddings / 32. TF Serving runs such a model only when started with
`--xla_cpu_compilation_enabled=true`.

Assets (under `assets/`): `vocab.txt` (the vocabulary), and `labels.txt` for a labelled head (one label per
line). `export_metadata.json` in assets.extra describes task, signatures and settings.
"""
import dataclasses

import tensorflow as tf

from bert_tf.data import lengths
from bert_tf.model import task_models
from bert_tf.text import core_ops, preprocessing

TEXT_OPS = ("tf_text", "core", "none")


def make_preprocessor(vocab_file, do_lower_case, max_seq_length, text_ops="tf_text", pad_to_max_seq_length=True,
                      length_multiple=1, limits=None):
    """The in-graph text -> inputs module the text signatures use (see the module docstring); `limits`:
    `in_graph.TextLimits` each request is checked against first."""
    padding = dict(pad_to_max_seq_length=pad_to_max_seq_length, length_multiple=length_multiple, limits=limits)
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
    """The signatures' computation: the model of `spec` (a TaskSpec) on its inputs -> its outputs by name (those
    in `spec.sequence_outputs` under use_xla computed on the inputs padded to a rounded length and cut back to the
    length sent), with the label names of `labels` as its `label_output`."""

    def __init__(self, model, spec, vocab_file, labels, preprocessor=None, use_xla=False, length_multiple=1):
        super().__init__()
        # The Keras model is not tracked itself: the tf.Variables its traced functions read are, as a flat list
        # (see `track_variables`, as keras.export does), so that the TF1 loader TF Serving and saved_model_cli
        # use restores every variable a signature reads.
        forward = lambda inputs: model(inputs, training=False)
        self._forward = core_ops.Untracked(tf.function(forward, jit_compile=True) if use_xla else forward)
        self.length_multiple = length_multiple if use_xla else 1
        self.max_length = task_models.encoder_of(model).config.max_position_embeddings
        self.spec = spec
        if vocab_file:
            self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.preprocessor = preprocessor
        self._labels = labels

    def track_variables(self, concrete_functions):
        self.model_variables = function_variables(concrete_functions)

    def outputs(self, inputs):
        result = self._forward_rounded(inputs) if self.length_multiple > 1 else self._forward.obj(inputs)
        out = {name: tf.identity(result[name], name=name) for name in self.spec.outputs}
        if self._labels is not None:  # a constant of each function (a captured tensor would be an ONNX input)
            labels = tf.constant(self._labels, tf.string)
            out[self.spec.label_output] = tf.gather(labels, tf.argmax(out["logits"], axis=-1, output_type=tf.int32))
        return out

    def _forward_rounded(self, inputs):
        """The model on `inputs` whose last axis is the sequence ("S") zero-padded on it to a length rounded up to
        `length_multiple` (at least the length sent, at most max_position_embeddings), its per-token outputs cut back
        to the length sent."""
        sequence_inputs = [i.name for i in self.spec.inputs if i.axes[-1] == "S"]
        length = tf.shape(inputs[sequence_inputs[0]], out_type=tf.int64)[-1]
        rounded = tf.maximum(length, preprocessing.longest_length([length], self.max_length, self.length_multiple))
        result = self._forward.obj({
            name: tf.pad(t, [[0, 0]] * (t.shape.rank - 1) + [[0, rounded - length]]) if name in sequence_inputs else t
            for name, t in inputs.items()})
        return {name: t[:, :length] if name in self.spec.sequence_outputs else t
                for name, t in result.items() if name in self.spec.outputs}

    def text_outputs(self, packed):
        """The outputs of the inputs `packed` from text, and those inputs."""
        out = self.outputs(packed)
        out.update({name: tf.identity(t) for name, t in packed.items()})
        return out


def tensor_specs(spec):
    """The tensor signature's inputs of the task of `spec` (a TaskSpec), by name: its `inputs`, batch and sequence
    of any size (e.g. int32 input_ids [B, S]; swag's [B, 4, S])."""
    return {i.name: tf.TensorSpec(i.shape, i.dtype, name=i.name) for i in spec.inputs}


def tensor_function(model, spec, labels=None):
    """`serving_default`'s computation for the formats converted from it (bert_tf.export.portable): a tf.function
    of `tensor_specs(spec)` (keyword arguments) returning the task's outputs by name, `labels` (a labelled head)
    giving its `label_output`, as the SavedModel's signature does."""
    module = _ServingModule(model, spec, None, labels)
    return tf.function(lambda **inputs: module.outputs(inputs), autograph=False)


def write(model, request, sources, out):
    """Writes `model` (a built Keras task model of `request.spec`, weights loaded; see the module docstring for
    its signatures) as a SavedModel into the directory `out`, with the text signatures of `request.text_ops`
    over `sources.vocab_file` (exporter.Sources) where the spec's inputs take text, and `sources.labels` (a
    labelled head) as assets/labels.txt. Returns this format's settings for the export's metadata."""
    spec, text_ops = request.spec, request.text_ops or "tf_text"
    use_xla, pad = bool(request.use_xla), request.pad
    length_multiple = lengths.SequenceLengths.for_run(pad, use_xla, request.length_multiple).multiple
    has_text = text_ops != "none" and spec.text
    preprocessor = make_preprocessor(sources.vocab_file, sources.do_lower_case, request.max_seq_length, text_ops, pad,
                                     length_multiple, request.text_limits) if has_text else None
    module = _ServingModule(model, spec, sources.vocab_file, sources.labels, preprocessor, use_xla, length_multiple)
    if sources.labels is not None:
        module.labels_asset = tf.saved_model.Asset(sources.labels_file())
    signatures = {"serving_default": tf.function(
        lambda **inputs: module.outputs(inputs)).get_concrete_function(**tensor_specs(spec))}
    module.track_variables(signatures.values())  # the text signatures read the same variables
    if has_text:
        # Given as functions with input signatures, not traced here: tf.saved_model.save traces them in its own
        # context, where it also lists the preprocessor's functions (`encode`, `encode_pair`, the tokenizer's),
        # so each of those is traced, and written, once (traced here, save would trace and write them again: a
        # third of the export's time and a fifth of saved_model.pb).
        text_a, text_b = (tf.TensorSpec([None], tf.string, name=name) for name in ("text_a", "text_b"))
        signatures["serving_text"] = tf.function(
            lambda text_a: module.text_outputs(preprocessor.encode(text_a)), input_signature=[text_a])
        signatures["serving_text_pair"] = tf.function(
            lambda text_a, text_b: module.text_outputs(preprocessor.encode_pair(text_a, text_b)),
            input_signature=[text_a, text_b])
    tf.saved_model.save(module, out, signatures=signatures)
    limits = dataclasses.asdict(request.text_limits) if has_text else {}
    return {"text_ops": text_ops if has_text else "none", "signatures": sorted(signatures), "use_xla": use_xla,
            "pad_to_max_seq_length": pad, "length_multiple": length_multiple, **limits}
