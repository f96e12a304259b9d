"""The run scripts' TFRecords: one writer (`example`, `write`) and one parser (`parse`) for every schema.

A schema is an ordered dict name -> `tf.io.FixedLenFeature` in the original scripts' names, order and dtypes; `parse`
casts int64 to int32 as the original does. Training readers are replayable (their order a function of `seed` alone, so
`Trainer.train` resumes by skipping the batches used), and cut the global batch to one length before splitting it into
the replicas' batches (`replica_batches`), as TPUStrategy and XLA need.
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
    """Writes each serialized record it is called with, counting and digesting them in order (`fingerprint`), so that
    what a run wrote is told without reading it back."""

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
    """Yields a `Writer` of the TFRecord file `path`, written atomically (`fileio.written_atomically`)."""
    with fileio.written_atomically(path) as tmp, tf.io.TFRecordWriter(tmp) as records:
        yield Writer(records.write)


def write(path, serialized):
    """Writes serialized records to `path` atomically; returns its `Writer` (count, fingerprint)."""
    with writer(path) as write_record:
        for record in serialized:
            write_record(record)
    return write_record


def first_corrupt(files, batch=1024):
    """(file, intact records before it, TF's message) of the first corrupt record of `files`, or None."""
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
    """Turns a DataLossError in the block into a ValueError naming the file and record; re-raised as it is when every
    file reads."""
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
    """`dataset` mapped by `decode` in parallel, in order, without AutoGraph (a decoder has no control flow)."""
    return dataset.map(tf.autograph.experimental.do_not_convert(decode), num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)


def training_dataset(input_file, decode, batch_size, shuffle_buffer, seed=None, input_context=None,
                     repeat_first=False, drop_remainder=True, batch=None):
    """Shuffled (from `seed`), repeated, decoded batches of one replica, this worker's share.

    `repeat_first`: repeat, then shuffle, as the original run_classifier.py and run_squad.py; else shuffle each epoch.
    `batch(dataset, size, drop_remainder)` batches the global batch (`bert_tf.data.lengths.batcher` cuts it).
    """
    d = tf.data.TFRecordDataset(input_file)
    if repeat_first:
        d = d.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        d = d.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    d = decoded(d, decode)
    replicas = input_context.num_replicas_in_sync if input_context is not None else 1  # of all workers
    size = batch_size * replicas  # the global batch
    batched = batch(d, size, drop_remainder) if batch else d.batch(size, drop_remainder=drop_remainder)
    if replicas > 1:
        # Every worker reads the whole set in the same order and keeps its replicas' share (as AutoShardPolicy.DATA),
        # so several workers train on one device's global batches. (Pretraining corpora are sharded by file.)
        local = local_replica_count(input_context)
        batched = replica_batches(batched, batch_size, local, input_context.input_pipeline_id * local * batch_size)
    return batched.prefetch(tf.data.AUTOTUNE)


def local_replica_count(input_context):
    """Replicas of this worker (1 without `input_context`)."""
    return input_context.num_replicas_in_sync // input_context.num_input_pipelines if input_context is not None else 1


def replica_batches(batches, batch_size, replicas, first=0):
    """`replicas` consecutive batches of `batch_size` rows from row `first` of each of `batches`, in the order
    tf.distribute deals them."""
    def rows(t):  # [global, ...] -> [replicas, batch_size, ...]: the replicas' batches
        return tf.reshape(t[first:first + replicas * batch_size],
                          tf.concat([[replicas, batch_size], tf.shape(t)[1:]], 0))

    @tf.autograph.experimental.do_not_convert  # plain Python
    def split(*batch):
        return tf.nest.map_structure(rows, batch if len(batch) > 1 else batch[0])

    return batches.map(split).unbatch()


def training_dataset_fn(input_file, decode, shuffle_buffer, repeat_first=False, batch=None):
    """A Trainer `dataset_fn(batch_size, input_context=None, seed=None)` of `training_dataset`."""
    def dataset_fn(batch_size, input_context=None, seed=None):
        return training_dataset(input_file, decode, batch_size, shuffle_buffer, seed, input_context, repeat_first,
                                batch=batch)

    return dataset_fn


def reading_dataset(input_file, decode, batch_size, drop_remainder=False):
    """The records of `input_file` in file order, decoded by `decode(record)` and batched (prediction)."""
    d = decoded(tf.data.TFRecordDataset(input_file), decode)
    return read_once(d.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE))


def read_once(dataset):
    """`dataset` with tf.data's autotuning off, for a pipeline read once: deleting an exhausted autotuned iterator waits
    for the autotuner (BENCHMARKS.md, Fine-tuning)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
