"""The format "tfhub" of `exporter.export`: the BERT encoder and its preprocessing as Model Garden's
`official/nlp/tools/export_tfhub.py` writes them (TF Hub's BERT models; their API: docs/serving.md), for `hub.load`,
`hub.KerasLayer(path, trainable=True)` or `tf.saved_model.load`.

The encoder (task "encoder"; "masked_lm" adds the subobject `mlm`) has the Reusable SavedModel attributes, the
`vocab_file` asset, `do_lower_case`, a flat `serving_default`, and bert_config.json (so the export is an
init_checkpoint). The preprocessing model (task "preprocessing") gives the original FullTokenizer's ids and packs as
the original `convert_single_example` where Model Garden's differs; its call and `tokenize` refuse a batch over the
text limits.
"""
import os

import tensorflow as tf

from bert_tf.export import saved_model
from bert_tf.text import in_graph, preprocessing, tokenization

TASKS = ("encoder", "masked_lm", "preprocessing")
# TF Hub input names -> bert-tf's encoder input names.
HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask", "input_type_ids": "segment_ids"}
# get_special_tokens_dict() keys -> tokens, as Model Garden's BertTokenizer names them.
SPECIAL_TOKENS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]", "padding_id": "[PAD]",
                  "mask_id": "[MASK]"}


def _input_specs(with_masked_lm):
    names = (*HUB_INPUTS, "masked_lm_positions") if with_masked_lm else HUB_INPUTS
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


def _callable(function):
    """A trackable object whose `__call__` is `function` (a tf.function), as Model Garden attaches functions."""
    obj = tf.train.Checkpoint()
    obj.__call__ = function
    return obj


def _set_reusable_attributes(obj, variables=()):
    """Sets TF Hub's Reusable SavedModel attributes (`hub.KerasLayer` reads them): `variables`, `trainable_variables`,
    `regularization_losses` (none)."""
    obj.variables = list(variables)
    obj.trainable_variables = [v for v in variables if v.trainable]
    obj.regularization_losses = []


class _Encoder(tf.train.Checkpoint):
    """A Reusable SavedModel object: `__call__(inputs, training=False)` over the encoder (and the masked-LM head)."""

    def __init__(self, bert, masked_lm=None):
        super().__init__()
        # bound methods: not tracked (the variables are, as the reusable attributes)
        self._bert = bert.__call__
        self._masked_lm = masked_lm.__call__ if masked_lm is not None else None
        specs = _input_specs(masked_lm is not None)
        functions = [self.__call__.get_concrete_function(specs, training=t) for t in (False, True)]
        _set_reusable_attributes(self, saved_model.function_variables(functions))

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        """inputs: dict of int32 [B, S] (+ masked_lm_positions [B, P] for `mlm`) -> the dict of outputs."""
        encoded = self._bert({ours: inputs[hub] for hub, ours in HUB_INPUTS.items()}, training=training)
        outputs = {"sequence_output": encoded["sequence_output"], "pooled_output": encoded["pooled_output"],
                   "encoder_outputs": list(encoded["encoder_outputs"])}
        if self._masked_lm is None:
            outputs["default"] = encoded["pooled_output"]
        else:
            outputs["mlm_logits"] = self._masked_lm(encoded["sequence_output"], inputs["masked_lm_positions"])
        return outputs

    def serving_signature(self):
        """The `serving_default` concrete function: named inputs, a flat dict of outputs."""
        def flat(**inputs):
            outputs = self.__call__(inputs, training=False)
            layers = outputs.pop("encoder_outputs")
            outputs.update({"encoder_outputs" + (f"_{i}" if i else ""): t for i, t in enumerate(layers)})
            return outputs
        return tf.function(flat, autograph=False).get_concrete_function(
            **_input_specs(self._masked_lm is not None))


def write_encoder(out, model, vocab_file, do_lower_case):
    """Writes `model`'s TF Hub encoder SavedModel into `out` (a `BertPretrainer`'s masked-LM head as `mlm`), with its
    vocabulary and casing; no settings for the metadata."""
    bert, masked_lm = getattr(model, "bert", model), getattr(model, "masked_lm", None)
    root = _Encoder(bert)
    if masked_lm is not None:
        root.mlm = _Encoder(bert, masked_lm)
    root.vocab_file = tf.saved_model.Asset(vocab_file)
    root.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    root.variables.append(root.do_lower_case)  # as in Model Garden's export (a Keras model tracks it)
    tf.saved_model.save(root, out, signatures={"serving_default": root.serving_signature()})
    # Beside saved_model.pb, for bert-tf to load the export as an init_checkpoint (its variables keep bert-tf's
    # Keras paths and [H, H] kernels, which do not tell the number of heads); TF Hub ignores the file.
    bert.config.to_json_file(os.path.join(out, "bert_config.json"))
    return {}


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
    """`bert_pack_inputs`: 1 or 2 int32 RaggedTensors [B, (tokens)] or [B, (words), (tokens)] -> int32 [B, seq_length]
    `input_word_ids`, `input_mask`, `input_type_ids` (`preprocessing.pack_inputs`)."""
    if not isinstance(segments, (list, tuple)):
        segments = [segments]
    if len(segments) not in (1, 2):
        raise ValueError(f"bert_pack_inputs packs 1 or 2 segments (the original's text_a, text_b), "
                         f"got {len(segments)}.")
    flat = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    packed = preprocessing.pack_inputs(*flat, max_seq_length=seq_length, cls_id=cls_id, sep_id=sep_id)
    return {hub: packed[ours] for hub, ours in HUB_INPUTS.items()}


def _pack_inputs_function(cls_id, sep_id, default_seq_length):
    """`bert_pack_inputs(segments, seq_length=<default>)`, traced for 1 and 2 segments of ragged rank 1 and 2, as Model
    Garden's `BertPackInputsSavedModelWrapper`."""
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


def write_preprocessing(out, vocab_file, do_lower_case, max_seq_length, *,
                        max_texts_per_request=saved_model.MAX_TEXTS_PER_REQUEST,
                        max_request_bytes=saved_model.MAX_REQUEST_BYTES):
    """Writes the TF Hub preprocessing SavedModel into `out`, packing to `max_seq_length` (>= 3); -> its text limits for
    the metadata."""
    if max_seq_length < 3:
        raise ValueError(f"The preprocessing export needs max_seq_length >= 3 (pairs), got {max_seq_length}.")
    limits = dict(max_texts_per_request=max_texts_per_request, max_request_bytes=max_request_bytes)
    root = _Preprocessor(in_graph.InGraphTokenizer(vocab_file, do_lower_case=do_lower_case, **limits),
                         int(max_seq_length))
    root.vocab_file = tf.saved_model.Asset(vocab_file)
    # The function, not a concrete function traced here: save traces it in its own context, where it also lists the
    # tokenizer's functions, so that each is traced and written once (see bert_tf.export.saved_model.write).
    tf.saved_model.save(root, out, signatures={"serving_default": root.__call__})
    return limits
