"""Token ids -> BERT inputs in TensorFlow ops, by `bert_tf.text.packing`'s rules; `InGraphPreprocessor`: raw text in.
`pack_inputs` cuts long texts as the original; `pack_windows` splits them into windows (the exports' `doc_stride`),
equal to `packing.pack_windows` window for window.
"""
import tensorflow as tf

from bert_tf.text import packing
from bert_tf.text.in_graph import InGraphTokenizer


def truncated_pair_lengths(len_a, len_b, max_length):
    """`packing.truncate_seq_pair` in tensors: the lengths the two segments keep (elementwise)."""
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
    """RaggedTensors [batch, (len)] of ids -> int32 `input_ids`, `input_mask`, `segment_ids` [batch, length], packed as
    `packing.pack_tokens` (an empty `ids_b` row: one segment); `max_seq_length` (>= 2, pairs >= 3) may be a tensor.
    `pad_to_max_seq_length=False`: pads to the longest row rounded up to `seq_length_multiple` (truncation
    unchanged)."""
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
    ids_a, len_a, ids_b, len_b = _segments(ids_a, ids_b)
    pair_a, pair_b = truncated_pair_lengths(len_a, len_b, limit - 3)
    keep_a = tf.where(len_b > 0, pair_a, tf.minimum(len_a, tf.cast(limit - 2, len_a.dtype)))
    keep_b = tf.where(len_b > 0, pair_b, 0)
    # As in the original, a second segment that truncation emptied (max_seq_length 3 or 4) gets no [SEP].
    tokens, segments = _packed_rows(_prefix(ids_a, keep_a), _prefix(ids_b, keep_b), keep_b > 0, cls_id, sep_id)
    return _padded(tokens, segments, shape, limit, pad_to_max_seq_length, seq_length_multiple)


def pack_windows(ids_a, ids_b=None, *, max_seq_length, doc_stride, cls_id, sep_id, pad_to_max_seq_length=True,
                 seq_length_multiple=1, max_windows=None, pooling_mask=False):
    """`packing.pack_windows` of a batch -> (inputs [windows, length] (+ `pooling_mask` when asked:
    1 where a position gives its text's output), text int64 [windows] (each window's row),
    num_windows int64 [batch]).
    InvalidArgumentError where text_b leaves text_a no room, or for over `max_windows` windows (None: no limit)."""
    max_seq_length, doc_stride = int(max_seq_length), int(doc_stride)
    if doc_stride < 1 or max_seq_length < 3:
        raise ValueError(f"Windows need doc_stride >= 1 and max_seq_length >= 3, got {doc_stride} and "
                         f"{max_seq_length}.")
    ids_a, len_a, ids_b, len_b = _segments(ids_a, ids_b)
    room = tf.where(len_b > 0, max_seq_length - 3 - len_b, max_seq_length - 2)  # text_a's tokens in a window
    windowed = len_a > room
    no_room = windowed & (room < 1)
    first_bad = [tf.concat([t, tf.zeros([1], tf.int64)], 0)[0]  # the first such text and its len_b
                 for t in (tf.where(no_room)[:, 0], tf.boolean_mask(len_b, no_room))]
    checks = [tf.debugging.Assert(~tf.reduce_any(no_room), [tf.strings.format(
        f"text {{}} of the request: its text_b has {{}} tokens, which with [CLS] and two [SEP] leave no room for "
        f"text_a within max_seq_length {max_seq_length}: this export's doc_stride windows text_a and keeps text_b "
        f"whole in every window", first_bad)])]
    span = tf.where(windowed, tf.maximum(room, 1), len_a)  # the most tokens of a in one of the row's windows
    step = tf.maximum(tf.minimum(span, doc_stride), 1)
    num_windows = 1 + tf.where(windowed, (len_a - span + step - 1) // step, 0)  # doc_spans_for's count
    if max_windows is not None:
        total = tf.reduce_sum(num_windows)
        checks.append(tf.debugging.Assert(total <= max_windows, [tf.strings.format(
            f"the texts of the request take {{}} windows; this export takes at most {max_windows} (export option "
            f"max_windows_per_request)", total)]))
    index = tf.ragged.range(num_windows)
    text, index = index.value_rowids(), index.flat_values
    start = index * tf.gather(step, text)
    length = tf.minimum(tf.gather(span, text), tf.gather(len_a, text) - start)
    offset = tf.gather(ids_a.row_starts(), text) + start  # of each window's first token in ids_a.flat_values
    seg_a = tf.gather(ids_a.flat_values, tf.ragged.range(offset, offset + length))
    seg_b = tf.gather(ids_b, text)
    has_b = tf.gather(len_b > 0, text)
    tokens, segments = _packed_rows(seg_a, seg_b, has_b, cls_id, sep_id)
    with tf.control_dependencies(checks):
        inputs = {name: tf.identity(t) for name, t in _padded(
            tokens, segments, [None, max_seq_length], max_seq_length, pad_to_max_seq_length,
            seq_length_multiple).items()}
    if pooling_mask:
        first, last = index == 0, index == tf.gather(num_windows - 1, text)
        best = _max_context(seg_a, offset, tf.size(ids_a.flat_values, out_type=tf.int64))
        mask = _join(first, best, last, seg_b.with_flat_values(tf.gather(last, seg_b.value_rowids())), last, has_b)
        inputs["pooling_mask"] = tf.cast(mask, tf.int32).to_tensor(
            default_value=0, shape=tf.shape(inputs["input_ids"], out_type=tf.int64))
    return inputs, text, num_windows


def _max_context(windows, offset, num_tokens):
    """Whether each of text_a's tokens in `windows` (the first at `offset`) is in its max-context window
    (`packing.max_context_windows`, in float64)."""
    position = tf.ragged.range(windows.row_lengths())
    window, position = position.value_rowids(), position.flat_values
    length = tf.gather(windows.row_lengths(), window)
    score = tf.cast(tf.minimum(position, length - 1 - position), tf.float64) + 0.01 * tf.cast(length, tf.float64)
    token = tf.gather(offset, window) + position
    top = tf.equal(score, tf.gather(tf.math.unsorted_segment_max(score, token, num_tokens), token))
    first_top = tf.math.unsorted_segment_min(tf.where(top, window, window.dtype.max), token, num_tokens)
    return windows.with_flat_values(tf.equal(window, tf.gather(first_top, token)))


def _segments(ids_a, ids_b):
    """(ids_a, its row lengths, ids_b, its row lengths) as int32 RaggedTensors; `ids_b` None: empty rows."""
    ids_a = tf.cast(ids_a, tf.int32)
    if ids_b is None:
        ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(ids_a.row_lengths()))
    ids_b = tf.cast(ids_b, tf.int32)
    return ids_a, ids_a.row_lengths(), ids_b, ids_b.row_lengths()


def _packed_rows(seg_a, seg_b, has_b, cls_id, sep_id):
    """(tokens, segment_ids) RaggedTensors of rows `[CLS] a [SEP]`, `+ b [SEP]` where `has_b`."""
    rows = seg_a.nrows()
    cls, sep = (tf.fill([rows], tf.constant(token, tf.int32)) for token in (cls_id, sep_id))
    zeros, ones = tf.zeros([rows], tf.int32), tf.ones([rows], tf.int32)
    return (_join(cls, seg_a, sep, seg_b, sep, has_b),
            _join(zeros, tf.zeros_like(seg_a), zeros, tf.ones_like(seg_b), ones, has_b))


def _join(first, seg_a, after_a, seg_b, after_b, has_b):
    """The rows `first a after_a`, then `b after_b` where `has_b` (first, after_a, after_b: a value per row)."""
    one = tf.ones_like(first, tf.int64)
    has_b = tf.cast(has_b, tf.int64)
    return tf.concat([tf.RaggedTensor.from_row_lengths(first, one, validate=False), seg_a,
                      tf.RaggedTensor.from_row_lengths(after_a, one, validate=False), seg_b,
                      tf.RaggedTensor.from_row_lengths(tf.boolean_mask(after_b, has_b > 0), has_b, validate=False)],
                     axis=1)


def _padded(tokens, segments, shape, limit, pad_to_max_seq_length, seq_length_multiple):
    """`pack_inputs`' dict of the packed rows, zero-padded to `shape` or to their longest row."""
    if not pad_to_max_seq_length:
        shape = [-1, longest_length(tokens.row_lengths(), limit, seq_length_multiple)]
    return {
        "input_ids": tokens.to_tensor(default_value=0, shape=shape),
        "input_mask": tf.ones_like(tokens).to_tensor(default_value=0, shape=shape),
        "segment_ids": segments.to_tensor(default_value=0, shape=shape),
    }


def longest_length(row_lengths, max_seq_length, multiple=1):
    """The padded width of a batch: its longest row rounded up to `multiple`, within [1, max_seq_length] (int64; 1: an
    empty request still runs the pooler)."""
    longest = tf.reduce_max(tf.concat([tf.cast(row_lengths, tf.int64), tf.ones([1], tf.int64)], 0))
    return tf.minimum(tf.cast(max_seq_length, tf.int64), packing.round_up(longest, tf.constant(multiple, tf.int64)))


class InGraphPreprocessor(tf.Module):
    """Raw text -> packed BERT inputs in graph (`InGraphTokenizer`, then `pack_inputs`), also in `Dataset.map`; `encode`
    and `encode_pair` have input signatures."""

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
        tok = self.tokenizer
        return pack_inputs(tok.tokenize(text_a), tok.tokenize(text_b), max_seq_length=self.max_seq_length,
                           cls_id=tok.cls_id, sep_id=tok.sep_id, **self.padding)
