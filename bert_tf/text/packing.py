"""Packing WordPiece tokens into BERT inputs as the original scripts do, in pure Python (in TensorFlow ops:
`bert_tf.text.preprocessing`).

`[CLS] a [SEP]` (segment 0), then `b [SEP]` (segment 1) for a pair, truncated by the original `_truncate_seq_pair` to
`max_seq_length - 3` tokens (one segment: `max_seq_length - 2`), zero-padded. A converter counts what it cuts and logs
it once (`log_cut`). With a `doc_stride`, `pack_windows` cuts nothing: a longer text goes into run_squad's windows, each
token's output taken from its max-context window.
"""
import collections

from absl import logging

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")  # the encoder's inputs, as `pad_inputs` returns them
DOC_STRIDE_KEEPS = "--doc_stride keeps them whole, in windows (or a larger --max_seq_length)"  # log_cut's `keep`
DOC_STRIDE_HELP = (
    "0: a text longer than --max_seq_length is cut, as the original. N > 0: it is split into windows of "
    "max_seq_length tokens starting every N tokens (run_squad's rule; a text of T tokens over R = max_seq_length - 2 "
    "takes ceil((T - R) / min(N, R)) + 1 windows; the log says the most one text took).")
# How a text's outputs come from its windows' (--window_pooling; the first: the default): their mean, or each
# label's max.
WINDOW_POOLINGS = ("mean", "max")
DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates two lists in place to `max_length` items in all: the original's pop-from-the-longer loop (b on
    ties)."""
    if max_length < 0:
        raise ValueError("max_length must be >= 0, got %d" % max_length)
    len_a, len_b = len(tokens_a), len(tokens_b)
    if len_a + len_b <= max_length:
        return
    keep_a = min(len_a, max((max_length + 1) // 2, max_length - len_b))
    del tokens_a[keep_a:]
    del tokens_b[max_length - keep_a:]


def pack_tokens(tokens_a, tokens_b, max_seq_length, always_pair=False, cut=None):
    """(tokens, segment_ids) of `[CLS] a [SEP]`, or `[CLS] a [SEP] b [SEP]` with `tokens_b`, truncating the lists in
    place. As in the original, a `tokens_b` truncated to nothing adds nothing, not even [SEP], unless `always_pair`
    (run_swag.py); callers pass `tokens_b=None` where the original packs one segment. `cut` (a Counter) counts "texts",
    "cut_texts", "tokens_of_cut" and "dropped"."""
    before = len(tokens_a) + len(tokens_b or ())
    if tokens_b is None:
        del tokens_a[max(max_seq_length - 2, 0):]
        tokens_b = []
    else:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    if cut is not None:
        dropped = before - len(tokens_a) - len(tokens_b)
        cut.update(texts=1, cut_texts=int(dropped > 0), tokens_of_cut=before if dropped else 0, dropped=dropped)
    tail = tokens_b + ["[SEP]"] if tokens_b or always_pair else []
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tail
    return tokens, [0] * (len(tokens_a) + 2) + [1] * len(tail)


def log_cut(cut, what, limit, keep="a larger --max_seq_length keeps them", limit_name="max_seq_length"):
    """Logs once how many of `what`'s texts `pack_tokens` cut, and how many `pack_windows` split (the most windows a
    text took)."""
    if cut["cut_texts"]:
        logging.warning("%s: %d of %d texts (%.1f%%) were longer than %s %d and were cut, losing %.1f%% of their "
                        "tokens; %s.", what, cut["cut_texts"], cut["texts"], 100 * cut["cut_texts"] / cut["texts"],
                        limit_name, limit, 100 * cut["dropped"] / cut["tokens_of_cut"], keep)
    if cut["windowed_texts"]:
        logging.info("%s: %d of %d texts were longer than %s %d and were split into %d windows in all "
                     "(--doc_stride), at most %d for one text.", what, cut["windowed_texts"], cut["texts"], limit_name,
                     limit, cut["windows"], cut["most_windows"])


def check_doc_stride(doc_stride):
    """Raises ValueError unless `doc_stride` >= 0 (0: cut long texts)."""
    if doc_stride < 0:
        raise ValueError(f"doc_stride must be >= 0 (0: cut long texts as the original), got {doc_stride}.")


def doc_spans_for(num_tokens, max_tokens, doc_stride):
    """run_squad's sliding windows over `num_tokens` tokens: DocSpan(start, length)s of at most `max_tokens`, each
    min(length, doc_stride) after the last, the last reaching the end."""
    if max_tokens < 1 or doc_stride < 1:
        raise ValueError(f"Windows need max_tokens and doc_stride >= 1, got {max_tokens} and {doc_stride}.")
    doc_spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens)
        doc_spans.append(DocSpan(start=start_offset, length=length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


def max_context_windows(doc_spans):
    """Each covered token's max-context span (the original `_check_is_max_context`: the largest min(left, right) + 0.01
    x the span's length, the first on ties)."""
    best, best_scores = [], []
    for index, span in enumerate(doc_spans):
        end = span.start + span.length - 1
        for position in range(span.start, end + 1):
            score = min(position - span.start, end - position) + 0.01 * span.length
            if position == len(best):  # the spans are contiguous: a position not yet seen is the next one
                best.append(index)
                best_scores.append(score)
            elif score > best_scores[position]:
                best[position], best_scores[position] = index, score
    return best


def pack_windows(tokens_a, tokens_b, max_seq_length, doc_stride=0, cut=None):
    """A text packed as `pack_tokens` packs it: `doc_stride` 0, cut in place; else a longer one in run_squad's windows
    over tokens_a, each `[CLS] window [SEP] (b [SEP])` (ValueError where text_b leaves no room).

    -> (packed: [(tokens, segment_ids)] per window, sources: None for one window, else for each position of the
    text packed whole, the (window, position) giving its output: [CLS] from the first window, a's tokens from their
    max-context window, the rest from the last). `cut` also counts windows."""
    tokens_b = tokens_b or None
    room = max_seq_length - (3 + len(tokens_b) if tokens_b else 2)
    if not doc_stride or len(tokens_a) <= room:
        return [pack_tokens(tokens_a, tokens_b, max_seq_length, cut=cut)], None
    if room < 1:
        raise ValueError(f"text_b has {len(tokens_b)} tokens, which with [CLS] and two [SEP] leave no room for "
                         f"text_a within max_seq_length {max_seq_length}: --doc_stride windows text_a and keeps "
                         "text_b whole in every window.")
    spans = doc_spans_for(len(tokens_a), room, doc_stride)
    packed = [pack_tokens(tokens_a[span.start:span.start + span.length], tokens_b, max_seq_length) for span in spans]
    last = len(spans) - 1
    after_a = 1 + spans[last].length  # where the [SEP] after a sits in the last window
    sources = ([(0, 0)] + [(w, 1 + i - spans[w].start) for i, w in enumerate(max_context_windows(spans))]
               + [(last, p) for p in range(after_a, len(packed[last][0]))])
    if cut is not None:
        cut.update(texts=1, windowed_texts=1, windows=len(spans))
        cut["most_windows"] = max(cut["most_windows"], len(spans))
    return packed, sources


def round_up(length, multiple):
    """`length` rounded up to a multiple of `multiple` (Python, NumPy or TensorFlow integers)."""
    return (length + multiple - 1) // multiple * multiple


def pad_inputs(input_ids, segment_ids, max_seq_length):
    """Zero-pads packed ids to `max_seq_length` -> (input_ids, input_mask, segment_ids)."""
    padding = [0] * (max_seq_length - len(input_ids))
    return list(input_ids) + padding, [1] * len(input_ids) + padding, list(segment_ids) + padding
