"""The training loop's input: this worker's batches dealt to its replicas, the next update's fetched while the
current one runs.

Rules: a loop fetches only the batches of the updates it runs (`fetch_if`), so the checkpointed iterator's position
is the updates done. An update's replicas share one batch shape: one worker's are cut as one batch
(bert_tf.data.records.replica_batches), and across workers `agreed` pads the cut features to the longest.
"""
import tensorflow as tf


class Feed:
    """`iterator`'s per-replica batches dealt to this worker's replicas in order, as tf.distribute deals them."""

    def __init__(self, strategy, iterator, worker_index=0, num_workers=1):
        self.strategy = strategy
        self.iterator = iterator
        self.num_workers = num_workers
        local = strategy.num_replicas_in_sync // num_workers
        self.first = worker_index * local  # the replica id of this worker's first replica
        tpu = isinstance(strategy, tf.distribute.TPUStrategy)  # batches left on the host
        self.devices = [None] * local if tpu else list(strategy.extended.worker_devices)

    def fetch(self):
        """The next update's batches, one per local replica, each copied to its device (TPU: left on the host)."""
        batches = []
        for device in self.devices:
            batch = next(self.iterator)
            if device is not None:
                with tf.device(device):
                    batch = tf.nest.map_structure(tf.identity, batch)
            batches.append(batch)
        return batches

    def fetch_if(self, condition, otherwise):
        """`fetch()` when `condition` holds, else `otherwise`, without reading the iterator."""
        return tf.cond(condition, self.fetch, lambda: otherwise)

    def empty(self):
        """Zero-size batches of `fetch()`'s structure: what a loop that runs no update carries."""
        zeros = lambda spec: tf.zeros([0 if d is None else d for d in spec.shape], spec.dtype)
        return [tf.nest.map_structure(zeros, self.iterator.element_spec) for _ in self.devices]

    def distribute(self, batches):
        """`batches` as the per-replica values `strategy.run` takes (`agreed` first under several workers)."""
        if self.num_workers > 1:
            batches = self.agreed(batches)
        return self.per_replica(lambda replica: batches[replica])

    def per_replica(self, value_fn):
        """The per-replica value of `value_fn(i)` for this worker's i-th replica."""
        return self.strategy.experimental_distribute_values_from_function(
            lambda context: value_fn(context.replica_id_in_sync_group - self.first))

    def agreed(self, batches):
        """`batches` with their cut features (last axis not static) zero-padded to the update's longest over every
        worker; labels as they are."""
        cut = {name: spec.shape.rank > 1 and spec.shape[-1] is None
               for name, spec in self.iterator.element_spec[0].items()}
        if not any(cut.values()):
            return batches
        name = next(name for name, is_cut in cut.items() if is_cut)  # the cut features share their batch's length
        local = tf.reduce_max([tf.shape(features[name])[-1] for features, _ in batches])
        length = tf.reduce_max(self.strategy.gather(self.per_replica(lambda _: tf.reshape(local, [1])), axis=0))

        def padded(t):
            return tf.pad(t, [[0, 0]] * (t.shape.rank - 1) + [[0, length - tf.shape(t)[-1]]])

        agreed = []
        for device, (features, labels) in zip(self.devices, batches):
            with tf.device(device):
                agreed.append(({name: padded(t) if cut[name] else t for name, t in features.items()}, labels))
        return agreed
