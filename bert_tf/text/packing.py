"""Packing WordPiece tokens into BERT inputs the way the original scripts do, in pure Python (no TensorFlow).

`[CLS] a [SEP]` (segment 0), then `b [SEP]` (segment 1) for a pair; a pair is truncated with the original
`_truncate_seq_pair` rule to `max_seq_length - 3` tokens, a single segment cut to `max_seq_length - 2`; then zero
padding to `max_seq_length`. `bert_tf.text.preprocessing.pack_inputs` is the same in TensorFlow ops. A converter
counts what it cuts in a `collections.Counter` (`pack_tokens(..., cut=)`) and says it once (`log_cut`).
"""
from absl import logging

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")  # the encoder's inputs, as `pad_inputs` returns them


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates two lists in place to `max_length` items in all: the original's pop-from-the-longer loop (b on
    ties), in one step."""
    if max_length < 0:
        raise ValueError("max_length must be >= 0, got %d" % max_length)
    len_a, len_b = len(tokens_a), len(tokens_b)
    if len_a + len_b <= max_length:
        return
    keep_a = min(len_a, max((max_length + 1) // 2, max_length - len_b))
    del tokens_a[keep_a:]
    del tokens_b[max_length - keep_a:]


def pack_tokens(tokens_a, tokens_b, max_seq_length, always_pair=False, cut=None):
    """(tokens, segment_ids) of `[CLS] a [SEP]`, or `[CLS] a [SEP] b [SEP]` when `tokens_b` is given.

    The lists given are truncated in place: a pair to `max_seq_length - 3` tokens in all, a single segment to
    `max_seq_length - 2`. As in the original, a second segment that the pair truncation empties (possible only for
    max_seq_length 3 or 4) adds nothing, not even its [SEP], unless `always_pair` (run_swag.py: every choice is a
    pair). Callers pass `tokens_b=None` where the original packs a single segment (run_classifier.py when text_b
    tokenizes to nothing). `cut` (a Counter) adds 1 to "texts", and for a text cut 1 to "cut_texts", its tokens to
    "tokens_of_cut" and those dropped to "dropped".
    """
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
    """Says once how many of `what`'s texts `pack_tokens` cut (`cut`: its Counter), and what keeps them."""
    if cut["cut_texts"]:
        logging.warning("%s: %d of %d texts (%.1f%%) were longer than %s %d and were cut, losing %.1f%% of their "
                        "tokens; %s.", what, cut["cut_texts"], cut["texts"], 100 * cut["cut_texts"] / cut["texts"],
                        limit_name, limit,
                        100 * cut["dropped"] / cut["tokens_of_cut"], keep)


def round_up(length, multiple):
    """`length` rounded up to a multiple of `multiple` (Python, NumPy and TensorFlow integers alike)."""
    return (length + multiple - 1) // multiple * multiple


def pad_inputs(input_ids, segment_ids, max_seq_length):
    """Zero-pads packed ids to `max_seq_length`: (input_ids, input_mask, segment_ids) lists of that length."""
    padding = [0] * (max_seq_length - len(input_ids))
    return list(input_ids) + padding, [1] * len(input_ids) + padding, list(segment_ids) + padding
