"""tf.data readers of the TFRecord files the run scripts write."""
import tensorflow as tf


def training_dataset_fn(input_file, decode, shuffle_buffer, seed=None):
    """A Trainer `dataset_fn(batch_size, input_context)`: the records of `input_file`, sharded per input
    pipeline, shuffled (buffer `shuffle_buffer`, reshuffled each epoch), repeated, decoded by `decode(record) ->
    (features, labels)` and batched with drop_remainder."""
    def dataset_fn(batch_size, input_context=None):
        d = tf.data.TFRecordDataset(input_file)
        if input_context is not None and input_context.num_input_pipelines > 1:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        d = d.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        return d.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    return dataset_fn
