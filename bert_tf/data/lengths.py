"""Batches as long as their longest text, not max_seq_length: trimmed training batches, length-sorted prediction.

A padded position changes no real position's output (its attention scores get -10000: exactly 0 after softmax in
float32), so a cut batch gives real positions the padded batch's values, to float rounding. Rules:
- examples, batches, order and loss terms are the original's; with dropout on, masks are drawn for the cut shape.
  run_squad.py pads (its softmax spans all positions).
- One length per update: several replicas' batches are cut as one (records.replica_batches).
- `compiled` (XLA, TPU): lengths round up to `multiple`, at most ceil(max_seq_length / multiple) programs.
- `LengthSorted` sorts within windows of whole batches and hands outputs back in the input order
  (bert_tf.training.prediction.predict_in_order).
"""
import dataclasses

import numpy as np
import tensorflow as tf

from bert_tf.data import records
from bert_tf.text import packing

MASK = "input_mask"  # the feature that says which positions are real (1) and which are padding (0)
XLA_MULTIPLE = 32  # the default rounding where each length compiles a program (--use_xla, TPU)
GROUP_WIDTH = 16  # bucket width of `group_by_length` without rounding
WINDOW_BYTES = 256 * 2 ** 20  # the most a prediction window's outputs take (or one batch's), every text at its longest


@dataclasses.dataclass(frozen=True)
class SequenceLengths:
    """How the sequence axis of a run's batches is cut: `pad` (the original's fixed shapes), `multiple` (lengths rounded
    up to it), `group_by_length` (opt-in: training batches of similar lengths), `compiled` (each shape compiles a
    program: prediction fills batches to one row count per length)."""
    pad: bool = False
    multiple: int = 1
    group_by_length: bool = False
    compiled: bool = False

    def __post_init__(self):
        if self.multiple < 1:
            raise ValueError(f"seq_length_multiple must be >= 1, got {self.multiple}.")
        if self.pad and self.group_by_length:
            raise ValueError("--group_by_length groups batches by their cut lengths: it does not go with "
                             "--pad_to_max_seq_length.")

    @classmethod
    def for_run(cls, pad=False, compiled=False, multiple=None, group_by_length=False):
        """A run's settings: `multiple` None means XLA_MULTIPLE when `compiled`, else 1."""
        if multiple is None:
            multiple = XLA_MULTIPLE if compiled else 1
        return cls(pad=bool(pad), multiple=int(multiple), group_by_length=bool(group_by_length),
                   compiled=bool(compiled))


def real_lengths(mask):
    """[..., S] 0/1 mask -> [...] int32: one past each row's last real position (0: all padding)."""
    mask = tf.convert_to_tensor(mask)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    return tf.reduce_max(tf.where(mask > 0, positions, 0), axis=-1)


def cut_length(mask, multiple=1):
    """The length a batch with `mask` [B, ..., S] is cut to: its longest real row rounded up to `multiple`, 1 to S."""
    seq_length = tf.shape(mask)[-1]
    longest = tf.maximum(tf.reduce_max(real_lengths(mask)), 1)
    return tf.minimum(seq_length, packing.round_up(longest, multiple))


def _dicts(element):
    """The dicts of a dataset element: a dict, or a tuple of dicts (features, labels)."""
    return element if isinstance(element, tuple) else (element,)


def trim(element, names, multiple=1):
    """A batch, its tensors named in `names` cut on the last axis to its longest real sequence
    (`cut_length`)."""
    length = cut_length(_dicts(element)[0][MASK], multiple)
    cut = tuple({name: t[..., :length] if name in names else t for name, t in d.items()}
                for d in _dicts(element))
    return cut if isinstance(element, tuple) else cut[0]


def trimmed(dataset, lengths, names):
    """`dataset` with each batch `trim`med; unchanged when `lengths` is None or pads."""
    if lengths is None or lengths.pad:
        return dataset

    @tf.autograph.experimental.do_not_convert
    def trim_batch(*element):
        return trim(element if len(element) > 1 else element[0], names, lengths.multiple)

    return dataset.map(trim_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def batched(dataset, batch_size, lengths, names, drop_remainder=True):
    """Batches of repeated training examples, cut (`trimmed`) or grouped by length (`grouped_batches`) as `lengths` says
    (None: `Dataset.batch`)."""
    if lengths is not None and lengths.group_by_length:
        return grouped_batches(dataset, batch_size, lengths, names)
    return trimmed(dataset.batch(batch_size, drop_remainder=drop_remainder), lengths, names)


def batcher(lengths, names):
    """`batched` as the `batch(dataset, batch_size, drop_remainder)` `bert_tf.data.records.training_dataset` takes."""
    return lambda dataset, batch_size, drop_remainder=True: batched(
        dataset, batch_size, lengths, names, drop_remainder)


def grouped_batches(dataset, batch_size, lengths, names):
    """Batches of examples of similar lengths, each drawn from its bucket (width `lengths.multiple` or GROUP_WIDTH) once
    it holds a batch, then `trim`med. The order is a function of the input's and resumes exactly (the buckets are in the
    iterator's checkpoint)."""
    max_seq_length = _dicts(dataset.element_spec)[0][MASK].shape[-1]
    width = lengths.multiple if lengths.multiple > 1 else GROUP_WIDTH
    boundaries = list(range(width + 1, max_seq_length + 1, width))

    @tf.autograph.experimental.do_not_convert
    def length_of(*element):
        return tf.reduce_max(real_lengths(_dicts(element if len(element) > 1 else element[0])[0][MASK]))

    grouped = dataset.bucket_by_sequence_length(length_of, boundaries, [batch_size] * (len(boundaries) + 1),
                                                no_padding=True, drop_remainder=True)
    return trimmed(grouped, lengths, names)


def example_lengths(mask):
    """NumPy: [N, ..., S] 0/1 mask -> [N] each example's real length (its longest row)."""
    mask = np.asarray(mask)
    positions = np.arange(1, mask.shape[-1] + 1)
    lengths = np.where(mask > 0, positions, 0).max(axis=-1)
    return lengths.reshape(len(mask), -1).max(axis=1) if lengths.ndim > 1 else lengths


def length_order(lengths, windows):
    """The permutation LengthSorted runs examples in (input indexes): longest first within each window [(start, end)],
    ties in input order."""
    lengths = np.asarray(lengths)
    return np.concatenate([start + np.argsort(-lengths[start:end], kind="stable") for start, end in windows]
                          or [np.zeros([0], np.int64)])


def rounded_length(length, multiple, seq_length):
    """NumPy `cut_length`: `length` rounded up to `multiple`, at most seq_length."""
    return min(seq_length, packing.round_up(max(1, int(length)), multiple))


def budget_rows(batch_size, seq_length, length):
    """How many examples cut to `length` fit the tokens of a padded batch (at least batch_size)."""
    return max(batch_size, batch_size * seq_length // length)


def budget_batches(lengths, batch_size, seq_length, windows, multiple=1):
    """[(start, end)] batches of run order, each as many examples as `budget_rows` allows at its first (longest)
    example's rounded length; no batch spans two windows."""
    bounds = []
    for start, last in windows:
        while start < last:
            length = rounded_length(lengths[start], multiple, seq_length)
            end = min(last, start + budget_rows(batch_size, seq_length, length))
            bounds.append((start, end))
            start = end
    return bounds


def sorts(lengths, fixed_batches=False):
    """Whether prediction sorts and cuts: not where `lengths` is None or pads, nor for fixed_batches."""
    return lengths is not None and not lengths.pad and not fixed_batches


def batch_spec(inputs, batch_size, lengths, names, fixed_batches=False):
    """The element_spec of LengthSorted's batches of `inputs`, for tracing ahead of time."""
    cut = sorts(lengths, fixed_batches)

    def spec(name, array):
        shape = [batch_size if fixed_batches else None, *array.shape[1:]]
        if cut and name in names:
            shape[-1] = None
        return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

    specs = tuple({name: spec(name, np.asarray(a)) for name, a in d.items()} for d in _dicts(inputs))
    return specs if isinstance(inputs, tuple) else specs[0]


def window_batches(outputs, batch_size, seq_length, window_bytes=WINDOW_BYTES):
    """The whole batches in a window: as many as keep their `outputs` within `window_bytes` at seq_length each; at least
    one."""
    example = sum(int(np.prod([seq_length if n is None else n for n in spec.shape[1:]])) * spec.dtype.size
                  for spec in tf.nest.flatten(outputs))
    return max(1, window_bytes // (batch_size * max(1, example)))


class LengthSorted:
    """Prediction over in-memory inputs in length-sorted, cut batches, outputs given back in input order.

    `inputs`: a dict or a tuple of dicts of NumPy arrays [N, ...]; `names`: the arrays with the sequence last. With
    `lengths` None or `pad`, or `fixed_batches` (TPU): the input order, uncut. Otherwise examples are sorted within
    windows of `window_batches` x `batch_size` and batched by `budget_batches`; where shapes compile, short batches are
    filled with zero rows. `in_input_order(outputs)` yields the input order's batches of outputs of `dataset`, sequence
    outputs zero-padded to the window's longest.
    """

    def __init__(self, inputs, batch_size, lengths, names, fixed_batches=False, window_batches=1):
        self.batch_size = batch_size
        self.inputs = tuple({name: np.asarray(a) for name, a in d.items()} for d in _dicts(inputs))
        self.structured = isinstance(inputs, tuple)
        self.names = names
        mask = self.inputs[0][MASK]
        self.seq_length = mask.shape[-1]
        self.count = len(mask)
        self.sorts = sorts(lengths, fixed_batches)
        if self.sorts:
            real = example_lengths(mask)
            window = window_batches * batch_size
            self.windows = [(start, min(start + window, self.count)) for start in range(0, self.count, window)]
            self.order = length_order(real, self.windows)
            self.bounds = budget_batches(real[self.order], batch_size, self.seq_length, self.windows,
                                         lengths.multiple)
            cut = [rounded_length(real[self.order[start]], lengths.multiple, self.seq_length)
                   for start, _ in self.bounds]
        else:
            self.order = np.arange(self.count)
            self.bounds = [(start, min(start + batch_size, self.count)) for start in range(0, self.count, batch_size)]
            cut = [self.seq_length] * len(self.bounds)
        filled = fixed_batches or (lengths is not None and lengths.compiled)
        self.shapes = [(budget_rows(batch_size, self.seq_length, length) if filled else end - start, length)
                       for (start, end), length in zip(self.bounds, cut)]  # each batch's (rows, length)
        signature = batch_spec(inputs, batch_size, lengths, names, fixed_batches)
        self.dataset = records.read_once(tf.data.Dataset.from_generator(self._batches, output_signature=signature))

    def _batches(self):
        """The batches of `bounds`: `names` arrays cut to each batch's length, filled to its rows."""
        for (start, end), (rows, length) in zip(self.bounds, self.shapes):
            picked = self.order[start:end]
            batch = tuple({name: _filled(a[picked][..., :length] if name in self.names else a[picked], rows)
                           for name, a in d.items()} for d in self.inputs)
            yield batch if self.structured else batch[0]

    def in_input_order(self, outputs):
        pending, received, spans = [], 0, iter(self.windows if self.sorts else ())
        start, end = next(spans, (0, 0))
        for index, batch in enumerate(outputs):
            batch = self._real_rows(index, batch)
            received += len(next(iter(batch.values())))
            if not self.sorts:
                yield batch
                continue
            pending.append(batch)
            while received >= end > start:
                yield from self._window(pending, start, end)
                pending = []
                start, end = next(spans, (end, end))
        if received != self.count:
            raise RuntimeError(f"Got outputs for {received} of {self.count} examples.")

    def _real_rows(self, index, batch):
        """Copies of run batch `index`'s outputs without its filling rows (so those are not held back)."""
        if index >= len(self.bounds):
            raise RuntimeError(f"Got outputs for more than the {len(self.bounds)} batches run.")
        start, end = self.bounds[index]
        if len(next(iter(batch.values()))) == end - start:
            return batch
        return {name: np.array(values[:end - start]) for name, values in batch.items()}

    def _window(self, batches, start, end):
        """The input-order batches of examples start..end, from that window's run-order outputs."""
        sizes = [len(next(iter(b.values()))) for b in batches]
        source = np.repeat(np.arange(len(batches)), sizes)  # run position -> its batch
        row = np.concatenate([np.arange(size) for size in sizes])  # run position -> its row in that batch
        where = np.empty(end - start, np.int64)
        where[self.order[start:end] - start] = np.arange(end - start)  # input position -> run position
        widest = {name: np.max([b[name].shape for b in batches], axis=0)[1:] for name in batches[0]}
        for first in range(0, end - start, self.batch_size):
            picked = where[first:first + self.batch_size]
            yield {name: _gathered([b[name] for b in batches], source[picked], row[picked], shape)
                   for name, shape in widest.items()}


def _filled(array, rows):
    """`array` [n, ...] with rows of zeros appended up to `rows`."""
    if len(array) >= rows:
        return array
    return np.concatenate([array, np.zeros((rows - len(array), *array.shape[1:]), array.dtype)])


def _gathered(parts, source, row, shape):
    """[len(source), *shape]: row `row[i]` of `parts[source[i]]` for each i, zero-padded to `shape`."""
    gathered = np.zeros((len(source), *shape), parts[0].dtype)
    for part in np.unique(source):
        taken = np.flatnonzero(source == part)
        values = parts[part][row[taken]]
        gathered[(taken, *(slice(0, size) for size in values.shape[1:]))] = values
    return gathered
