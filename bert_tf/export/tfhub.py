"""TF Hub SavedModels: the BERT encoder and its text preprocessing in the formats of Model Garden's
`official/nlp/tools/export_tfhub.py` (the format of the BERT models on TF Hub / Kaggle Models).

The format "tfhub" of `bert_tf.export.exporter.export` (`export_dir/<version>/`, committed as a whole like every
export; `write` writes one into the directory it is given). Both load with `hub.load` / `hub.KerasLayer(path)`
(also `trainable=True`) or `tf.saved_model.load`.

Encoder (Model Garden's `--export_type=model`; task "encoder"):

    encoder = hub.load(path)        # or hub.KerasLayer(path, trainable=True)
    outputs = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=types), training=False)

  inputs int32 [B, S]; outputs `sequence_output` [B, S, H], `pooled_output` [B, H], `default` (= pooled_output),
  `encoder_outputs` (list of num_hidden_layers [B, S, H]), float32. `training=True` applies dropout.
  Attributes: `trainable_variables` (the encoder's weights), `variables` (those, `do_lower_case` and the
  dropout layers' seed states), `regularization_losses` (empty), `vocab_file` (asset `assets/vocab.txt`),
  `do_lower_case` (bool tf.Variable, not trainable); `bert_config.json` beside saved_model.pb, so that bert-tf
  takes the export back as an init_checkpoint (the variables keep bert-tf's Keras paths). The signature
  `serving_default` takes the three inputs by name and returns the outputs flattened: `default`,
  `encoder_outputs`, `encoder_outputs_1`, ..., `pooled_output`, `sequence_output` (Model Garden's Keras export
  names the same tensors, in this order, after its internal layer: `bert_encoder_1`, `bert_encoder_1_1`, ...).
  With the masked-LM head (task "masked_lm", Model Garden's `--export_type=model_with_mlm`), the subobject `mlm`
  takes `masked_lm_positions` int32 [B, P] as well and adds `mlm_logits` [B, P, V] (the original's
  `cls/predictions` logits, before the softmax).

Preprocessing (Model Garden's `--export_type=preprocessing`; task "preprocessing"),
with bert-tf's in-graph tokenizer (`bert_tf.text.in_graph`: the ids of the original `FullTokenizer`):

    preprocessor = hub.load(path)
    preprocessor(sentences)                      # string [B] -> the dict above at seq_length (default 128)
    preprocessor.tokenize(sentences)             # int32 RaggedTensor [B, (words), (wordpieces)]
    preprocessor.tokenize.get_special_tokens_dict()  # vocab_size, start_of_sequence_id, end_of_segment_id,
                                                     # padding_id, mask_id (int32 scalars; absent tokens omitted)
    preprocessor.bert_pack_inputs([tokens_a, tokens_b], seq_length=...)  # 1 or 2 segments, ragged rank 1 or 2

  Packing follows the original `convert_single_example`, not Model Garden's `BertPackInputs` where they differ:
  pairs are truncated by the original's `_truncate_seq_pair`, and a row whose second segment is empty is packed
  as `[CLS] a [SEP]` with up to seq_length - 2 tokens of a (Model Garden packs `[CLS] a [SEP] [SEP]`); padding is
  id 0 as in the original. Loading it needs `import tensorflow_text` (as Model Garden's does). The root call and
  `tokenize` refuse a batch over the export's text limits (options max_texts_per_request and max_request_bytes,
  as for `bert_tf.export.saved_model`), e.g. a `Dataset.batch` of more than max_texts_per_request sentences.
"""
import dataclasses
import os

import tensorflow as tf

from bert_tf.export import saved_model
from bert_tf.text import core_ops, in_graph, preprocessing, tokenization

TASKS = ("encoder", "masked_lm", "preprocessing")
# TF Hub input names -> bert-tf's encoder input names.
HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask", "input_type_ids": "segment_ids"}
# get_special_tokens_dict() keys -> tokens, as Model Garden's BertTokenizer names them.
SPECIAL_TOKENS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]", "padding_id": "[PAD]",
                  "mask_id": "[MASK]"}


# --- encoder -----------------------------------------------------------------------------------------------

def _input_specs(with_masked_lm):
    specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in HUB_INPUTS}
    if with_masked_lm:
        specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
    return specs


def _callable(function):
    """A trackable object whose `__call__` is `function` (a tf.function), as Model Garden attaches functions."""
    obj = tf.train.Checkpoint()
    obj.__call__ = function
    return obj


def _set_reusable_attributes(obj, variables=()):
    """The attributes of TF Hub's Reusable SavedModel API (`hub.KerasLayer` reads them): `variables`,
    `trainable_variables` (those of `variables` that are trainable) and `regularization_losses` (none)."""
    obj.variables = list(variables)
    obj.trainable_variables = [v for v in variables if v.trainable]
    obj.regularization_losses = []


class _Encoder(tf.train.Checkpoint):
    """A Reusable SavedModel object: `__call__(inputs, training=False)` over the encoder (and the masked-LM head),
    with `variables`, `trainable_variables` (the tf.Variables its two traces read) and `regularization_losses`."""

    def __init__(self, bert, masked_lm=None):
        super().__init__()
        self._bert = core_ops.Untracked(bert)
        self._masked_lm = core_ops.Untracked(masked_lm)
        specs = _input_specs(masked_lm is not None)
        functions = [self.__call__.get_concrete_function(specs, training=t) for t in (False, True)]
        _set_reusable_attributes(self, saved_model.function_variables(functions))

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        """inputs: dict of int32 [B, S] (+ masked_lm_positions [B, P] for `mlm`) -> the dict of outputs."""
        encoded = self._bert.obj({ours: inputs[hub] for hub, ours in HUB_INPUTS.items()}, training=training)
        outputs = {"sequence_output": encoded["sequence_output"], "pooled_output": encoded["pooled_output"],
                   "encoder_outputs": list(encoded["encoder_outputs"])}
        if self._masked_lm.obj is None:
            outputs["default"] = encoded["pooled_output"]
        else:
            outputs["mlm_logits"] = self._masked_lm.obj(encoded["sequence_output"], inputs["masked_lm_positions"])
        return outputs

    def serving_signature(self):
        """The `serving_default` concrete function: named inputs, a flat dict of outputs."""
        def flat(**inputs):
            outputs = self.__call__(inputs, training=False)
            layers = outputs.pop("encoder_outputs")
            outputs.update({"encoder_outputs" + (f"_{i}" if i else ""): t for i, t in enumerate(layers)})
            return outputs
        return tf.function(flat, autograph=False).get_concrete_function(
            **_input_specs(self._masked_lm.obj is not None))


def _write_encoder(model, sources, out):
    """Writes the TF Hub encoder SavedModel of `model` into `out`: a built `BertModel` or task model (its `.bert`;
    a `BertPretrainer`'s masked-LM head becomes the `mlm` subobject), weights loaded, with `sources.vocab_file` as the
    `vocab_file` asset and `sources.do_lower_case` as the `do_lower_case` variable (exporter.Sources)."""
    bert, masked_lm = getattr(model, "bert", model), getattr(model, "masked_lm", None)
    root = _Encoder(bert)
    if masked_lm is not None:
        root.mlm = _Encoder(bert, masked_lm)
    root.vocab_file = tf.saved_model.Asset(sources.vocab_file)
    root.do_lower_case = tf.Variable(sources.do_lower_case, trainable=False, name="do_lower_case")
    root.variables.append(root.do_lower_case)  # as in Model Garden's export (a Keras model tracks it)
    tf.saved_model.save(root, out, signatures={"serving_default": root.serving_signature()})
    # Beside saved_model.pb, for bert-tf to load the export as an init_checkpoint (its variables keep bert-tf's
    # Keras paths and [H, H] kernels, which do not tell the number of heads); TF Hub ignores the file.
    bert.config.to_json_file(os.path.join(out, "bert_config.json"))


# --- preprocessing -----------------------------------------------------------------------------------------

class _Tokenize(tf.train.Checkpoint):
    def __init__(self, tokenizer, special_tokens):
        super().__init__()
        self.tokenizer = tokenizer
        _set_reusable_attributes(self)
        self.get_special_tokens_dict = _callable(tf.function(
            lambda: {name: tf.constant(value, tf.int32) for name, value in special_tokens.items()},
            input_signature=[]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")], autograph=False)
    def __call__(self, sentences):
        """string [B] -> int32 RaggedTensor [B, (words), (wordpieces)]."""
        return self.tokenizer.tokenize_words(sentences)


def pack_segments(segments, seq_length, cls_id, sep_id):
    """`bert_pack_inputs`: a list of 1 or 2 int32 RaggedTensors [B, (tokens)] or [B, (words), (tokens)] -> dict of
    int32 [B, seq_length] `input_word_ids`, `input_mask`, `input_type_ids` (`preprocessing.pack_inputs`)."""
    if not isinstance(segments, (list, tuple)):
        segments = [segments]
    if len(segments) not in (1, 2):
        raise ValueError(f"bert_pack_inputs packs 1 or 2 segments (the original's text_a, text_b), "
                         f"got {len(segments)}.")
    flat = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    packed = preprocessing.pack_inputs(*flat, max_seq_length=seq_length, cls_id=cls_id, sep_id=sep_id)
    return {hub: packed[ours] for hub, ours in HUB_INPUTS.items()}


def _pack_inputs_function(cls_id, sep_id, default_seq_length):
    """`bert_pack_inputs(segments, seq_length=<default>)`, traced for 1 and 2 segments of ragged rank 1 and 2 with
    a scalar int32 seq_length, as Model Garden's `BertPackInputsSavedModelWrapper`."""
    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=default_seq_length):
        return pack_segments(inputs, seq_length, cls_id, sep_id)

    for ragged_rank in (1, 2):
        for num_segments in (1, 2):
            bert_pack_inputs.get_concrete_function(
                [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32) for _ in range(num_segments)],
                seq_length=tf.TensorSpec([], tf.int32))
    return bert_pack_inputs


class _Preprocessor(tf.train.Checkpoint):
    def __init__(self, tokenizer, seq_length):
        super().__init__()
        vocab = tokenization.load_vocab(tokenizer.vocab_file)
        special = {"vocab_size": tokenizer.vocab_size}
        special.update({name: vocab[token] for name, token in SPECIAL_TOKENS.items() if token in vocab})
        self.tokenize = _Tokenize(tokenizer, special)
        _set_reusable_attributes(self)
        self._pack = _pack_inputs_function(tokenizer.cls_id, tokenizer.sep_id, seq_length)
        self.bert_pack_inputs = _callable(self._pack)
        self._seq_length = seq_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")], autograph=False)
    def __call__(self, sentences):
        """string [B] -> dict of int32 [B, seq_length] `input_word_ids`, `input_mask`, `input_type_ids`."""
        return self._pack([self.tokenize(sentences)], seq_length=self._seq_length)


def _write_preprocessing(sources, seq_length, limits, out):
    """Writes the TF Hub preprocessing SavedModel (see the module docstring) of `sources.vocab_file` and
    `sources.do_lower_case` (exporter.Sources; the vocabulary is also saved as the `vocab_file` asset) into `out`;
    `seq_length`: the length the root call packs to, and `bert_pack_inputs`'s default (>= 3); `limits`: the
    `in_graph.TextLimits` that `tokenize` checks each batch against."""
    root = _Preprocessor(in_graph.InGraphTokenizer(sources.vocab_file, do_lower_case=sources.do_lower_case,
                                                   limits=limits), int(seq_length))
    root.vocab_file = tf.saved_model.Asset(sources.vocab_file)
    # The function, not a concrete function traced here: save traces it in its own context, where it also lists the
    # tokenizer's functions, so that each is traced and written once (see bert_tf.export.saved_model.write).
    tf.saved_model.save(root, out, signatures={"serving_default": root.__call__})


def write(model, request, sources, out):
    """The format "tfhub" (and the preprocessing model of every format): task "encoder" or "masked_lm" (the
    encoder with the `mlm` subobject) writes `model`'s encoder, "preprocessing" the preprocessing model at
    `request.max_seq_length`, into the directory `out`. Returns the settings for the export's metadata: the
    preprocessing model's text limits."""
    if request.task == "preprocessing":
        _write_preprocessing(sources, request.max_seq_length, request.text_limits, out)
        return dataclasses.asdict(request.text_limits)
    _write_encoder(model, sources, out)
    return {}
