"""The original run_pretraining.py's input: the TFRecords of create_pretraining_data.py (`schema`), checked before any
work (`check_input_files`), read and batched as (`FEATURES`, `LABELS`).

Training reads in the original's order (files shuffled and interleaved, records shuffled, remainder dropped),
deterministic for a seed so a run resumes exactly, each worker its own files; evaluation reads the files in order. With
`lengths` a batch is cut to its longest sequence, which holds every masked position.
"""
import functools

import tensorflow as tf

from bert_tf.data import lengths as lengths_lib
from bert_tf.data import records
from bert_tf.text import packing

FEATURES = (*packing.INPUT_NAMES, "masked_lm_positions")
LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
_CYCLE_LENGTH = 4  # the original's num_cpu_threads
_SHUFFLE_BUFFER = 100


def schema(max_seq_length, max_predictions_per_seq):
    """The original run_pretraining.py's name_to_features: feature name -> tf.io.FixedLenFeature."""
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length, "segment_ids": max_seq_length,
               "masked_lm_positions": max_predictions_per_seq, "masked_lm_ids": max_predictions_per_seq,
               "masked_lm_weights": max_predictions_per_seq, "next_sentence_labels": 1}
    return {name: tf.io.FixedLenFeature([length], tf.float32 if name == "masked_lm_weights" else tf.int64)
            for name, length in lengths.items()}


def check_record(record, features, where):
    """ValueError naming `where`, the feature and its expected shape if one serialized tf.train.Example does not
    match `features`."""
    example = tf.train.Example.FromString(record).features.feature
    for name, spec in features.items():
        kind = "float_list" if spec.dtype == tf.float32 else "int64_list"
        expected = f"{kind.split('_')[0]} feature of shape {list(spec.shape)}"
        if name not in example:
            raise ValueError(f"{where}: no feature {name!r}; expected a {expected} (the TFRecords of "
                             f"create_pretraining_data.py; features found: {', '.join(sorted(example))}).")
        found = example[name].WhichOneof("kind")
        length = len(getattr(example[name], found).value) if found else 0
        if found != kind or length != spec.shape[0]:
            raise ValueError(f"{where}: feature {name!r} is a {(found or 'empty').split('_')[0]} feature of length "
                             f"{length}; expected a {expected} (check --max_seq_length and "
                             f"--max_predictions_per_seq against the flags the data was made with).")


def check_input_files(input_files, max_seq_length, max_predictions_per_seq, vocab_size=None):
    """Checks the first record of every file (and its ids against `vocab_size`); returns their one compression ("" or
    "GZIP")."""
    if not input_files:
        raise ValueError("No input files.")
    compressions = {path: records.compression_of(path) for path in input_files}
    if len(set(compressions.values())) > 1:
        gzipped = [path for path, c in compressions.items() if c]
        raise ValueError(f"Some input files are GZIP-compressed ({gzipped[0]}, ...) and others are not: use one "
                         f"compression for all.")
    compression = compressions[input_files[0]]
    features = schema(max_seq_length, max_predictions_per_seq)
    for path in input_files:
        record = next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)), None)
        if record is None:
            raise ValueError(f"{path}: no records (an empty TFRecord file).")
        record = record.numpy()
        check_record(record, features, f"{path}, first record")
        if vocab_size is not None:
            parsed = tf.io.parse_single_example(record, features)
            for name in ("input_ids", "masked_lm_ids"):
                largest = int(tf.reduce_max(parsed[name]))
                if largest >= vocab_size:
                    raise ValueError(f"{path}, first record: {name} holds id {largest}, but the model's vocab_size "
                                     f"is {vocab_size} (bert_config.json and the data's vocab.txt disagree).")
    return compression


def decoder(max_seq_length, max_predictions_per_seq):
    """record -> the parsed example (dict of the schema's features; int64 as int32)."""
    return functools.partial(records.parse, schema=schema(max_seq_length, max_predictions_per_seq))


@tf.autograph.experimental.do_not_convert  # mapped over datasets: plain Python, nothing to convert
def split(example):
    """A parsed example (or batch) -> (features, labels) as the model and the loss take them."""
    return {name: example[name] for name in FEATURES}, {name: example[name] for name in LABELS}


def worker_files(input_files, worker_index, num_workers):
    """The files input pipeline `worker_index` reads: every num_workers-th of the sorted list."""
    files = sorted(input_files)
    if len(files) < num_workers:
        raise ValueError(f"{len(files)} input file(s) (--input_file) for {num_workers} workers: each worker reads "
                         f"its own files, so give at least one file per worker (create_pretraining_data.py writes "
                         f"shards with --num_workers).")
    return files[worker_index::num_workers]


def training_dataset(input_files, batch_size, max_seq_length, max_predictions_per_seq, compression="",
                     seed=None, input_context=None, masking=None, lengths=None):
    """Repeated batches for this worker's replicas in order, cut as one (`lengths`) and then split. `masking`: a
    DynamicMasking, seeded with seed + the pipeline's id."""
    pipeline, pipelines = 0, 1
    if input_context is not None:
        pipeline, pipelines = input_context.input_pipeline_id, input_context.num_input_pipelines
    files = worker_files(input_files, pipeline, pipelines)
    num_files = len(files)
    files = tf.data.Dataset.from_tensor_slices(tf.constant(files)).repeat().shuffle(num_files, seed=seed)
    d = files.interleave(lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
                         cycle_length=min(_CYCLE_LENGTH, num_files), num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=True)
    d = d.shuffle(_SHUFFLE_BUFFER, seed=seed)
    d = records.decoded(d, decoder(max_seq_length, max_predictions_per_seq))
    if masking is not None:
        d = masking.apply(d, (seed or 0) + pipeline)
    local = records.local_replica_count(input_context)  # this worker's global batch, cut as one, then split
    d = lengths_lib.batched(d.map(split), batch_size * local, lengths, packing.INPUT_NAMES)
    if local > 1:
        d = records.replica_batches(d, batch_size, local)
    return d.prefetch(tf.data.AUTOTUNE)


def evaluation_dataset(input_files, batch_size, max_seq_length, max_predictions_per_seq, compression="",
                       max_steps=None, lengths=None):
    """The records in file order, remainder dropped, at most `max_steps` batches, each cut as `lengths` says."""
    d = tf.data.TFRecordDataset(tf.constant(input_files), compression_type=compression)
    d = records.decoded(d, decoder(max_seq_length, max_predictions_per_seq))
    d = lengths_lib.trimmed(d.map(split).batch(batch_size, drop_remainder=True), lengths, packing.INPUT_NAMES)
    if max_steps is not None:
        d = d.take(max_steps)
    return records.read_once(d.prefetch(tf.data.AUTOTUNE))
