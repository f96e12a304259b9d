"""bert_tf.text.packing against the original run_classifier.py packing (tests/original_packing.py)."""
import collections
import random

import original_packing
import pytest

from bert_tf.text import packing


def test_pack_tokens_is_the_original_packing_on_random_lengths():
    """... and counts what it cuts: the tokens beyond max_seq_length less [CLS] and the [SEP]s."""
    rng = random.Random(0)
    cut, expected = collections.Counter(), collections.Counter()
    for _ in range(2000):
        a = [f"a{i}" for i in range(rng.randint(0, 15))]
        b = [f"b{i}" for i in range(rng.randint(0, 15))] if rng.random() < 0.7 else None
        max_seq_length = rng.randint(3, 24)
        got = packing.pack_tokens(list(a), None if b is None else list(b) or None, max_seq_length, cut=cut)
        assert got == original_packing.pack_tokens(a, b, max_seq_length), (a, b, max_seq_length)
        assert len(got[0]) <= max_seq_length
        tokens = len(a) + len(b or [])
        dropped = max(0, tokens - max_seq_length + (3 if b else 2))
        expected.update(texts=1, cut_texts=int(dropped > 0), tokens_of_cut=tokens if dropped else 0,
                        dropped=dropped)
    assert cut == expected and 0 < cut["cut_texts"] < cut["texts"]


def test_a_pair_that_truncation_empties_keeps_its_sep_only_with_always_pair():
    # max_seq_length 4 leaves one token for the pair: a keeps it, b is emptied.
    assert packing.pack_tokens(["x", "y"], ["z"], 4) == (["[CLS]", "x", "[SEP]"], [0, 0, 0])
    assert packing.pack_tokens(["x", "y"], ["z"], 4, always_pair=True) == (["[CLS]", "x", "[SEP]", "[SEP]"],
                                                                           [0, 0, 0, 1])


def test_pad_inputs():
    assert packing.pad_inputs([5, 6, 7], [0, 0, 1], 5) == ([5, 6, 7, 0, 0], [1, 1, 1, 0, 0], [0, 0, 1, 0, 0])
    assert packing.pad_inputs([5], [0], 1) == ([5], [1], [0])


def test_truncate_seq_pair_matches_the_original_loop_exhaustively():
    for len_a in range(12):
        for len_b in range(12):
            for max_length in range(26):
                a, b = list(range(len_a)), list(range(100, 100 + len_b))
                ref_a, ref_b = list(a), list(b)
                original_packing.truncate_seq_pair(ref_a, ref_b, max_length)
                packing.truncate_seq_pair(a, b, max_length)
                assert (a, b) == (ref_a, ref_b)
    with pytest.raises(ValueError, match="max_length must be >= 0"):
        packing.truncate_seq_pair([1], [2], -1)


def test_round_up():
    import numpy as np

    assert [packing.round_up(n, 8) for n in (0, 1, 8, 9, 16)] == [0, 8, 8, 16, 16]
    assert packing.round_up(5, 1) == 5
    np.testing.assert_array_equal(packing.round_up(np.array([3, 32, 33]), 32), [32, 32, 64])
