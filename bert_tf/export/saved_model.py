"""SavedModel export of BERT task models for TF Serving, with tensor and raw-text signatures.

`export_task_model(model, task, export_dir, ...)` writes `export_dir/<version>/` (the TF Serving layout): first
into a temporary directory beside it, renamed when complete; an existing version is refused unless
`overwrite=True`. `export_from_checkpoint(...)` builds the task model, loads an original TF1 or bert-tf
checkpoint (refusing one that lacks the task head) and exports it; `run_scripts/export_saved_model.py` is its CLI.

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
import contextlib
import json
import os
import shutil

import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.data import fileio, label_lists, lengths
from bert_tf.model import task_models
from bert_tf.text import core_ops, preprocessing

# The exportable tasks: their models, the heads an export needs from the checkpoint, their outputs and those with a
# sequence axis (under use_xla computed on the inputs padded to a rounded length and cut back to the length sent)
# are `task_models.REGISTRY`'s.
TASKS = ("encoder", "classifier", "squad", "ner", "pretraining", "masked_lm", "embedding")
_PRETRAINING = ("pretraining", "masked_lm")  # the tasks with masked_lm_positions among their inputs
TEXT_OPS = ("tf_text", "core", "none")
_TENSOR_INPUTS = ("input_ids", "input_mask", "segment_ids")


# --- building and loading ----------------------------------------------------------------------------------

def build_task_model(config, task, num_labels=None, restored=False, **options):
    """The Keras model of `task` (one of TASKS), built (variables created). `num_labels` for classifier and ner;
    `restored`: the caller restores its encoder next (see `encoder.BertModel`); `options`: the task's (the
    embedding's pooling and normalize; `task_models.build_task_model`)."""
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    return task_models.build_task_model(task, config, num_labels, restored, **options)


def load_checkpoint(model, task, init_checkpoint, num_labels=None):
    """Loads an original TF1 checkpoint or a bert-tf one into the `task` model (`checkpoints.restore`).

    Raises ValueError naming the task if the checkpoint lacks the task's head, its encoder does not fit, or its head
    has another label count (`num_labels`, as given by --num_labels / --label_list). Returns the checkpoint prefix.
    """
    with _naming_the_task(task, init_checkpoint, num_labels):
        return checkpoints.restore(model, init_checkpoint, required_heads=task_models.REGISTRY[task].heads).checkpoint


@contextlib.contextmanager
def _naming_the_task(task, init_checkpoint, num_labels):
    """A ValueError raised in the block, prefixed with the task model and label count it loaded into."""
    try:
        yield
    except ValueError as e:
        labels = f" (--num_labels / --label_list gave {num_labels})" if num_labels else ""
        raise ValueError(f"Cannot load {init_checkpoint} into the {task} model{labels}: {e}") from e


def load_task_model(task, init_checkpoint, bert_config_file=None, vocab_file=None, do_lower_case=None,
                    max_seq_length=128, num_labels=None, **options):
    """The `task` model with `init_checkpoint` loaded (`checkpoints.load_pretrained`: any format it reads; a TF Hub
    model needs no bert_config_file, vocab_file or do_lower_case), after checking that the config fits the
    vocabulary and `max_seq_length`. Raises ValueError naming the task if the checkpoint lacks the task's head,
    its encoder does not fit, or its head has another label count (`num_labels`). `options`: the task's
    (`build_task_model`).
    Returns: checkpoints.Pretrained (the model, and the vocab_file and casing to export with it)."""
    if not init_checkpoint:
        raise ValueError(f"The {task} export needs --init_checkpoint.")
    loaded = checkpoints.load_pretrained(init_checkpoint=init_checkpoint, bert_config_file=bert_config_file,
                                         vocab_file=vocab_file, do_lower_case=do_lower_case,
                                         max_seq_length=max_seq_length)
    with _naming_the_task(task, init_checkpoint, num_labels):
        loaded.build_model(lambda config, restored: build_task_model(config, task, num_labels, restored, **options),
                           task_models.REGISTRY[task].heads)
    return loaded


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


# --- writing a version directory ---------------------------------------------------------------------------

def version_dir(export_dir, version, overwrite=False):
    """`export_dir/<version>` for a positive integer version; FileExistsError if it exists and not `overwrite`.
    What a killed export left in export_dir is cleaned up first (`fileio.remove_stale_temporaries`: a version it
    was replacing is put back), so that the answer holds for the export that follows."""
    version = int(version)
    if version < 1:
        raise ValueError(f"version must be a positive integer, got {version}.")
    if os.path.isdir(export_dir):
        fileio.remove_stale_temporaries(export_dir)
    final_dir = os.path.join(export_dir, str(version))
    if os.path.exists(final_dir) and not overwrite:
        raise FileExistsError(f"{final_dir} already exists: pass a new --version or --overwrite.")
    return final_dir


def write_version(export_dir, version, overwrite, vocab_file, write):
    """Writes a SavedModel to `export_dir/<version>` atomically and returns that path.

    `write(src_dir, vocab_copy, saved_dir)` saves the SavedModel to `saved_dir`, inside a staging directory beside
    the version (`fileio.temp_dir`); `src_dir` (same staging directory) holds `vocab_copy`, a copy of `vocab_file`
    named vocab.txt (the source of the `assets/vocab.txt` asset), and any other asset source `write` puts there.
    The finished model replaces the version directory as a whole (`fileio.replace_directory`: an export killed
    half-way is rolled back by the next one's `version_dir`); the staging directory is removed whatever happens.
    """
    final_dir = version_dir(export_dir, version, overwrite)
    if not vocab_file or not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab_file {vocab_file!r} does not exist.")
    staging = fileio.temp_dir(export_dir, f"export_{int(version)}")
    try:
        src_dir = os.path.join(staging, "_src")
        os.makedirs(src_dir)
        vocab_copy = os.path.join(src_dir, "vocab.txt")
        shutil.copyfile(vocab_file, vocab_copy)
        saved = os.path.join(staging, "model")
        write(src_dir, vocab_copy, saved)
        fileio.replace_directory(saved, final_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final_dir


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
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    module = _ServingModule(model, task, None, labels)
    return tf.function(lambda **inputs: module.outputs(inputs), autograph=False)


def task_labels(model, task, label_list=None):
    """The label names an export of `model` gives its predictions: `label_list` (as `label_lists.resolve` reads
    it) or "0".."L-1" for a classifier or NER head; None for the other tasks and a regression classifier. Raises
    ValueError for a list that does not fit the head or a task that has no labels."""
    if task == "classifier" and getattr(model, "regression", False):
        if label_list:
            raise ValueError("A regression classifier has no labels.")
        return None
    if task in ("classifier", "ner"):
        num_labels = model.num_labels
        labels = label_lists.resolve(label_list) or [str(i) for i in range(num_labels)]
        if len(labels) != num_labels:
            raise ValueError(f"label_list has {len(labels)} labels but the model's head has {num_labels}.")
        return labels
    if label_list:
        raise ValueError(f"A label list does not apply to the {task} task.")
    return None


def given_labels(num_labels=None, label_list=None):
    """(labels, num_labels) of the flags --num_labels and --label_list (as `label_lists.resolve` reads it): the
    list's length is the label count; a --num_labels that disagrees with it is a ValueError."""
    labels = label_lists.resolve(label_list)
    if labels is None:
        return None, num_labels
    if num_labels and num_labels != len(labels):
        raise ValueError(f"--num_labels={num_labels} but the label list has {len(labels)} labels.")
    return labels, len(labels)


def write_metadata(directory, meta):
    """Writes `meta` as `directory`/assets.extra/export_metadata.json."""
    os.makedirs(os.path.join(directory, "assets.extra"), exist_ok=True)
    with open(os.path.join(directory, "assets.extra", "export_metadata.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)


def write_labels(directory, labels):
    path = os.path.join(directory, "labels.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(label + "\n" for label in labels))
    return path


def export_task_model(model, task, export_dir, vocab_file, do_lower_case=True, max_seq_length=128, version=1,
                      overwrite=False, label_list=None, text_ops="tf_text", use_xla=False,
                      pad_to_max_seq_length=False, length_multiple=None):
    """Writes `model` (a built Keras task model) as a TF Serving SavedModel at `export_dir/<version>`.

    Args:
      model: BertModel (task "encoder"), BertClassifier, BertSpanLabeler ("squad"), BertTokenClassifier ("ner")
        or BertPretrainer ("pretraining"), with its weights loaded.
      task: one of TASKS.
      export_dir: the model's base directory; the SavedModel goes to `export_dir/<version>/`.
      vocab_file, do_lower_case, max_seq_length: the text signatures' tokenization and packing.
      version: positive integer version directory.
      overwrite: replace an existing version (else FileExistsError).
      label_list: classifier/ner label names (default "0".."L-1"); saved as assets/labels.txt.
      text_ops: "tf_text", "core" or "none" (see the module docstring).
      use_xla: the model's computation in every signature compiled by XLA (`jit_compile`; see the module
        docstring).
      pad_to_max_seq_length: the text signatures pack every request to max_seq_length (the original's fixed
        shape); default: to its longest text.
      length_multiple: lengths rounded up to a multiple of this (default: 32 with use_xla, where each length
        compiles once, else 1).
    Returns: the path of the written version directory.
    """
    length_multiple = lengths.SequenceLengths.for_run(pad_to_max_seq_length, use_xla, length_multiple).multiple
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    if text_ops not in TEXT_OPS:
        raise ValueError(f"text_ops must be one of {TEXT_OPS}, got {text_ops!r}.")
    version_dir(export_dir, version, overwrite)  # fail before the checks below
    labels = task_labels(model, task, label_list)
    has_text = text_ops != "none" and task not in _PRETRAINING
    signatures = {}

    def write(src_dir, vocab_copy, saved):
        preprocessor = make_preprocessor(vocab_copy, do_lower_case, max_seq_length, text_ops, pad_to_max_seq_length,
                                         length_multiple) if has_text else None
        module = _ServingModule(model, task, vocab_copy, labels, preprocessor, use_xla, length_multiple)
        if labels is not None:
            module.labels_asset = tf.saved_model.Asset(write_labels(src_dir, labels))

        signatures["serving_default"] = tf.function(
            lambda **inputs: module.outputs(inputs)).get_concrete_function(**tensor_specs(task))
        if has_text:
            signatures["serving_text"] = tf.function(
                lambda text_a: module.text_outputs(preprocessor.encode(text_a))).get_concrete_function(
                    tf.TensorSpec([None], tf.string, name="text_a"))
            signatures["serving_text_pair"] = tf.function(
                lambda text_a, text_b: module.text_outputs(preprocessor.encode_pair(text_a, text_b))
            ).get_concrete_function(tf.TensorSpec([None], tf.string, name="text_a"),
                                    tf.TensorSpec([None], tf.string, name="text_b"))
        module.track_variables(signatures.values())
        tf.saved_model.save(module, saved, signatures=signatures)
        meta = {"task": task, "do_lower_case": bool(do_lower_case), "max_seq_length": int(max_seq_length),
                "text_ops": text_ops if has_text else "none", "signatures": sorted(signatures), "use_xla": use_xla,
                "pad_to_max_seq_length": bool(pad_to_max_seq_length), "length_multiple": length_multiple,
                "labels": labels, "bert_config": (model if task == "encoder" else model.bert).config.to_dict()}
        if task == "embedding":
            meta.update(pooling=model.pooling, normalize=model.normalize)
        write_metadata(saved, meta)

    final_dir = write_version(export_dir, version, overwrite, vocab_file, write)
    logging.info("Exported the %s model to %s (signatures: %s)", task, final_dir, ", ".join(sorted(signatures)))
    return final_dir


def export_from_checkpoint(task, bert_config_file, vocab_file, init_checkpoint, export_dir, do_lower_case=None,
                           max_seq_length=128, num_labels=None, label_list=None, version=1, overwrite=False,
                           text_ops="tf_text", use_xla=False, pad_to_max_seq_length=False, length_multiple=None,
                           **options):
    """Loads the task model of `init_checkpoint` (`load_task_model`, with the task's `options`: the embedding's
    pooling and normalize) and exports it (see above)."""
    labels, num_labels = given_labels(num_labels, label_list)
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    version_dir(export_dir, version, overwrite)  # fail before the slow part
    loaded = load_task_model(task, init_checkpoint, bert_config_file, vocab_file, do_lower_case, max_seq_length,
                             num_labels, **options)
    return export_task_model(loaded.model, task, export_dir, loaded.files.vocab_file, loaded.files.do_lower_case,
                             max_seq_length, version, overwrite, label_list=labels, text_ops=text_ops,
                             use_xla=use_xla, pad_to_max_seq_length=pad_to_max_seq_length,
                             length_multiple=length_multiple)
