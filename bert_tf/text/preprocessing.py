"""Token ids -> BERT inputs in TensorFlow ops, by `bert_tf.text.packing`'s rules; `InGraphPreprocessor`: raw text in."""
import tensorflow as tf

from bert_tf.text import packing
from bert_tf.text.in_graph import InGraphTokenizer


def truncated_pair_lengths(len_a, len_b, max_length):
    """Tensor version of `packing.truncate_seq_pair`: the lengths the two segments keep (elementwise)."""
    len_a = tf.convert_to_tensor(len_a)
    len_b = tf.cast(len_b, len_a.dtype)
    max_length = tf.cast(max_length, len_a.dtype)
    keep_a = tf.minimum(len_a, tf.maximum((max_length + 1) // 2, max_length - len_b))
    over = len_a + len_b > max_length
    return tf.where(over, keep_a, len_a), tf.where(over, max_length - keep_a, len_b)


def _prefix(ids, lengths):
    """The first `lengths[i]` items of each row of a RaggedTensor."""
    starts = ids.row_starts()
    return tf.gather(ids.flat_values, tf.ragged.range(starts, starts + lengths))


def pack_inputs(ids_a, ids_b=None, *, max_seq_length, cls_id, sep_id, pad_to_max_seq_length=True,
                seq_length_multiple=1):
    """RaggedTensors `[batch, (len)]` of ids -> int32 `input_ids`/`input_mask`/`segment_ids` `[batch, length]`.

    A row whose `ids_b` is empty packs as a single segment, as in the original (`if tokens_b:`). `max_seq_length`
    (>= 2, >= 3 for pairs) may be a scalar tensor (checked in graph). `pad_to_max_seq_length=False` pads to the
    batch's longest row rounded up to `seq_length_multiple` instead; truncation is max_seq_length's either way.
    """
    min_length = 2 if ids_b is None else 3
    message = "max_seq_length must be at least %d %s" % (
        min_length, "for single segments" if ids_b is None else "for segment pairs")
    if tf.is_tensor(max_seq_length):
        limit = tf.cast(max_seq_length, tf.int64)
        with tf.control_dependencies([tf.debugging.assert_greater_equal(limit, tf.constant(min_length, tf.int64),
                                                                        message=message)]):
            limit = tf.identity(limit)
        shape = tf.stack([tf.constant(-1, tf.int64), limit])
    else:
        if max_seq_length < min_length:
            raise ValueError("%s, got %d" % (message, max_seq_length))
        limit, shape = int(max_seq_length), [None, int(max_seq_length)]
    ids_a = tf.cast(ids_a, tf.int32)
    len_a = ids_a.row_lengths()
    if ids_b is None:
        ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(len_a))
    ids_b = tf.cast(ids_b, tf.int32)
    len_b = ids_b.row_lengths()
    pair_a, pair_b = truncated_pair_lengths(len_a, len_b, limit - 3)
    keep_a = tf.where(len_b > 0, pair_a, tf.minimum(len_a, tf.cast(limit - 2, len_a.dtype)))
    keep_b = tf.where(len_b > 0, pair_b, 0)
    # As in the original, a second segment that truncation emptied (max_seq_length 3 or 4) gets no [SEP].
    has_b = keep_b > 0
    seg_a = _prefix(ids_a, keep_a)
    seg_b = _prefix(ids_b, keep_b)

    batch = tf.shape(len_a, out_type=tf.int64)[0]
    ones = tf.ones([batch], tf.int64)
    cls = tf.RaggedTensor.from_row_lengths(tf.fill([batch], tf.constant(cls_id, tf.int32)), ones, validate=False)
    sep = tf.RaggedTensor.from_row_lengths(tf.fill([batch], tf.constant(sep_id, tf.int32)), ones, validate=False)
    has_b = tf.cast(has_b, tf.int64)
    sep_b = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(has_b)], tf.constant(sep_id, tf.int32)), has_b, validate=False)
    tokens = tf.concat([cls, seg_a, sep, seg_b, sep_b], axis=1)
    segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(seg_a), tf.zeros_like(sep),
                          tf.ones_like(seg_b), tf.ones_like(sep_b)], axis=1)
    if not pad_to_max_seq_length:
        shape = [-1, longest_length(tokens.row_lengths(), limit, seq_length_multiple)]
    input_ids = tokens.to_tensor(default_value=0, shape=shape)
    return {
        "input_ids": input_ids,
        "input_mask": tf.ones_like(tokens).to_tensor(default_value=0, shape=shape),
        "segment_ids": segments.to_tensor(default_value=0, shape=shape),
    }


def longest_length(row_lengths, max_seq_length, multiple=1):
    """The padded width of a batch: its longest row rounded up to `multiple`, within [1, max_seq_length] (int64).

    At least 1 because a request of no texts still runs the model, whose pooler reads position 0."""
    longest = tf.reduce_max(tf.concat([tf.cast(row_lengths, tf.int64), tf.ones([1], tf.int64)], 0))
    return tf.minimum(tf.cast(max_seq_length, tf.int64), packing.round_up(longest, tf.constant(multiple, tf.int64)))


class InGraphPreprocessor(tf.Module):
    """Raw text -> packed BERT inputs in graph (`InGraphTokenizer`, then `pack_inputs`); usable in `Dataset.map`.

    `preprocessor(text_a[, text_b])` calls `encode` / `encode_pair`, which have input signatures (they survive
    `tf.saved_model.save`). `request_limits`: the tokenizer's `max_texts_per_request`, `max_request_bytes`."""

    def __init__(self, vocab_file=None, do_lower_case=True, max_seq_length=128, tokenizer=None, name=None,
                 pad_to_max_seq_length=True, seq_length_multiple=1, **request_limits):
        super().__init__(name=name)
        if tokenizer is None:
            if vocab_file is None:
                raise ValueError("InGraphPreprocessor needs a vocab_file or a tokenizer")
            tokenizer = InGraphTokenizer(vocab_file, do_lower_case=do_lower_case, **request_limits)
        if max_seq_length < 2:
            raise ValueError("max_seq_length must be at least 2, got %d" % max_seq_length)
        self.tokenizer = tokenizer
        self.max_seq_length = int(max_seq_length)
        self.padding = {"pad_to_max_seq_length": bool(pad_to_max_seq_length),
                        "seq_length_multiple": int(seq_length_multiple)}

    @property
    def vocab_file(self):
        return self.tokenizer.vocab_file

    def __call__(self, text_a, text_b=None):
        if text_b is None:
            return self.encode(text_a)
        return self.encode_pair(text_a, text_b)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def encode(self, text_a):
        """Packs single segments: `[CLS] a [SEP]`."""
        tok = self.tokenizer
        return pack_inputs(tok.tokenize(text_a), max_seq_length=self.max_seq_length,
                           cls_id=tok.cls_id, sep_id=tok.sep_id, **self.padding)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2, autograph=False)
    def encode_pair(self, text_a, text_b):
        """Packs segment pairs: `[CLS] a [SEP] b [SEP]` (rows whose b has no tokens: `[CLS] a [SEP]`)."""
        if self.max_seq_length < 3:
            raise ValueError("max_seq_length must be at least 3 for segment pairs, got %d" % self.max_seq_length)
        tok = self.tokenizer
        return pack_inputs(tok.tokenize(text_a), tok.tokenize(text_b), max_seq_length=self.max_seq_length,
                           cls_id=tok.cls_id, sep_id=tok.sep_id, **self.padding)
