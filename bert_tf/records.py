"""tf.data readers of the TFRecord files the run scripts write.

The training readers are replayable: their order is a function of `seed` alone (and of the input pipeline's
shard), so that `Trainer.train` can resume a run by rebuilding the reader with the seed saved in its checkpoint and
skipping the batches already used.
"""
import tensorflow as tf


def training_dataset(input_file, decode, batch_size, shuffle_buffer, seed=None, input_context=None,
                     repeat_first=False, drop_remainder=True):
    """Training batches of the records of `input_file`: sharded per input pipeline (`input_context`), shuffled
    (buffer `shuffle_buffer`, a new order each epoch, all drawn from `seed`), repeated, decoded by
    `decode(record) -> (features, labels)`, batched ([batch_size, ...] tensors).

    `repeat_first`: repeat, then shuffle (one buffer across epoch boundaries), as the original run_classifier.py
    and run_squad.py do; else shuffle each epoch, then repeat.
    """
    d = tf.data.TFRecordDataset(input_file)
    if input_context is not None and input_context.num_input_pipelines > 1:
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if repeat_first:
        d = d.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        d = d.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return d.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def training_dataset_fn(input_file, decode, shuffle_buffer, repeat_first=False, default_seed=None):
    """A Trainer `dataset_fn(batch_size, input_context=None, seed=default_seed)`: `training_dataset` of the
    records, remainder dropped."""
    def dataset_fn(batch_size, input_context=None, seed=default_seed):
        return training_dataset(input_file, decode, batch_size, shuffle_buffer, seed, input_context, repeat_first)

    return dataset_fn


def reading_dataset(input_file, decode, batch_size, drop_remainder=False):
    """The records of `input_file` in file order, decoded by `decode(record)` and batched (evaluation, prediction)."""
    d = tf.data.TFRecordDataset(input_file)
    d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return d.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
