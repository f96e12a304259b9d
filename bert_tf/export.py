"""SavedModel export of BERT task models for TF Serving, with tensor and raw-text signatures.

`export_task_model(model, task, export_dir, ...)` writes `export_dir/<version>/` (the TF Serving layout): first
into a temporary directory beside it, renamed when complete; an existing version is refused unless
`overwrite=True`. `export_from_checkpoint(...)` builds the task model, loads an original TF1 or bert-tf
checkpoint (refusing one that lacks the task head) and exports it; `run_scripts/export_saved_model.py` is its CLI.

Signatures (named inputs and outputs; batch-major, any batch size):

| signature           | inputs                                                    | outputs                          |
|---------------------|-----------------------------------------------------------|----------------------------------|
| `serving_default`   | int32 `input_ids`, `input_mask`, `segment_ids` [B, S]      | the task's outputs (below)       |
|                     | (+ int32 `masked_lm_positions` [B, P] for pretraining)     |                                  |
| `serving_text`      | string `text_a` [B]                                        | the task's outputs + the packed  |
| `serving_text_pair` | string `text_a`, `text_b` [B] (an empty `text_b` row is    | `input_ids`, `input_mask`,       |
|                     | packed as a single segment, as the original does)          | `segment_ids` [B, max_seq_length]|

Task outputs: encoder `sequence_output` [B,S,H], `pooled_output` [B,H]; classifier `logits`, `probabilities`
[B,L] and `predicted_label` (string [B]) (a regression
classifier: `logits` [B,1], `predictions` [B]); squad `start_logits`, `end_logits` [B,S]; ner `logits`,
`probabilities` [B,S,L] and `predicted_labels` (string [B,S]); pretraining `masked_lm_logits` [B,P,V],
`next_sentence_logits` [B,2], `sequence_output`, `pooled_output`. The pretraining model has no text signature.

The text signatures tokenize and pack in graph exactly like the Python pipeline (`FullTokenizer` + the original
`convert_single_example` truncation). `text_ops` chooses how:

* `"tf_text"` (default): `bert_tf.text.InGraphPreprocessor` (TensorFlow Text ops; fastest). Loading the model
  needs `import tensorflow_text` first, and TF Serving needs a build with the TF Text ops.
* `"core"`: only core TensorFlow ops (the code-point basic tokenizer of `bert_tf.text` plus a greedy WordPiece
  loop over a `StaticHashTable`), so stock `tensorflow/serving` and a plain `import tensorflow` load it.
* `"none"`: no text signatures (tensor signature only).

Assets (under `assets/`): `vocab.txt` (the vocabulary), and `labels.txt` for the classifier and NER (one label
per line). `export_metadata.json` in assets.extra describes task, signatures and settings.
"""
import json
import os
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, heads, tokenization
from bert_tf.config import BertConfig

TASKS = ("encoder", "classifier", "squad", "ner", "pretraining")
TEXT_OPS = ("tf_text", "core", "none")
# The heads (attributes, keys of checkpoints.TASK_HEADS) each task's export needs from its checkpoint.
_REQUIRED_HEADS = {"encoder": (), "classifier": ("classifier",), "squad": ("span",), "ner": ("tagger",),
                   "pretraining": ("masked_lm", "next_sentence")}
_OUTPUTS = {
    "encoder": ("sequence_output", "pooled_output"),
    "classifier": ("logits", "probabilities"),
    "squad": ("start_logits", "end_logits"),
    "ner": ("logits", "probabilities"),
    "pretraining": ("masked_lm_logits", "next_sentence_logits", "sequence_output", "pooled_output"),
}
_TENSOR_INPUTS = ("input_ids", "input_mask", "segment_ids")


# --- building and loading ----------------------------------------------------------------------------------

def build_task_model(config, task, num_labels=None):
    """The Keras model of `task`, built (variables created). `num_labels` for classifier and ner."""
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    if task in ("classifier", "ner") and (not num_labels or num_labels < 1):
        raise ValueError(f"The {task} task needs num_labels >= 1 (--num_labels or --label_list).")
    if task == "encoder":
        return checkpoints.build_bert_model(config)
    model = {"classifier": lambda: heads.BertClassifier(config, num_labels),
             "squad": lambda: heads.BertSpanLabeler(config),
             "ner": lambda: heads.BertTokenClassifier(config, num_labels),
             "pretraining": lambda: heads.BertPretrainer(config)}[task]()
    dummy = tf.zeros((1, 2), tf.int32)
    inputs = {"input_ids": dummy, "input_mask": tf.ones_like(dummy), "segment_ids": dummy}
    if task == "pretraining":
        inputs["masked_lm_positions"] = tf.zeros((1, 1), tf.int32)
    model(inputs)
    return model


def load_checkpoint(model, task, init_checkpoint, num_labels=None):
    """Loads an original TF1 checkpoint or a bert-tf one into the `task` model (`checkpoints.restore`).

    Raises ValueError naming the task if the checkpoint lacks the task's head, its encoder does not fit, or its head
    has another label count (`num_labels`, as given by --num_labels / --label_list). Returns the checkpoint prefix.
    """
    try:
        return checkpoints.restore(model, init_checkpoint, required_heads=_REQUIRED_HEADS[task]).checkpoint
    except ValueError as e:
        labels = f" (--num_labels / --label_list gave {num_labels})" if num_labels else ""
        raise ValueError(f"Cannot load {init_checkpoint} into the {task} model{labels}: {e}") from e


def read_label_list(label_list):
    """Labels from a list, a comma-separated string, or a file with one label per line (None -> None)."""
    if label_list is None:
        return None
    if isinstance(label_list, (list, tuple)):
        labels = [str(label) for label in label_list]
    elif os.path.isfile(label_list):
        with open(label_list, encoding="utf-8") as f:
            labels = [line.strip() for line in f if line.strip()]
    else:
        labels = [label.strip() for label in label_list.split(",") if label.strip()]
    if not labels:
        raise ValueError(f"Empty label list: {label_list!r}.")
    if len(set(labels)) != len(labels):
        raise ValueError(f"Duplicate labels in {labels}.")
    return labels


# --- core-TF tokenization ----------------------------------------------------------------------------------

class _Untracked:
    """Holds an object without tf.Module / SavedModel tracking."""

    def __init__(self, obj):
        self.obj = obj


class CoreWordpieceTokenizer(tf.Module):
    """`FullTokenizer` in core TensorFlow ops only (no TensorFlow Text op), for stock TF Serving.

    Basic tokenization is `bert_tf.text.InGraphTokenizer`'s code-point route (core ops over Unicode tables taken
    from Python's `unicodedata`); WordPiece is the original greedy longest-match-first loop, run for all words at
    once in a `tf.while_loop`, against a `tf.lookup.StaticHashTable` of the vocabulary as `load_vocab` reads it.
    """

    def __init__(self, vocab_file, do_lower_case=True, unk_token="[UNK]", max_input_chars_per_word=200,
                 name=None):
        super().__init__(name=name)
        from bert_tf import text  # TensorFlow Text is needed to build (not to run) the tokenizer
        # Only its code-point route (core ops over constant tables) is used; kept out of the tracked objects so
        # that none of its TensorFlow Text functions lands in the SavedModel.
        self._basic = _Untracked(text.InGraphTokenizer(vocab_file, do_lower_case, unk_token,
                                                       max_input_chars_per_word))
        vocab = tokenization.load_vocab(vocab_file)
        self.vocab_file = os.fspath(vocab_file)
        self.unk_id, self.cls_id, self.sep_id = vocab[unk_token], vocab["[CLS]"], vocab["[SEP]"]
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        longest = max(len(t[2:]) if t.startswith("##") else len(t) for t in vocab)
        self.max_piece_chars = max(1, min(longest, self.max_input_chars_per_word))
        keys = list(vocab)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(keys, tf.string),
                                                tf.constant([vocab[k] for k in keys], tf.int32)),
            default_value=-1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        """WordPiece ids: int32 RaggedTensor [batch, (num_wordpieces)]."""
        words, word_rows, num_rows = self._basic.obj._unicode_words(strings)
        pieces = self._wordpiece(words)
        return tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=num_rows, validate=False).merge_dims(1, 2)

    def _wordpiece(self, words):
        """words: int32 code points [W, (chars)] -> ids [W, (pieces)]."""
        strings = tf.strings.unicode_encode(words, "UTF-8")
        lens = tf.cast(words.row_lengths(), tf.int32)
        num_words = tf.shape(lens)[0]
        too_long = lens > self.max_input_chars_per_word
        max_steps = tf.minimum(tf.reduce_max(tf.concat([lens, [0]], 0)), self.max_input_chars_per_word)
        k = tf.range(1, self.max_piece_chars + 1, dtype=tf.int32)[None, :]  # candidate piece lengths

        def body(step, start, active, failed, out):
            rows = tf.where(active)[:, 0]  # only the words still being split
            word_start = tf.gather(start, rows)
            word_len = tf.gather(lens, rows)
            sub = tf.strings.substr(tf.tile(tf.gather(strings, rows)[:, None], [1, self.max_piece_chars]),
                                    tf.tile(word_start[:, None], [1, self.max_piece_chars]),
                                    tf.broadcast_to(k, [tf.size(rows), self.max_piece_chars]), unit="UTF8_CHAR")
            keys = tf.where(word_start[:, None] > 0, tf.strings.join(["##", sub]), sub)
            ids = self._table.lookup(keys)
            ok = (ids >= 0) & (word_start[:, None] + k <= word_len[:, None])
            best = tf.reduce_max(tf.where(ok, k, 0), axis=1)  # the longest match from `start`
            matched = best > 0
            piece = tf.gather(ids, tf.maximum(best - 1, 0), batch_dims=1)
            rows32 = tf.cast(rows, tf.int32)[:, None]
            out = tf.tensor_scatter_nd_update(out, tf.concat([rows32, tf.fill(tf.shape(rows32), step)], 1),
                                              tf.where(matched, piece, -1))
            failed = tf.tensor_scatter_nd_update(failed, rows32, ~matched)
            new_start = word_start + best
            start = tf.tensor_scatter_nd_update(start, rows32, new_start)
            active = tf.tensor_scatter_nd_update(active, rows32, matched & (new_start < word_len))
            return step + 1, start, active, failed, out

        out = tf.fill([num_words, max_steps], -1)
        _, _, _, failed, out = tf.while_loop(
            lambda step, start, active, failed, out: tf.reduce_any(active), body,
            (tf.constant(0), tf.zeros_like(lens), ~too_long & (lens > 0), too_long, out),
            maximum_iterations=max_steps)
        unk = tf.where(failed, self.unk_id, -1)[:, None]
        values = tf.concat([unk, tf.where(failed[:, None], -1, out)], axis=1)
        return tf.ragged.boolean_mask(values, values >= 0)


class CorePreprocessor(tf.Module):
    """Raw text -> packed inputs with core TF ops only (`CoreWordpieceTokenizer` + `bert_tf.text.pack_inputs`)."""

    def __init__(self, vocab_file, do_lower_case=True, max_seq_length=128, name=None):
        super().__init__(name=name)
        self.tokenizer = CoreWordpieceTokenizer(vocab_file, do_lower_case)
        self.max_seq_length = int(max_seq_length)

    def __call__(self, text_a, text_b=None):
        return self.encode(text_a) if text_b is None else self.encode_pair(text_a, text_b)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def encode(self, text_a):
        from bert_tf.text import pack_inputs
        tok = self.tokenizer
        return pack_inputs(tok.tokenize(text_a), max_seq_length=self.max_seq_length, cls_id=tok.cls_id,
                           sep_id=tok.sep_id)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2, autograph=False)
    def encode_pair(self, text_a, text_b):
        from bert_tf.text import pack_inputs
        tok = self.tokenizer
        return pack_inputs(tok.tokenize(text_a), tok.tokenize(text_b), max_seq_length=self.max_seq_length,
                           cls_id=tok.cls_id, sep_id=tok.sep_id)


def make_preprocessor(vocab_file, do_lower_case, max_seq_length, text_ops="tf_text"):
    """The in-graph text -> inputs module the text signatures use (see the module docstring)."""
    if text_ops == "tf_text":
        from bert_tf import text
        return text.InGraphPreprocessor(vocab_file, do_lower_case, max_seq_length)
    if text_ops == "core":
        return CorePreprocessor(vocab_file, do_lower_case, max_seq_length)
    raise ValueError(f"text_ops must be one of {TEXT_OPS} for a preprocessor, got {text_ops!r}.")


# --- the serving module ------------------------------------------------------------------------------------

class _ServingModule(tf.Module):
    def __init__(self, model, task, vocab_file, labels, preprocessor):
        super().__init__()
        # The Keras model is not tracked itself: the tf.Variables its traced functions read are, as a flat list
        # (see `track_variables`, as keras.export does), so that the TF1 loader TF Serving and saved_model_cli
        # use restores every variable a signature reads.
        self._model = _Untracked(model)
        self.task = task
        self.output_names = _OUTPUTS[task]
        if task == "classifier" and getattr(model, "regression", False):
            self.output_names = ("logits", "predictions")  # STS-B style regression: no labels
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.preprocessor = preprocessor
        self._labels = labels
        if labels is not None:
            self.labels = tf.constant(labels, tf.string)

    def track_variables(self, concrete_functions):
        seen, variables = set(), []
        for fn in concrete_functions:
            for v in fn.variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    variables.append(v)
        self.model_variables = variables

    def outputs(self, inputs):
        result = self._model.obj(inputs, training=False)
        out = {name: tf.identity(result[name], name=name) for name in self.output_names}
        if self._labels is not None:
            predicted = tf.gather(self.labels, tf.argmax(out["logits"], axis=-1, output_type=tf.int32))
            out["predicted_label" if self.task == "classifier" else "predicted_labels"] = predicted
        return out

    def text_outputs(self, packed):
        out = self.outputs(packed)
        out.update({name: tf.identity(packed[name]) for name in _TENSOR_INPUTS})
        return out


def _write_labels(directory, labels):
    path = os.path.join(directory, "labels.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(label + "\n" for label in labels))
    return path


def export_task_model(model, task, export_dir, vocab_file, do_lower_case=True, max_seq_length=128, version=1,
                      overwrite=False, label_list=None, text_ops="tf_text"):
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
    Returns: the path of the written version directory.
    """
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    if text_ops not in TEXT_OPS:
        raise ValueError(f"text_ops must be one of {TEXT_OPS}, got {text_ops!r}.")
    version = int(version)
    if version < 1:
        raise ValueError(f"version must be a positive integer, got {version}.")
    if not vocab_file or not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab_file {vocab_file!r} does not exist.")
    final_dir = os.path.join(export_dir, str(version))
    if os.path.exists(final_dir) and not overwrite:
        raise FileExistsError(f"{final_dir} already exists: pass a new --version or --overwrite.")
    labels = None
    if task == "classifier" and getattr(model, "regression", False):
        if label_list:
            raise ValueError("A regression classifier has no labels.")
    elif task in ("classifier", "ner"):
        num_labels = model.num_labels
        labels = read_label_list(label_list) or [str(i) for i in range(num_labels)]
        if len(labels) != num_labels:
            raise ValueError(f"label_list has {len(labels)} labels but the model's head has {num_labels}.")
    elif label_list:
        raise ValueError(f"A label list does not apply to the {task} task.")

    os.makedirs(export_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".tmp_export_{version}_", dir=export_dir)
    try:
        extra = os.path.join(staging, "_src")
        os.makedirs(extra)
        vocab_copy = os.path.join(extra, "vocab.txt")
        shutil.copyfile(vocab_file, vocab_copy)
        has_text = text_ops != "none" and task != "pretraining"
        preprocessor = make_preprocessor(vocab_copy, do_lower_case, max_seq_length, text_ops) if has_text else None
        module = _ServingModule(model, task, vocab_copy, labels, preprocessor)
        if labels is not None:
            module.labels_asset = tf.saved_model.Asset(_write_labels(extra, labels))

        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _TENSOR_INPUTS}
        if task == "pretraining":
            specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
        serving_default = tf.function(lambda **inputs: module.outputs(inputs)).get_concrete_function(**specs)
        signatures = {"serving_default": serving_default}
        if has_text:
            signatures["serving_text"] = tf.function(
                lambda text_a: module.text_outputs(preprocessor.encode(text_a))).get_concrete_function(
                    tf.TensorSpec([None], tf.string, name="text_a"))
            signatures["serving_text_pair"] = tf.function(
                lambda text_a, text_b: module.text_outputs(preprocessor.encode_pair(text_a, text_b))
            ).get_concrete_function(tf.TensorSpec([None], tf.string, name="text_a"),
                                    tf.TensorSpec([None], tf.string, name="text_b"))
        module.track_variables(signatures.values())
        saved = os.path.join(staging, "model")
        tf.saved_model.save(module, saved, signatures=signatures)
        meta = {"task": task, "do_lower_case": bool(do_lower_case), "max_seq_length": int(max_seq_length),
                "text_ops": text_ops if has_text else "none", "signatures": sorted(signatures),
                "labels": labels, "bert_config": (model if task == "encoder" else model.bert).config.to_dict()}
        os.makedirs(os.path.join(saved, "assets.extra"), exist_ok=True)
        with open(os.path.join(saved, "assets.extra", "export_metadata.json"), "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        if os.path.exists(final_dir):
            old = tempfile.mkdtemp(prefix=f".old_{version}_", dir=export_dir)
            os.replace(final_dir, os.path.join(old, "v"))
            os.replace(saved, final_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(saved, final_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logging.info("Exported the %s model to %s (signatures: %s)", task, final_dir, ", ".join(sorted(signatures)))
    return final_dir


def export_from_checkpoint(task, bert_config_file, vocab_file, init_checkpoint, export_dir, do_lower_case=True,
                           max_seq_length=128, num_labels=None, label_list=None, version=1, overwrite=False,
                           text_ops="tf_text"):
    """Builds the task model from bert_config.json, loads `init_checkpoint` and exports it (see above)."""
    labels = read_label_list(label_list)
    if labels is not None:
        if num_labels and num_labels != len(labels):
            raise ValueError(f"--num_labels={num_labels} but the label list has {len(labels)} labels.")
        num_labels = len(labels)
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(TASKS)}.")
    final_dir = os.path.join(export_dir, str(int(version)))
    if os.path.exists(final_dir) and not overwrite:  # fail before the slow part
        raise FileExistsError(f"{final_dir} already exists: pass a new --version or --overwrite.")
    config = BertConfig.from_json_file(bert_config_file)
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(f"max_seq_length={max_seq_length} exceeds max_position_embeddings="
                         f"{config.max_position_embeddings} of {bert_config_file}.")
    checkpoints.check_vocab_size(config, tokenization.load_vocab(vocab_file), vocab_file)
    model = build_task_model(config, task, num_labels)
    load_checkpoint(model, task, init_checkpoint, num_labels)
    return export_task_model(model, task, export_dir, vocab_file, do_lower_case, max_seq_length, version,
                             overwrite, label_list=labels, text_ops=text_ops)
