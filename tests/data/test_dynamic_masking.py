"""Tests for bert_tf.data.pretraining.dynamic_masking on the golden records of the original
create_pretraining_data.py (tests/fixtures/README.md: max_seq_length 128, max_predictions_per_seq 20,
masked_lm_prob 0.15), checked against NumPy and against the exact Python port of the original rule."""
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import records
from bert_tf.data.pretraining import dynamic_masking, instances
from bert_tf.text import tokenization

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
GOLDEN = {False: "pretraining_sample_text_seed12345.tfrecord", True: "pretraining_sample_text_seed12345_wwm.tfrecord"}
SEQ, PREDS, PROB = 128, 20, 0.15
SIGMAS = 5
PREDICTIONS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def schema(seq=SEQ, preds=PREDS):
    """The original run_pretraining.py input_fn's features."""
    ints = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in (
        ("input_ids", seq), ("input_mask", seq), ("segment_ids", seq), ("masked_lm_positions", preds),
        ("masked_lm_ids", preds), ("next_sentence_labels", 1))}
    return dict(ints, masked_lm_weights=tf.io.FixedLenFeature([preds], tf.float32))


@pytest.fixture(scope="module")
def vocab():
    return tokenization.load_vocab(os.path.join(DATA, "uncased_vocab.txt"))


def golden_dataset(wwm):
    path = os.path.join(DATA, GOLDEN[wwm])
    return tf.data.TFRecordDataset(path).map(lambda record: records.parse(record, schema()))


def numpy_list(dataset):
    return list(dataset.as_numpy_iterator())


def text_of(example):
    """NumPy: input_ids with the real predictions put back."""
    tokens = example["input_ids"].copy()
    real = example["masked_lm_weights"] > 0
    tokens[example["masked_lm_positions"][real]] = example["masked_lm_ids"][real]
    return tokens


def original_groups(tokens, num_tokens, wwm, vocab):
    """The original's cand_indexes: lists of positions (a "##" piece joins the previous candidate's list)."""
    special = (vocab["[CLS]"], vocab["[SEP]"])
    subword = {index for token, index in vocab.items() if token.startswith("##")}
    groups = []
    for i, token in enumerate(tokens[:num_tokens]):
        if token in special:
            continue
        if wwm and groups and token in subword:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def original_num_to_predict(num_tokens, masked_lm_prob=PROB, max_predictions_per_seq=PREDS):
    return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def draws(masking, example, count, seed):
    """`count` re-maskings of one example (NumPy dict) through `apply` -> dict of [count, ...] arrays."""
    dataset = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in example.items()}).repeat(count)
    return next(masking.apply(dataset, seed).batch(count).as_numpy_iterator())


@pytest.fixture(scope="module")
def golden():
    return {wwm: numpy_list(golden_dataset(wwm)) for wwm in (False, True)}


@pytest.fixture(scope="module")
def two_epochs(vocab):
    """Per mode: the golden records and two epochs of their re-maskings (seed 3)."""
    masking = {wwm: dynamic_masking.DynamicMasking(vocab, PREDS, PROB, wwm) for wwm in (False, True)}
    return {wwm: numpy_list(masking[wwm].apply(golden_dataset(wwm).repeat(2), seed=3)) for wwm in (False, True)}


def test_output_has_the_parsed_dtypes_and_shapes(vocab):
    parsed = golden_dataset(False)
    out = dynamic_masking.DynamicMasking(vocab, PREDS).apply(parsed, seed=1)
    assert out.element_spec == parsed.element_spec
    spec = {name: (s.dtype, s.shape.as_list()) for name, s in out.element_spec.items()}
    assert spec == {"input_ids": (tf.int32, [SEQ]), "input_mask": (tf.int32, [SEQ]), "segment_ids": (tf.int32, [SEQ]),
                    "masked_lm_positions": (tf.int32, [PREDS]), "masked_lm_ids": (tf.int32, [PREDS]),
                    "masked_lm_weights": (tf.float32, [PREDS]), "next_sentence_labels": (tf.int32, [1])}
    raw = tf.data.TFRecordDataset(os.path.join(DATA, GOLDEN[False])).map(lambda r: tf.io.parse_single_example(
        r, schema()))  # int64, as parsed without the cast
    assert dynamic_masking.DynamicMasking(vocab, PREDS).apply(raw, seed=1).element_spec == raw.element_spec


@pytest.mark.parametrize("wwm", [False, True])
def test_remasking_keeps_the_text_and_follows_the_original_rule(vocab, golden, two_epochs, wwm):
    originals = golden[wwm] * 2
    outputs = two_epochs[wwm]
    assert len(outputs) == len(originals) == 2 * (64 if wwm else 60)
    for before, after in zip(originals, outputs):
        text = text_of(before)
        np.testing.assert_array_equal(text_of(after), text)
        for name in ("input_mask", "segment_ids", "next_sentence_labels"):
            np.testing.assert_array_equal(after[name], before[name])
        count = int(after["masked_lm_weights"].sum())
        np.testing.assert_array_equal(after["masked_lm_weights"], [1.0] * count + [0.0] * (PREDS - count))
        positions = after["masked_lm_positions"][:count]
        assert np.all(np.diff(positions) > 0)
        assert not after["masked_lm_positions"][count:].any() and not after["masked_lm_ids"][count:].any()
        np.testing.assert_array_equal(after["masked_lm_ids"][:count], text[positions])
        unchosen = np.ones(SEQ, bool)
        unchosen[positions] = False
        np.testing.assert_array_equal(after["input_ids"][unchosen], text[unchosen])

        num_tokens = int(before["input_mask"].sum())
        groups = original_groups(text, num_tokens, wwm, vocab)
        candidates = sorted(i for group in groups for i in group)
        assert set(positions) <= set(candidates)  # never [CLS], [SEP] or padding
        original_positions = before["masked_lm_positions"][before["masked_lm_weights"] > 0]
        for chosen in (positions, original_positions):  # whole words (or single pieces), ours and the original's
            chosen = set(chosen.tolist())
            assert all(chosen.issuperset(g) or chosen.isdisjoint(g) for g in groups)
        # The original rule fixes the count when single pieces alone can reach num_to_predict (every golden record).
        target = original_num_to_predict(num_tokens)
        assert sum(len(g) == 1 for g in groups) >= target
        assert count == target == before["masked_lm_weights"].sum()


def test_num_to_predict_is_the_original_expression(vocab):
    lengths = np.arange(0, 513)
    halves = 0
    for prob in (0.15, 0.1, 0.2, 0.5, 1 / 3, 0.0, 1.0):
        for preds in (0, 20, 80):
            masking = dynamic_masking.DynamicMasking(vocab, preds, prob)
            ours = masking.num_to_predict(tf.constant(lengths, tf.int32)).numpy()
            np.testing.assert_array_equal(ours, [original_num_to_predict(n, prob, preds) for n in lengths])
        halves += sum((n * prob) % 1 == 0.5 for n in lengths)
    assert halves > 100  # round half to even is exercised (0.15 * 10 = 1.5 -> 2, 0.15 * 30 = 4.5 -> 4)


@pytest.mark.parametrize("wwm,prob,preds", [(False, PROB, PREDS), (True, PROB, PREDS), (True, 0.95, SEQ)])
def test_choice_of_positions_matches_the_original_in_distribution(vocab, golden, wwm, prob, preds):
    """Per-position frequencies over 3000 draws: ours vs the exact Python port of the original, within 5 sigma of
    the difference of two binomial proportions; per wordpiece also against the exact num_to_predict / candidates.
    With masked_lm_prob 0.95 some draws end short of num_to_predict (a whole word does not fit)."""
    def num_multi_piece_words(example):
        return sum(len(g) > 1 for g in original_groups(text_of(example), int(example["input_mask"].sum()), True, vocab))

    example = max(golden[wwm], key=num_multi_piece_words if wwm else lambda e: e["input_mask"].sum())
    example = dict(example, **{name: np.pad(example[name], (0, preds - PREDS)) for name in PREDICTIONS})
    num_tokens = int(example["input_mask"].sum())
    target = original_num_to_predict(num_tokens, prob, preds)
    text = text_of(example)
    count = 3000
    out = draws(dynamic_masking.DynamicMasking(vocab, preds, prob, wwm), example, count, seed=11)
    ours = np.zeros(SEQ)
    for positions, weights in zip(out["masked_lm_positions"], out["masked_lm_weights"]):
        ours[positions[weights > 0]] += 1
    tables = instances.VocabTables(vocab)
    theirs = np.zeros(SEQ)
    for seed in range(count):
        _, positions, _ = instances.create_masked_lm_predictions(
            text[:num_tokens].tolist(), prob, preds, tables, random.Random(seed), wwm)
        theirs[positions] += 1
    pooled = (ours + theirs) / (2 * count)
    sigma = np.sqrt(pooled * (1 - pooled) * 2 / count)
    assert np.all(np.abs(ours - theirs) / count <= SIGMAS * sigma + 1e-12)
    groups = original_groups(text, num_tokens, wwm, vocab)
    counts = out["masked_lm_weights"].sum(1)
    if wwm:
        assert num_multi_piece_words(example) >= 10
        assert counts.max() <= target and (counts.min() < target) == (prob > PROB)  # short only at 0.95
        assert abs(counts.mean() - theirs.sum() / count) <= SIGMAS * counts.std() / np.sqrt(count / 2)
    else:
        p = target / len(groups)
        candidates = [g[0] for g in groups]
        assert np.all(np.abs(ours[candidates] / count - p) <= SIGMAS * np.sqrt(p * (1 - p) / count))
        assert np.all(counts == target)


def test_replacements_are_80_10_10_and_uniform(vocab, golden):
    example = golden[False][0]
    text = text_of(example)
    out = draws(dynamic_masking.DynamicMasking(vocab, PREDS), example, 3000, seed=5)
    real = out["masked_lm_weights"] > 0
    positions = out["masked_lm_positions"][real]
    rows = np.nonzero(real)[0]
    new, old = out["input_ids"][rows, positions], text[positions]
    assert not np.any(old == vocab["[MASK]"])
    size, total = len(vocab), len(new)
    expected = {"mask": 0.8 + 0.1 / size, "kept": 0.1 + 0.1 / size, "random": 0.1 * (size - 2) / size}
    got = {"mask": np.sum(new == vocab["[MASK]"]), "kept": np.sum(new == old)}
    got["random"] = total - got["mask"] - got["kept"]
    for key, p in expected.items():
        assert abs(got[key] - total * p) <= SIGMAS * np.sqrt(total * p * (1 - p)), key
    others = new[(new != old) & (new != vocab["[MASK]"])]
    bins = np.histogram(others, bins=10, range=(0, size))[0]
    p = 0.1
    assert np.all(np.abs(bins - len(others) * p) <= SIGMAS * np.sqrt(len(others) * p * (1 - p))), bins


def test_whole_word_follows_the_previous_candidate_across_sep(vocab):
    """As the original: a "##" piece right after the middle [SEP] joins the last word of segment A."""
    words = ["[CLS]", "the", "play", "[SEP]", "##ing", "well", "[SEP]"]
    ids = [vocab[w] for w in words] + [0] * 3
    mask = [1] * len(words) + [0] * 3
    example = {"input_ids": np.array(ids, np.int32), "input_mask": np.array(mask, np.int32),
               "segment_ids": np.array([0] * 4 + [1] * 3 + [0] * 3, np.int32),
               "masked_lm_positions": np.zeros(3, np.int32), "masked_lm_ids": np.zeros(3, np.int32),
               "masked_lm_weights": np.zeros(3, np.float32), "next_sentence_labels": np.array([0], np.int32)}
    out = draws(dynamic_masking.DynamicMasking(vocab, 3, masked_lm_prob=0.4, do_whole_word_mask=True), example,
                200, seed=2)  # num_to_predict = round(7 * 0.4) = 3 of the groups {the}, {play, ##ing}, {well}
    chosen = np.zeros((200, 10), bool)
    for row, (positions, weights) in enumerate(zip(out["masked_lm_positions"], out["masked_lm_weights"])):
        chosen[row, positions[weights > 0]] = True
    np.testing.assert_array_equal(chosen[:, 2], chosen[:, 4])
    assert 0 < chosen[:, 2].sum() < 200
    assert not chosen[:, [0, 3, 6, 7, 8, 9]].any()
    # 3 when the two-piece word comes first or second, else the two single words only
    np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), 2 + chosen[:, 2])


def test_no_candidates_and_every_candidate(vocab):
    ids = [vocab[w] for w in ("[CLS]", "[SEP]", "[SEP]")] + [0] * 5
    example = {"input_ids": np.array(ids, np.int32), "input_mask": np.array([1] * 3 + [0] * 5, np.int32),
               "segment_ids": np.zeros(8, np.int32), "masked_lm_positions": np.zeros(4, np.int32),
               "masked_lm_ids": np.zeros(4, np.int32), "masked_lm_weights": np.zeros(4, np.float32),
               "next_sentence_labels": np.array([1], np.int32)}
    out = draws(dynamic_masking.DynamicMasking(vocab, 4), example, 5, seed=0)
    assert not out["masked_lm_weights"].any() and not out["masked_lm_positions"].any()
    np.testing.assert_array_equal(out["input_ids"], np.tile(ids, (5, 1)))
    # masked_lm_prob 1: num_to_predict = min(P, num_tokens) >= the 3 candidates, so all are taken
    example["input_ids"][:6] = [vocab[w] for w in ("[CLS]", "the", "[SEP]", "cat", "sat", "[SEP]")]
    example["input_mask"][:6] = 1
    out = draws(dynamic_masking.DynamicMasking(vocab, 4, masked_lm_prob=1.0), example, 5, seed=0)
    np.testing.assert_array_equal(out["masked_lm_positions"], np.tile([1, 3, 4, 0], (5, 1)))
    np.testing.assert_array_equal(out["masked_lm_weights"], np.tile([1, 1, 1, 0], (5, 1)))


def test_deterministic_for_a_seed_new_each_epoch_and_seed(vocab, two_epochs):
    masking = dynamic_masking.DynamicMasking(vocab, PREDS, PROB, True)
    again = numpy_list(masking.apply(golden_dataset(True).repeat(2), seed=3))
    other_seed = numpy_list(masking.apply(golden_dataset(True), seed=4))
    first = two_epochs[True]
    for a, b in zip(first, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    half = len(first) // 2

    def same_positions(x, y):
        return np.array_equal(x["masked_lm_positions"], y["masked_lm_positions"])

    assert sum(same_positions(x, y) for x, y in zip(first[:half], first[half:])) <= 2
    assert sum(same_positions(x, y) for x, y in zip(first[:half], other_seed)) <= 2


def test_list_vocab_and_bad_input(vocab, golden):
    tokens = list(vocab)
    example = golden[False][0]
    by_dict = draws(dynamic_masking.DynamicMasking(vocab, PREDS), example, 3, seed=9)
    by_list = draws(dynamic_masking.DynamicMasking(tokens, PREDS), example, 3, seed=9)
    for name in by_dict:
        np.testing.assert_array_equal(by_dict[name], by_list[name])
    with pytest.raises(ValueError, match=r"no \[MASK\] entry"):
        dynamic_masking.DynamicMasking([t for t in tokens if t != "[MASK]"], PREDS)
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        dynamic_masking.DynamicMasking(vocab, -1)
    with pytest.raises(ValueError, match="masked_lm_prob"):
        dynamic_masking.DynamicMasking(vocab, PREDS, masked_lm_prob=1.5)
    masking = dynamic_masking.DynamicMasking(vocab, PREDS)
    with pytest.raises(TypeError, match="int seed"):
        masking.apply(golden_dataset(False), seed=None)
    with pytest.raises(ValueError, match="before batching"):
        masking.apply(golden_dataset(False).batch(2), seed=1)
    with pytest.raises(ValueError, match=r"max_predictions_per_seq is 30"):
        dynamic_masking.DynamicMasking(vocab, 30).apply(golden_dataset(False), seed=1)


def test_checkpointed_iterator_resumes_exactly(vocab, tmp_path):
    def pipeline():
        shuffled = golden_dataset(True).shuffle(16, seed=1, reshuffle_each_iteration=True).repeat()
        return dynamic_masking.DynamicMasking(vocab, PREDS, PROB, True).apply(shuffled, seed=8).batch(8)

    iterator = iter(pipeline())
    for _ in range(10):  # past the end of the first epoch (64 records)
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    expected = [next(iterator) for _ in range(12)]
    resumed = iter(pipeline())
    tf.train.Checkpoint(iterator=resumed).restore(path).assert_consumed()
    for want in expected:
        have = next(resumed)
        for name in want:
            np.testing.assert_array_equal(have[name].numpy(), want[name].numpy())
    assert not np.array_equal(expected[0]["input_ids"].numpy(), next(iter(pipeline()))["input_ids"].numpy())
