"""The original run_classifier.py packing, written out as the original writes it: the one reference the packing
tests (Python, in-graph, SavedModel signatures) compare bert-tf against."""


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original _truncate_seq_pair: pop from the longer list (b on ties) until the pair fits. In place."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack_tokens(tokens_a, tokens_b, max_seq_length):
    """convert_single_example's packing: (tokens, segment_ids) of [CLS] a [SEP] (b [SEP])."""
    tokens_a, tokens_b = list(tokens_a), (list(tokens_b) if tokens_b else None)
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    elif len(tokens_a) > max_seq_length - 2:
        tokens_a = tokens_a[0:(max_seq_length - 2)]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    return tokens, segment_ids


def pack_ids(tokens_a, tokens_b, max_seq_length, vocab):
    """(input_ids, input_mask, segment_ids), zero-padded to max_seq_length, ids from `vocab` {token: id}."""
    tokens, segment_ids = pack_tokens(tokens_a, tokens_b, max_seq_length)
    input_ids = [vocab[t] for t in tokens]
    pad = [0] * (max_seq_length - len(input_ids))
    return input_ids + pad, [1] * len(input_ids) + pad, segment_ids + pad
