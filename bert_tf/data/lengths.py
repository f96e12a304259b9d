"""Batches as long as their longest text, not max_seq_length: trimmed training batches, length-sorted prediction.

The original packs every example to max_seq_length (`[CLS] a [SEP] (b [SEP])`, then zero padding, input_mask 0)
because TPUEstimator needs fixed shapes. A padded position changes no real position's output: its key gets -10000
added to every attention score, whose exponential underflows to exactly 0 in float32, and nothing else mixes
positions. So a batch cut to its longest real sequence gives its real positions the same values, to float rounding;
on real texts (the quickstart's reviews: 27 of 128 tokens on average) that is most of the computation saved.

What cutting keeps and changes:
- every example, batch, order and loss term is the same; the outputs at padded positions (which no loss, metric or
  output file of the original's tasks reads) are gone;
- dropout draws its masks for the cut shape: with dropout on, training draws other random masks than a padded run
  (statistically the same dropout, as another seed); with dropout off it computes the padded run's numbers;
- run_squad.py keeps max_seq_length: the original's span loss takes its softmax over every position, padding
  included, and its n-best lists pick from every position too, so cutting would change its numbers (its export
  packs text to max_seq_length too, unless told to cut: bert_tf.export.saved_model).

One length per update on several replicas: the training readers cut the update's whole batch (batch_size x the
replicas) as one and split it into the replicas' batches (bert_tf.data.records.replica_batches), so every replica
of an update gets the update's longest text, as one device would; on several workers the fine-tuning readers cut
the global batch on every worker, and pretraining workers, which read their own files, pad to the update's longest
of all workers (bert_tf.training.feed). That is what a program run on every replica needs (TPUStrategy, an
XLA-compiled update on several GPUs). Under TPUStrategy one reader feeds every core: training batches cut per
update to its longest text rounded up to XLA_MULTIPLE, whole batches for evaluation and prediction (the task's
`fixed_batches`), and `pad` gives the original's fixed shapes; untested here (no TPU). Tested: 2 logical CPU devices
of one worker and 2 local workers (tests/training/test_multi_worker.py, tests/data/test_records.py).

`SequenceLengths` holds a run's settings: `pad` (the original's fixed shapes, `--pad_to_max_seq_length`),
`multiple` (lengths rounded up to a multiple of it, capped at max_seq_length: under XLA and on TPU each length
compiles its own program, so 32 keeps a run at ceil(max_seq_length / 32) programs), `group_by_length` (training
batches of similar lengths; opt-in: it changes which examples share a batch), `compiled` (each batch shape compiles a
program, --use_xla or TPU: prediction pads its batches' rows to one count per length, see `LengthSorted`).

- `trimmed(dataset, lengths, names)`: a batched dataset cut batch by batch (training, and evaluation in file order);
  `batched` / `batcher`: training batches, cut or grouped as `lengths` says.
- `grouped_batches(dataset, batch_size, lengths, names)`: training batches drawn from buckets of
  similar lengths (`tf.data`'s `bucket_by_sequence_length`), then cut.
- `LengthSorted`: prediction over in-memory inputs in batches sorted by length within windows of the input order,
  each batch holding as many examples as fit the tokens of a padded batch, the outputs handed back in the input
  order and in the batches of the input order, so that every output file and metric (the mean of batch means
  included) is the padded run's to float rounding. A window is as many whole batches as keep the outputs it holds
  back (`OutputBytes`, one example's) within `WINDOW_BYTES` (`windows`). Where each shape compiles a program
  (`compiled`), its batches take one shape per length: at most ceil(max_seq_length / multiple) programs.
  `bert_tf.training.prediction.predict_in_order` runs a model on them: the one prediction loop.
"""
import dataclasses
import functools

import numpy as np
import tensorflow as tf

from bert_tf.data import records
from bert_tf.text import packing

MASK = "input_mask"  # the feature that says which positions are real (1) and which are padding (0)
XLA_MULTIPLE = 32  # the default rounding where each length compiles a program (--use_xla, TPU)
GROUP_WIDTH = 16  # bucket width of `group_by_length` without rounding
WINDOW_BYTES = 256 * 2 ** 20  # LengthSorted holds back at most this many bytes of outputs (or one batch's)


@dataclasses.dataclass(frozen=True)
class SequenceLengths:
    """How the sequence axis of a run's batches is cut (see the module docstring)."""
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
        """A run's settings: `multiple` None means XLA_MULTIPLE when each shape is `compiled` (XLA, TPU), else 1."""
        if multiple is None:
            multiple = XLA_MULTIPLE if compiled else 1
        return cls(pad=bool(pad), multiple=int(multiple), group_by_length=bool(group_by_length),
                   compiled=bool(compiled))


def real_lengths(mask):
    """[..., S] 0/1 mask -> [...] int32: one past the last real position of each row (0 for an all-padding row)."""
    mask = tf.convert_to_tensor(mask)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    return tf.reduce_max(tf.where(mask > 0, positions, 0), axis=-1)


def cut_length(mask, multiple=1):
    """The length a batch with `mask` [B, ..., S] is cut to: its longest real row, rounded up to `multiple`, at
    least 1 and at most S."""
    seq_length = tf.shape(mask)[-1]
    longest = tf.maximum(tf.reduce_max(real_lengths(mask)), 1)
    return tf.minimum(seq_length, packing.round_up(longest, multiple))


def _dicts(element):
    """The dicts of a dataset element: a dict, or a tuple of dicts (features, labels)."""
    return element if isinstance(element, tuple) else (element,)


def cut(element, names, length):
    """`element` (a dict or a tuple of dicts of tensors) with the tensors named in `names` cut to `length` on
    their last axis."""
    cut_dicts = tuple({name: t[..., :length] if name in names else t for name, t in d.items()}
                      for d in _dicts(element))
    return cut_dicts if isinstance(element, tuple) else cut_dicts[0]


def trim(element, names, multiple=1):
    """A batch (`element`, whose first dict holds `input_mask`) cut to its longest real sequence (`cut_length`)."""
    return cut(element, names, cut_length(_dicts(element)[0][MASK], multiple))


def trimmed(dataset, lengths, names):
    """`dataset` (batches) with each batch cut by `trim`; unchanged when `lengths` is None or pads."""
    if lengths is None or lengths.pad:
        return dataset

    @tf.autograph.experimental.do_not_convert
    def trim_batch(*element):
        return trim(element if len(element) > 1 else element[0], names, lengths.multiple)

    return dataset.map(trim_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def batched(dataset, batch_size, lengths, names, drop_remainder=True):
    """Batches of `dataset` (decoded training examples, repeated): cut to their longest text (`trimmed`), or with
    `group_by_length` grouped by length (`grouped_batches`), as `lengths` says (None: `Dataset.batch`)."""
    if lengths is not None and lengths.group_by_length:
        return grouped_batches(dataset, batch_size, lengths, names)
    return trimmed(dataset.batch(batch_size, drop_remainder=drop_remainder), lengths, names)


def batcher(lengths, names):
    """`batched` for `lengths` and `names` as a `batch(dataset, batch_size, drop_remainder)` function (what
    `bert_tf.data.records.training_dataset` takes)."""
    def batch(dataset, batch_size, drop_remainder=True):
        return batched(dataset, batch_size, lengths, names, drop_remainder)
    return batch


def grouped_batches(dataset, batch_size, lengths, names):
    """Batches of `batch_size` examples of similar lengths from `dataset` (single examples of a static
    max_seq_length, repeated): each drawn from its bucket of lengths (bucket width `lengths.multiple`, or
    GROUP_WIDTH without rounding) once the bucket holds a batch, then cut (`trim`). The order is a function of the
    input's; a run resumes it exactly (the buckets are part of the iterator's checkpoint)."""
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
    """NumPy: [N, ..., S] 0/1 mask -> [N] the real length of each example (its longest row)."""
    mask = np.asarray(mask)
    positions = np.arange(1, mask.shape[-1] + 1)
    lengths = np.where(mask > 0, positions, 0).max(axis=-1)
    return lengths.reshape(len(mask), -1).max(axis=1) if lengths.ndim > 1 else lengths


def length_order(lengths, windows):
    """The order LengthSorted runs examples in: within each window [(start, end)] of the input order, longest first
    (ties in input order). Returns the permutation (input indexes in run order)."""
    lengths = np.asarray(lengths)
    return np.concatenate([start + np.argsort(-lengths[start:end], kind="stable") for start, end in windows]
                          or [np.zeros([0], np.int64)])


def rounded_length(length, multiple, seq_length):
    """NumPy/Python: `length` (at least 1) rounded up to a multiple of `multiple`, at most seq_length (what
    `cut_length` computes in TensorFlow)."""
    return min(seq_length, packing.round_up(max(1, int(length)), multiple))


def budget_rows(batch_size, seq_length, length):
    """The examples of a batch cut to `length` that fit the tokens of a padded batch, batch_size x seq_length (at
    least batch_size)."""
    return max(batch_size, batch_size * seq_length // length)


def budget_batches(lengths, batch_size, seq_length, windows, multiple=1):
    """Batches of examples in run order (their `lengths`, longest first within each window [(start, end)]):
    [(start, end)], each as many examples as fit the tokens of a padded batch (`budget_rows`) at the length of its
    first (longest) example rounded up to `multiple` (no batch across two windows)."""
    bounds = []
    for start, last in windows:
        while start < last:
            length = rounded_length(lengths[start], multiple, seq_length)
            end = min(last, start + budget_rows(batch_size, seq_length, length))
            bounds.append((start, end))
            start = end
    return bounds


@dataclasses.dataclass(frozen=True)
class OutputBytes:
    """The bytes one example's outputs take in a batch cut to length L: `fixed` + `per_position` x L.

    `fixed`: the outputs without a sequence axis (probabilities [num_labels] float32: 4 x num_labels);
    `per_position`: those with one, per position (a layer's activations [L, H] float32: 4 x H). An upper bound
    serves (4 bytes a value where a policy may make them 16-bit); `LengthSorted` refuses outputs that take more."""
    fixed: int = 0
    per_position: int = 0

    def at(self, length):
        return self.fixed + self.per_position * length


def held_bytes(lengths, bounds, output_bytes, seq_length, multiple=1):
    """The bytes of the outputs of the run-order batches `bounds` ([(start, end)] of examples with `lengths`, each
    batch cut to its first's length): what LengthSorted holds back once they all ran."""
    return sum((end - start) * output_bytes.at(rounded_length(lengths[start], multiple, seq_length))
               for start, end in bounds)


def windows(lengths, batch_size, seq_length, output_bytes, window_bytes=WINDOW_BYTES, multiple=1):
    """The windows LengthSorted sorts within: [(start, end)] covering the input order of examples with `lengths`,
    each as many whole batches of `batch_size` as a search finds (`_most`) whose outputs, run sorted in their
    `budget_batches`, take at most `window_bytes` (`held_bytes`); at least one batch, whatever it takes."""
    lengths = np.asarray(lengths)

    def fits(first, batches):
        part = lengths[first:first + batches * batch_size]
        part = part[length_order(part, [(0, len(part))])]
        bounds = budget_batches(part, batch_size, seq_length, [(0, len(part))], multiple)
        return held_bytes(part, bounds, output_bytes, seq_length, multiple) <= window_bytes

    spans, first = [], 0
    while first < len(lengths):
        batches = _most(functools.partial(fits, first), -(-(len(lengths) - first) // batch_size))
        spans.append((first, min(len(lengths), first + batches * batch_size)))
        first = spans[-1][1]
    return spans


def _most(fits, most):
    """The largest k in 1..most with fits(k) (1 if none), searched by doubling k from 1 (so that the search costs
    what its answer does, whatever `most`), then halving the gap."""
    good, bad = 1, most + 1
    while good < most:
        trial = min(2 * good, most)
        if not fits(trial):
            bad = trial
            break
        good = trial
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


class LengthSorted:
    """Prediction over in-memory inputs in length-sorted, cut batches, the outputs given back in the input order.

    `inputs`: a dict, or a tuple of dicts (features, labels), of NumPy arrays [N, ...] in the input order.
    `lengths`: SequenceLengths (None or `pad`: batches of `batch_size` in the input order, not cut); `names`: the
    arrays with the sequence on their last axis. `fixed_batches`: TPU-style whole batches of `batch_size`, a static
    batch size (then nothing is sorted or cut either).

    The examples are sorted within windows of the input order (`windows`): as many whole batches as keep the
    outputs of a window within `window_bytes`, by `output_bytes` (an `OutputBytes`: what one example's outputs take
    at a cut length); at least one batch. Sorted, they run in batches of as many examples as fit the tokens of one
    padded batch (`budget_batches`: batch_size x max_seq_length): the memory the caller chose for a batch, filled
    with real tokens (eight reviews of 27 tokens at max_seq_length 128 become batches of 37; MiniLM spent 1.96
    instead of 2.71 ms on each example on 2 CPUs). Each example's outputs are its own (to float rounding), whatever
    batch it ran in.

    Where each batch shape compiles a program (`lengths.compiled`: XLA, TPU) or the batches are `fixed_batches`,
    a batch with fewer examples than `budget_rows` at its length (a window's last; in the input order: the last) is
    filled up with all-zero examples, so that the batches take one shape per length (`shapes`): at most
    ceil(max_seq_length / lengths.multiple) of them, one without cutting, however many windows and examples.

    `dataset`: the batches to run, as a tf.data.Dataset of the inputs' structure. `in_input_order(outputs)` takes
    the model's outputs for those batches (an iterable of dicts of NumPy arrays [rows, ...], e.g.
    `Trainer.predict(dataset)`) and yields the same dicts for the batches `batch_size` of the input order would
    make, in that order, without the filling examples' rows; outputs with a sequence axis are zero-padded beyond
    each example's real length to the window's longest. It holds back one window's outputs as they came (at most
    `window_bytes`, or one batch's where that is more) and the batch it hands back; a batch whose outputs take more
    than `output_bytes` allows is an error.
    """

    def __init__(self, inputs, batch_size, lengths, names, fixed_batches=False, *, output_bytes,
                 window_bytes=WINDOW_BYTES):
        self.batch_size = batch_size
        self.output_bytes = output_bytes
        self.inputs = tuple({name: np.asarray(a) for name, a in d.items()} for d in _dicts(inputs))
        self.structured = isinstance(inputs, tuple)
        self.names = names
        mask = self.inputs[0][MASK]
        self.seq_length = mask.shape[-1]
        self.count = len(mask)
        self.sorts = lengths is not None and not lengths.pad and not fixed_batches
        if self.sorts:
            real = example_lengths(mask)
            self.windows = windows(real, batch_size, self.seq_length, output_bytes, window_bytes, lengths.multiple)
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
        signature = tuple({name: self._spec(name, a, batch_size if fixed_batches else None) for name, a in d.items()}
                          for d in self.inputs)
        self.dataset = records.read_once(tf.data.Dataset.from_generator(
            self._batches, output_signature=signature if self.structured else signature[0]))

    def _spec(self, name, array, batch_size):
        """The TensorSpec of an input's batches: the batch size (None unless fixed), the sequence axis None where
        batches are cut."""
        shape = [batch_size, *array.shape[1:]]
        if self.sorts and name in self.names:
            shape[-1] = None
        return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

    def _batches(self):
        """The batches of `bounds` (run order): the `names` arrays cut to each batch's length, the rows filled up
        to its `shapes` rows with zeros."""
        for (start, end), (rows, length) in zip(self.bounds, self.shapes):
            picked = self.order[start:end]
            batch = tuple({name: _filled(a[picked][..., :length] if name in self.names else a[picked], rows)
                           for name, a in d.items()} for d in self.inputs)
            yield batch if self.structured else batch[0]

    def in_input_order(self, outputs):
        """See the class docstring."""
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
        """The outputs of run batch `index` for its real examples (copies without the filling examples' rows, so
        that those are not held back). Refuses outputs that take more than `output_bytes` allows (the windows,
        sized by it, would hold more than `window_bytes`) and a batch beyond the last."""
        if index >= len(self.bounds):
            raise RuntimeError(f"Got outputs for more than the {len(self.bounds)} batches run.")
        start, end = self.bounds[index]
        rows, length = len(next(iter(batch.values()))), self.shapes[index][1]
        taken = sum(np.asarray(values).nbytes for values in batch.values())
        if self.sorts and taken > rows * self.output_bytes.at(length):
            raise RuntimeError(
                f"The outputs of batch {index} ({rows} examples cut to {length} positions) take {taken} bytes, more "
                f"than the {rows * self.output_bytes.at(length)} of {self.output_bytes}: the caller's output_bytes "
                f"misses some of {sorted(batch)}.")
        if rows == end - start:
            return batch
        return {name: np.array(values[:end - start]) for name, values in batch.items()}

    def _window(self, batches, start, end):
        """The input-order batches of examples start..end, from the run-order outputs `batches` of that window."""
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
