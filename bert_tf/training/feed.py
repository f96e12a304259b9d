"""The training loop's input: this worker's batches, dealt to its replicas, the next update's fetched while the
current update runs.

The Trainer reads one tf.data iterator per worker (checkpointed with the run: its position is the run's input
position). Inside the training tf.function the loop carries the batches of its next update: each iteration fetches
the following update's batches and copies them to the replicas' devices while the current update runs, so that a
GPU does not wait for the host between two updates. A loop fetches the batches of the updates it runs and no more
(`fetch_if`), so its iterator's position is always that of the updates done, and a resumed run continues exactly.

On GPUs, TensorFlow keeps int32 tensors (the token ids, masks and labels) in host memory even when placed on a GPU;
they are copied at the update's launch, a few hundred kilobytes for a batch of 256 x 128. Under TPUStrategy the
batches stay on the host, where TPUStrategy feeds its cores from.
"""
import tensorflow as tf


class Feed:
    """This worker's input for the training loop of `strategy`: `iterator` (a tf.data iterator of per-replica
    batches) dealt to the worker's replicas in order, its consecutive batches going to consecutive replicas, as
    tf.distribute deals them. `worker_index` of `num_workers` input pipelines."""

    def __init__(self, strategy, iterator, worker_index=0, num_workers=1):
        self.strategy = strategy
        self.iterator = iterator
        local = strategy.num_replicas_in_sync // num_workers
        self.first = worker_index * local  # the replica id of this worker's first replica
        if isinstance(strategy, tf.distribute.TPUStrategy):
            self.devices = [None] * local
        else:
            self.devices = list(strategy.extended.worker_devices)

    def fetch(self):
        """The batches of this worker's next update: one per local replica, in replica order, each copied to its
        replica's device (under TPUStrategy: left where the iterator gives them)."""
        batches = []
        for device in self.devices:
            batch = next(self.iterator)
            if device is not None:
                with tf.device(device):
                    batch = tf.nest.map_structure(tf.identity, batch)
            batches.append(batch)
        return batches

    def fetch_if(self, condition, otherwise):
        """`fetch()` when `condition` (a scalar bool tensor) holds, else `otherwise` (batches of the same structure)
        without reading the iterator."""
        return tf.cond(condition, self.fetch, lambda: otherwise)

    def empty(self):
        """Batches of `fetch()`'s structure and dtypes holding zeros (their unknown dimensions 0): what a loop that
        runs no update carries."""
        zeros = lambda spec: tf.zeros([0 if d is None else d for d in spec.shape], spec.dtype)
        return [tf.nest.map_structure(zeros, self.iterator.element_spec) for _ in self.devices]

    def distribute(self, batches):
        """`batches` (as `fetch` gives them) as the per-replica values `strategy.run` takes."""
        return self.strategy.experimental_distribute_values_from_function(
            lambda replica: batches[replica.replica_id_in_sync_group - self.first])
