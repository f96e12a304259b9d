"""The TFRecord files the run scripts write and read, one writer and one parser for every schema.

A schema is an ordered dict of feature name -> `tf.io.FixedLenFeature` (each task module defines its own, with the
original scripts' names, order and dtypes). `example(values, schema)` builds the tf.train.Example of one record
(features in the schema's order, as the original's OrderedDicts), `write(path, serialized)` writes records
atomically, digesting them as they are written (`Writer.fingerprint`: what a run wrote is told by its content),
`parse(record, schema)` reads one back with int64 cast to int32 as the original's input_fn does.
`naming_corrupt_records(files)`: a corrupt record met while reading is an error naming its file and record.

The training readers are replayable: their order is a function of `seed` alone (each worker keeping its share:
`worker_share`), so that `Trainer.train` can resume a run by rebuilding the reader with the seed saved in its
checkpoint and skipping the batches already used.

One batch length per update: the training readers batch the global batch (batch_size x num_replicas_in_sync, as
one device has it), cut it to its longest text (bert_tf.data.lengths), then split it into the replicas' batches
(`replica_batches`), on one worker as on several. So every replica of an update, on every worker, gets one shape:
what a program run on every replica needs (TPUStrategy, an XLA-compiled update on several GPUs), the all-reduce of
the embedding's IndexedSlices gradient included.
"""
import contextlib
import hashlib
import re

import tensorflow as tf

from bert_tf import fileio


def example(values, schema):
    """A tf.train.Example of `values` (name -> int, float or a sequence of them) in the order of `schema`."""
    features = {}
    for name, spec in schema.items():
        value = values[name]
        value = list(value) if hasattr(value, "__len__") else [value]
        features[name] = (tf.train.Feature(float_list=tf.train.FloatList(value=value)) if spec.dtype == tf.float32
                          else tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in value])))
    return tf.train.Example(features=tf.train.Features(feature=features))


class Writer:
    """Called with one serialized record, writes it (`writer`); counts them (`count`) and digests them, in order,
    as they are written (`fingerprint`: a SHA-256 hex digest of each record's length and bytes), so that what a run
    wrote is told by its content without reading it back."""

    def __init__(self, write_record):
        self._write = write_record
        self._digest = hashlib.sha256()
        self.count = 0

    def __call__(self, record):
        self._write(record)
        self._digest.update(len(record).to_bytes(8, "little"))
        self._digest.update(record)
        self.count += 1

    @property
    def fingerprint(self):
        return self._digest.hexdigest()


@contextlib.contextmanager
def writer(path):
    """Yields a `Writer` of the TFRecord file `path`; the file is written under a temporary name and renamed when
    the block completes (removed if it raises)."""
    with fileio.written_atomically(path) as tmp, tf.io.TFRecordWriter(tmp) as records:
        yield Writer(records.write)


def write(path, serialized):
    """Writes serialized records (an iterable of bytes) to `path` atomically; returns its `Writer` (the records'
    count and fingerprint)."""
    with writer(path) as write_record:
        for record in serialized:
            write_record(record)
    return write_record


def first_corrupt(files, batch=1024):
    """(file, records read before the first that fails to read) of the first of `files` holding a corrupt or
    truncated record, read to its end (TFRecords, GZIP-compressed ones recognized: `compression_of`), with
    TensorFlow's error message; None when every file reads."""
    for path in files:
        compression = compression_of(path)
        read = 0
        try:
            for records in tf.data.TFRecordDataset(path, compression_type=compression).batch(batch):
                read += int(tf.shape(records)[0])
        except tf.errors.DataLossError:  # in the batch after `read`: find the record
            try:
                for _ in tf.data.TFRecordDataset(path, compression_type=compression).skip(read):
                    read += 1
            except tf.errors.DataLossError as e:  # its message, without TensorFlow's op names
                return path, read, re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:.*", "", e.message, flags=re.S)
    return None


@contextlib.contextmanager
def naming_corrupt_records(files):
    """Turns TensorFlow's DataLossError raised in the block (a corrupt record, which its message names by byte
    offset alone) into a ValueError naming the first of `files` holding one (`first_corrupt`) and what to do; the
    error is raised as it is when every file reads (e.g. a corrupt checkpoint)."""
    try:
        yield
    except tf.errors.DataLossError as e:
        corrupt = first_corrupt(files)
        if corrupt is None:
            raise
        path, read, message = corrupt
        raise ValueError(f"{path}: a corrupt record after its first {read} record(s) ({message}): the file is "
                         f"damaged; replace it with an intact copy, or leave it out of the input files.") from e


def compression_of(path):
    """"GZIP" if the file starts with the gzip magic bytes, else "" (plain TFRecords)."""
    with fileio.open_file(path, "rb", name="") as f:
        return "GZIP" if f.read(2) == b"\x1f\x8b" else ""


def parse(record, schema):
    """One serialized record -> dict of tensors by `schema`; int64 features become int32, as in the original."""
    parsed = tf.io.parse_single_example(record, schema)
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in parsed.items()}


def decoded(dataset, decode):
    """`dataset` mapped by `decode` in parallel, in order. `decode` is traced as plain Python, without AutoGraph: a
    record decoder parses and casts, with no control flow on tensors, and converting it cost ~0.25 s per dataset."""
    return dataset.map(tf.autograph.experimental.do_not_convert(decode), num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)


def training_dataset(input_file, decode, batch_size, shuffle_buffer, seed=None, input_context=None,
                     repeat_first=False, drop_remainder=True, batch=None):
    """Training batches of the records of `input_file`: shuffled (buffer `shuffle_buffer`, a new order each epoch,
    all drawn from `seed`), repeated, decoded by `decode(record) -> (features, labels)`, batched as the global
    batch (batch_size x the replicas of `input_context`), then split into this worker's replicas' batches
    ([batch_size, ...] tensors: one replica's; `worker_share`).

    `repeat_first`: repeat, then shuffle (one buffer across epoch boundaries), as the original run_classifier.py
    and run_squad.py do; else shuffle each epoch, then repeat.
    `batch(dataset, batch_size, drop_remainder)`: how the decoded examples are batched (default
    `Dataset.batch`; `bert_tf.data.lengths.batcher` cuts each batch to its longest text): the global batch is cut
    as one, so that the replicas' batches of an update share its length.
    """
    d = tf.data.TFRecordDataset(input_file)
    if repeat_first:
        d = d.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        d = d.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    d = decoded(d, decode)
    size = batch_size * replica_count(input_context)  # the global batch
    batched = batch(d, size, drop_remainder) if batch else d.batch(size, drop_remainder=drop_remainder)
    return worker_share(batched, batch_size, input_context).prefetch(tf.data.AUTOTUNE)


def worker_count(input_context):
    """The number of workers (input pipelines) of `input_context` (1 without one)."""
    return input_context.num_input_pipelines if input_context is not None else 1


def replica_count(input_context):
    """The number of replicas of all workers of `input_context` (1 without one)."""
    return input_context.num_replicas_in_sync if input_context is not None else 1


def local_replica_count(input_context):
    """The number of replicas of this worker (input pipeline) of `input_context` (1 without one)."""
    return replica_count(input_context) // worker_count(input_context)


def worker_share(batches, batch_size, input_context=None):
    """This worker's per-replica batches of `batch_size` out of `batches` of the global batch (batch_size x
    num_replicas_in_sync, as one device has them: cut to the longest text of the whole batch), its replicas' rows
    in order (`replica_batches`); `batches` unchanged for one replica.

    Every worker reads and decodes the whole training set in the same order (the same seed) and keeps its share,
    as tf.data's AutoShardPolicy.DATA does, so that a run on several workers trains the updates of one device on
    the global batch, as MirroredStrategy on one host does, and every replica's batch, on every worker, has the
    global batch's length. (Sharding the records instead would give each worker another shuffle; pretraining
    corpora, too large to read on every worker, are sharded by file: bert_tf.data.pretraining.dataset.)
    """
    if replica_count(input_context) == 1:
        return batches
    local = local_replica_count(input_context)
    return replica_batches(batches, batch_size, local, input_context.input_pipeline_id * local * batch_size)


def replica_batches(batches, batch_size, replicas, first=0):
    """`replicas` consecutive batches of `batch_size` out of each batch of `batches`: its rows first, first + 1,
    ..., first + replicas x batch_size - 1, in order (tf.distribute deals consecutive batches to consecutive
    replicas), each as long as the batch it comes from."""
    def rows(t):  # [global, ...] -> [replicas, batch_size, ...]: the replicas' batches
        return tf.reshape(t[first:first + replicas * batch_size],
                          tf.concat([[replicas, batch_size], tf.shape(t)[1:]], 0))

    @tf.autograph.experimental.do_not_convert  # plain Python
    def split(*batch):
        return tf.nest.map_structure(rows, batch if len(batch) > 1 else batch[0])

    return batches.map(split).unbatch()


def training_dataset_fn(input_file, decode, shuffle_buffer, repeat_first=False, default_seed=None, batch=None):
    """A Trainer `dataset_fn(batch_size, input_context=None, seed=default_seed)`: `training_dataset` of the
    records, remainder dropped, batched by `batch` (see there)."""
    def dataset_fn(batch_size, input_context=None, seed=default_seed):
        return training_dataset(input_file, decode, batch_size, shuffle_buffer, seed, input_context, repeat_first,
                                batch=batch)

    return dataset_fn


def reading_dataset(input_file, decode, batch_size, drop_remainder=False):
    """The records of `input_file` in file order, decoded by `decode(record)` and batched (prediction)."""
    d = decoded(tf.data.TFRecordDataset(input_file), decode)
    return read_once(d.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE))


def read_once(dataset):
    """`dataset` with tf.data's autotuning off, for a pipeline read once to its end (evaluation, prediction).

    Deleting an exhausted iterator of an autotuned pipeline waits for the autotuner's next period: 1.4-2.1 s after
    MiniLM's 25 evaluation batches of run_classifier.py, in 4 runs of 5 (TensorFlow 2.20, 2 CPUs). Without the
    autotuner, `AUTOTUNE` map parallelism is one call per core and the prefetch buffer grows as needed; the
    elements and their order are the same.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
