"""bert_tf.data.lengths: batches cut to their longest text give the real tokens the padded batch's values;
length-sorted prediction hands its outputs back in the input order; grouped training batches resume exactly."""
import weakref

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import lengths
from bert_tf.model.encoder import BertModel
from bert_tf.training import prediction


def _masks(rows, seq_length):
    """A [len(rows), seq_length] 0/1 mask with rows[i] leading ones."""
    return (np.arange(seq_length)[None, :] < np.asarray(rows)[:, None]).astype(np.int32)


def _random_texts(seed, count, seq_length):
    """`count` single-segment examples of random ids, each of a random real length 1..seq_length (padded to it)."""
    rng = np.random.RandomState(seed)
    mask = _masks(rng.randint(1, seq_length + 1, count), seq_length)
    return {"input_ids": rng.randint(1, 99, mask.shape).astype(np.int32) * mask, "input_mask": mask,
            "segment_ids": np.zeros_like(mask)}


def test_real_and_cut_lengths():
    mask = _masks([3, 7, 0, 5], 16)
    np.testing.assert_array_equal(lengths.real_lengths(mask).numpy(), [3, 7, 0, 5])
    gappy = np.array([[1, 0, 1, 0, 0]], np.int32)  # one past the last real position, whatever lies before it
    assert lengths.real_lengths(gappy).numpy().tolist() == [3]
    assert int(lengths.cut_length(mask)) == 7
    assert int(lengths.cut_length(mask, 4)) == 8
    assert int(lengths.cut_length(mask, 32)) == 16  # at most S
    assert int(lengths.cut_length(_masks([0, 0], 16))) == 1  # at least 1
    choices = np.stack([_masks([2, 9], 12), _masks([4, 3], 12)])  # [B, C, S]: the longest choice of the batch
    assert int(lengths.cut_length(choices)) == 9
    np.testing.assert_array_equal(lengths.example_lengths(choices), [9, 4])


def test_settings_for_a_run():
    assert lengths.SequenceLengths.for_run() == lengths.SequenceLengths(False, 1, False)
    assert lengths.SequenceLengths.for_run(compiled=True) == lengths.SequenceLengths(multiple=lengths.XLA_MULTIPLE,
                                                                                    compiled=True)
    assert lengths.SequenceLengths.for_run(compiled=True, multiple=8).multiple == 8
    with pytest.raises(ValueError, match="seq_length_multiple must be >= 1"):
        lengths.SequenceLengths.for_run(multiple=0)
    with pytest.raises(ValueError, match="does not go with --pad_to_max_seq_length"):
        lengths.SequenceLengths.for_run(pad=True, group_by_length=True)


def test_trimmed_cuts_only_the_named_tensors():
    mask = _masks([2, 5, 3], 10)
    features = {"input_ids": mask * 7, "input_mask": mask, "positions": np.tile(np.arange(10), (3, 1))}
    labels = {"tags": mask * 2 - 1, "label": np.array([0, 1, 2])}
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(2)
    settings = lengths.SequenceLengths()
    batches = list(lengths.trimmed(dataset, settings, ("input_ids", "input_mask", "tags")))
    (f0, l0), (f1, l1) = batches
    assert f0["input_ids"].shape == (2, 5) and f0["input_mask"].shape == (2, 5) and l0["tags"].shape == (2, 5)
    assert f1["input_ids"].shape == (1, 3)
    assert f0["positions"].shape == (2, 10) and l0["label"].shape == (2,)  # not named: untouched
    np.testing.assert_array_equal(f0["input_ids"].numpy(), mask[:2, :5] * 7)
    rounded = list(lengths.trimmed(dataset, lengths.SequenceLengths(multiple=4), ("input_ids", "input_mask")))
    assert [f["input_ids"].shape[1] for f, _ in rounded] == [8, 4]
    assert lengths.trimmed(dataset, lengths.SequenceLengths(pad=True), ("input_ids",)) is dataset
    assert lengths.trimmed(dataset, None, ("input_ids",)) is dataset


def test_cut_batches_give_the_real_tokens_the_padded_values(tiny_config):
    """The encoder on a batch cut to its longest text: every real position's output equals the padded batch's
    (to float rounding), so do the pooled output and every layer."""
    model = BertModel(tiny_config)
    rng = np.random.RandomState(3)
    mask = _masks([5, 11, 2, 8], 20)
    features = {"input_ids": rng.randint(1, 99, mask.shape).astype(np.int32) * mask, "input_mask": mask,
                "segment_ids": (np.arange(20)[None, :] >= 4).astype(np.int32) * mask}
    padded = model(features)
    cut = model(lengths.trim(features, ("input_ids", "input_mask", "segment_ids")))
    assert cut["sequence_output"].shape[1] == 11
    np.testing.assert_allclose(cut["pooled_output"], padded["pooled_output"], atol=1e-6)
    for name in ("sequence_output", "embedding_output"):
        for row, length in enumerate([5, 11, 2, 8]):
            np.testing.assert_allclose(cut[name][row, :length], padded[name][row, :length], atol=1e-6)


def test_length_order_sorts_within_windows():
    order = lengths.length_order([1, 5, 3, 5, 2, 9, 4], [(0, 4), (4, 7)])
    # windows of 4 examples: [1, 5, 3, 5] -> 1, 3 (ties in input order), 2, 0; then [2, 9, 4] -> 5, 6, 4
    np.testing.assert_array_equal(order, [1, 3, 2, 0, 5, 6, 4])
    assert lengths.length_order([], []).size == 0


def test_budget_batches_fill_the_tokens_of_a_padded_batch():
    """Sorted lengths in windows of 6, batch_size 2 at seq_length 12: each batch holds up to 24 tokens at its first
    length (at least batch_size examples), never across a window."""
    values = [12, 10, 4, 4, 3, 1, 12, 2, 2, 2, 1, 1, 1]
    windows = [(0, 6), (6, 12), (12, 13)]
    assert lengths.budget_batches(values, 2, 12, windows) == [(0, 2), (2, 6), (6, 8), (8, 12), (12, 13)]
    assert lengths.budget_batches([5, 5, 5], 2, 8, [(0, 3)], multiple=4) == [(0, 2), (2, 3)]  # 5 -> 8: 16 // 8
    assert lengths.rounded_length(5, 4, 8) == 8
    for length in (0, 5):  # what cut_length computes (an all-padding row counts as one position)
        assert lengths.rounded_length(length, 4, 12) == int(lengths.cut_length(_masks([length], 12), 4))
    assert lengths.rounded_length(5, 4, 6) == 6


@pytest.mark.parametrize("count", [0, 1, 7, 23])
def test_length_sorted_gives_outputs_back_in_the_input_order(count):
    """A 'model' with per-example and per-token outputs, run on length-sorted cut batches: `in_input_order` gives
    the input order's batches (its batch_size partition), with the values of padded batches; per-token outputs as
    wide as the longest text of their window. Windows: 2 batches of 3 examples of the input order."""
    rng = np.random.RandomState(count)
    real = rng.randint(1, 13, count)
    mask = _masks(real, 12)
    inputs = {"input_ids": rng.randint(1, 50, (count, 12)).astype(np.int32) * mask, "input_mask": mask}
    labels = {"weight": rng.rand(count).astype(np.float32)}

    def model(features, labels):
        ids = tf.cast(features["input_ids"], tf.float32)
        running = tf.cumsum(ids, axis=-1) * tf.cast(features["input_mask"], tf.float32)
        return {"total": tf.reduce_sum(ids, -1) * labels["weight"], "running": running,
                "width": tf.fill(tf.shape(ids)[:1], tf.shape(ids)[1])}

    batches = lengths.LengthSorted((inputs, labels), 3, lengths.SequenceLengths(), ("input_ids", "input_mask"),
                                   window_batches=2)
    assert batches.windows == [(start, min(start + 6, count)) for start in range(0, count, 6)]
    ran = [{k: v.numpy() for k, v in model(*batch).items()} for batch in batches.dataset]
    if count > 3:
        assert [r["width"][0] for r in ran[:2]] == sorted([r["width"][0] for r in ran[:2]], reverse=True)
    got = list(batches.in_input_order(ran))
    assert [len(b["total"]) for b in got] == [len(range(i, min(i + 3, count))) for i in range(0, count, 3)]
    expected = [{k: v.numpy() for k, v in model(*batch).items()}
                for batch in tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(3)]
    for first, batch, reference in zip(range(0, count, 3), got, expected, strict=True):
        np.testing.assert_allclose(batch["total"], reference["total"], rtol=1e-6)
        width = batch["running"].shape[1]  # the longest text of the window: the padded positions' values are 0
        assert max(real[first:first + 3]) <= width <= 12
        np.testing.assert_allclose(batch["running"], reference["running"][:, :width])
        assert not reference["running"][:, width:].any()


def test_length_sorted_without_cutting_keeps_the_input_batches():
    mask = _masks([4, 2, 6, 1, 3], 6)
    inputs = {"input_ids": mask, "input_mask": mask}
    for settings in (None, lengths.SequenceLengths(pad=True)):
        batches = lengths.LengthSorted(inputs, 2, settings, ("input_ids", "input_mask"))
        assert [b["input_mask"].shape for b in batches.dataset] == [(2, 6), (2, 6), (1, 6)]
    for fixed in (lengths.LengthSorted(inputs, 2, lengths.SequenceLengths(), ("input_ids", "input_mask"),
                                       fixed_batches=True),  # TPU-style: neither sorted nor cut
                  lengths.LengthSorted(inputs, 2, lengths.SequenceLengths(pad=True, compiled=True),
                                       ("input_ids", "input_mask"))):
        ran = [b["input_mask"].numpy() for b in fixed.dataset]  # the last batch filled up with a zero example
        assert [b.tolist() for b in ran] == [mask[:2].tolist(), mask[2:4].tolist(), [mask[4].tolist(), [0] * 6]]
        got = list(fixed.in_input_order({"sum": b.sum(-1)} for b in ran))  # the filling example's rows dropped
        assert [b["sum"].tolist() for b in got] == [[4, 2], [6, 1], [3]]
    assert fixed.dataset.element_spec["input_mask"].shape == (None, 6)
    assert lengths.LengthSorted(inputs, 2, None, (), fixed_batches=True).dataset.element_spec["input_mask"].shape == (
        2, 6)
    sorted_batches = lengths.LengthSorted(inputs, 2, lengths.SequenceLengths(), ("input_ids", "input_mask"))
    with pytest.raises(RuntimeError, match="Got outputs for 4 of 5 examples"):
        list(sorted_batches.in_input_order(iter([{"x": np.zeros(2)}, {"x": np.zeros(2)}])))


_NAMES = ("input_ids", "input_mask", "segment_ids")


def test_compiled_batches_take_one_shape_per_length(tiny_config):
    """Where each batch shape compiles a program (XLA compiles the forward pass, traced with the batch size and
    length unknown, once for each input shape it is called on), 90 texts sorted in 12 windows run on one shape per
    length, (budget_rows, length) for the lengths 8, 16 and 20 (ceil(20 / 8)), however many windows; without
    `compiled` each window's last batch adds shapes. The outputs are the uncompiled run's, in the same input-order
    batches."""
    model = BertModel(tiny_config)
    inputs = _random_texts(7, 90, 20)

    def run(settings):
        batches = lengths.LengthSorted(inputs, 4, settings, _NAMES, window_batches=2)
        shapes = []

        def outputs():
            for batch in batches.dataset:
                shapes.append(tuple(batch["input_ids"].shape))
                yield {"pooled": model(batch, training=False)["pooled_output"].numpy()}

        return list(batches.in_input_order(outputs())), shapes, batches

    compiled, compiled_shapes, plan = run(lengths.SequenceLengths(multiple=8, compiled=True))
    plain, plain_shapes, _ = run(lengths.SequenceLengths(multiple=8))
    assert len(plan.windows) == 12 and len(compiled_shapes) > 12
    assert set(compiled_shapes) == set(plan.shapes) == {(lengths.budget_rows(4, 20, n), n) for n in (8, 16, 20)}
    assert len(set(plain_shapes)) > 3  # the bound binds
    assert [len(b["pooled"]) for b in compiled] == [len(b["pooled"]) for b in plain] == [4] * 22 + [2]
    for batch, reference in zip(compiled, plain, strict=True):
        np.testing.assert_allclose(batch["pooled"], reference["pooled"], atol=1e-5)


def _layers_run(model, inputs, window_bytes):
    """extract_features' loop on `model` over `inputs` (batches of 4), its windows sized from the traced model's
    output specs (`window_batches`) to hold at most `window_bytes`: the input-order batches of its last two layers'
    activations, the window size in batches, the windows, and the bytes of the model's outputs still alive
    (referenced) each time the loop asks for the next batch or hands one back."""
    def layers(batch):
        encoder_outputs = model(batch, training=False)["encoder_outputs"]
        return {"last": encoder_outputs[-1], "second": encoder_outputs[-2]}

    predictor, settings = prediction.Predictor(layers), lengths.SequenceLengths()
    spec = lengths.batch_spec(inputs, 4, settings, _NAMES)
    specs = predictor.prepare_predict(spec).get_concrete_function().structured_outputs
    assert {name: t.shape.as_list() for name, t in specs.items()} == {
        name: [None, None, model.config.hidden_size] for name in ("last", "second")}
    window = lengths.window_batches(specs, 4, inputs["input_mask"].shape[1], window_bytes)
    batches = lengths.LengthSorted(inputs, 4, settings, _NAMES, window_batches=window)
    alive, held = [], []

    def held_now():
        return sum(array.nbytes for array in (ref() for ref in alive) if array is not None)

    def outputs():
        for out in predictor.predict(batches.dataset):
            held.append(held_now())
            alive.extend(weakref.ref(array) for array in out.values())
            yield out
            del out

    got = []
    for batch in batches.in_input_order(outputs()):
        held.append(held_now())
        got.append(batch)
    return got, window, batches.windows, held


def test_windows_sized_from_the_model_hold_back_at_most_window_bytes(tiny_config):
    """A tiny encoder's activations (2 layers [L, H] float32), handed back in the input order from windows sized
    from its output specs to hold at most 3 padded batches' bytes: windows of exactly 3 batches, what the loop holds
    back never exceeds the bound (it does with one window), and the outputs are the one-window run's (to float
    rounding), in the same input-order batches."""
    model = BertModel(tiny_config)
    inputs = _random_texts(11, 40, 20)
    real = inputs["input_mask"].sum(axis=1)
    bound = 3 * 4 * 20 * 2 * 4 * tiny_config.hidden_size  # 3 batches of 4 examples x 20 positions x 2 layers
    bounded, window, spans, held = _layers_run(model, inputs, bound)
    unbounded, _, one_window, held_unbounded = _layers_run(model, inputs, 2 ** 40)
    assert window == 3 and spans == [(start, min(start + 12, 40)) for start in range(0, 40, 12)]
    assert 0 < max(held) <= bound
    assert len(one_window) == 1 and max(held_unbounded) > bound  # the bound binds
    assert [len(b["last"]) for b in bounded] == [len(b["last"]) for b in unbounded] == [4] * 10
    for first, batch, reference in zip(range(0, 40, 4), bounded, unbounded, strict=True):
        for name in ("last", "second"):
            for row, length in enumerate(real[first:first + 4]):
                np.testing.assert_allclose(batch[name][row, :length], reference[name][row, :length], atol=1e-5)


def test_window_batches_bound_the_worst_case():
    """One example's outputs, an unknown axis counted as seq_length, each value its dtype's bytes: a window holds as
    many whole batches as fit the bytes were every example that long, at least one."""
    specs = {"logits": tf.TensorSpec([None, 3], tf.float32), "layer": tf.TensorSpec([None, None, 8], tf.float16),
             "top": tf.TensorSpec([None, None, 2], tf.int64), "loss": tf.TensorSpec([None], tf.float32)}
    example = 3 * 4 + 10 * 8 * 2 + 10 * 2 * 8 + 4  # at seq_length 10
    assert lengths.window_batches(specs, 4, 10, 5 * 4 * example) == 5
    assert lengths.window_batches(specs, 4, 10, 5 * 4 * example - 1) == 4
    assert lengths.window_batches(specs, 4, 10, 1) == 1
    assert lengths.window_batches(specs, 4, 10) * 4 * example <= lengths.WINDOW_BYTES


def _example_stream(seed):
    """Single examples of lengths 1..24 (padded to 24), repeated and shuffled."""
    rng = np.random.RandomState(seed)
    real = rng.randint(1, 25, 60)
    mask = _masks(real, 24)
    features = {"input_ids": (np.arange(60)[:, None] + 1) * mask, "input_mask": mask}
    return tf.data.Dataset.from_tensor_slices((features, {"label": np.arange(60)})).repeat().shuffle(20, seed=seed)


def test_grouped_batches_hold_similar_lengths_and_resume_exactly(tmp_path):
    settings = lengths.SequenceLengths(multiple=8, group_by_length=True)
    grouped = lengths.grouped_batches(_example_stream(1), 4, settings, ("input_ids", "input_mask"))
    iterator = iter(grouped)
    for _ in range(10):
        features, labels = next(iterator)
        real = lengths.real_lengths(features["input_mask"]).numpy()
        assert features["input_mask"].shape == (4, -(-real.max() // 8) * 8)  # cut, rounded up to 8
        assert len({(length - 1) // 8 for length in real}) == 1, real  # one bucket of width 8
    saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    expected = [next(iterator)[1]["label"].numpy() for _ in range(6)]
    resumed = iter(lengths.grouped_batches(_example_stream(1), 4, settings, ("input_ids", "input_mask")))
    tf.train.Checkpoint(iterator=resumed).restore(saved)
    for labels in expected:
        np.testing.assert_array_equal(next(resumed)[1]["label"].numpy(), labels)
