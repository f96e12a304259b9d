"""The training loop's input: this worker's batches, dealt to its replicas, the next update's fetched while the
current update runs.

The Trainer reads one tf.data iterator per worker (checkpointed with the run: its position is the run's input
position). Inside the training tf.function the loop carries the batches of its next update: each iteration fetches
the following update's batches and copies them to the replicas' devices while the current update runs, so that a
GPU does not wait for the host between two updates. A loop fetches the batches of the updates it runs and no more
(`fetch_if`), so its iterator's position is always that of the updates done, and a resumed run continues exactly.

One batch shape per update. The replicas of an update must get batches of one shape wherever one program runs on
every replica (TPUStrategy; an XLA-compiled update on several GPUs, whose all-reduce of the embedding's
IndexedSlices gradient needs one shape). The readers give this worker's replicas' batches out of one batch cut as
one (bert_tf.data.records.replica_batches), so the replicas of one worker agree. Workers that read different
texts (pretraining: each its own files) cut to different lengths; under several workers `distribute` therefore
pads the cut features with zeros to the longest of the update, agreed by an all-gather of one scalar per replica
(`agreed`: a few bytes per update, before the update, outside any compiled program; padding changes no real
position's output, bert_tf.data.lengths). Where the workers' batches agree already (the fine-tuning readers, every
worker cutting the same global batch), the padding is zero. Under TPUStrategy (one input pipeline for every core)
nothing is agreed: the reader's cut is every core's. Tested on 2 logical CPU devices of one worker and on 2 local
workers of one CPU device each (tests/training/test_multi_worker.py); TPUs and GPUs untested here.

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
        self.num_workers = num_workers
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
        """`batches` (as `fetch` gives them) as the per-replica values `strategy.run` takes; under several workers
        first padded to the update's length (`agreed`)."""
        if self.num_workers > 1:
            batches = self.agreed(batches)
        return self.per_replica(lambda replica: batches[replica])

    def per_replica(self, value_fn):
        """The per-replica value of `value_fn(i)` for this worker's i-th replica."""
        return self.strategy.experimental_distribute_values_from_function(
            lambda context: value_fn(context.replica_id_in_sync_group - self.first))

    def agreed(self, batches):
        """`batches` ((features, labels) each) with their cut features (those whose last axis has no static length:
        bert_tf.data.lengths) padded with zeros on that axis to the longest of the update over the replicas of every
        worker, agreed by an all-gather of one scalar per replica. Zeros are the model's padding (input_mask 0), so
        this changes no real position's output. Labels are left as they are: a label's padding is the task's (NER's
        is -1); the readers whose labels are cut cut the same global batch on every worker, and a label of another
        length than its logits would be a shape error, not a silent one. Unchanged when no feature is cut."""
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
