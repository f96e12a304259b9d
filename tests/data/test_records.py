"""bert_tf.data.records' readers: those of pipelines read once to their end (evaluation, prediction) run with
tf.data's autotuner off (`records.read_once`: deleting an exhausted autotuned iterator waited up to 2 s for the
autotuner's next period), and every record still comes back once, in file order, in the same batches; the training
readers (run_classifier.py's, run_pretraining.py's) deal the replicas of an update the rows of one batch, cut as
one. A corrupt record is found in its file (`records.first_corrupt`), a GZIP-compressed file's too."""
import gzip

import numpy as np
import tensorflow as tf
import tiny_pretraining

from bert_tf.data import lengths, records
from bert_tf.data.pretraining import dataset as pretraining_dataset
from bert_tf.tasks.classifier import features

SCHEMA = {"value": tf.io.FixedLenFeature([2], tf.int64)}


def test_a_read_once_pipeline_reads_every_record_in_order_without_the_autotuner(tmp_path):
    path = str(tmp_path / "values.tfrecord")
    records.write(path, (records.example({"value": [i, -i]}, SCHEMA).SerializeToString() for i in range(23)))
    read = records.reading_dataset(path, lambda record: records.parse(record, SCHEMA)["value"], batch_size=5)
    assert read.options().autotune.enabled is False
    batches = [batch.numpy().tolist() for batch in read]
    assert [len(batch) for batch in batches] == [5, 5, 5, 5, 3]
    assert sum(batches, []) == [[i, -i] for i in range(23)]


def test_the_first_corrupt_record_is_found_in_its_file(tmp_path):
    """The records before it are counted (across `batch`es); a truncated GZIP file counts as corrupt too."""
    intact = str(tmp_path / "intact.tfrecord")
    written = records.write(intact, (records.example({"value": [i, i]}, SCHEMA).SerializeToString()
                                     for i in range(7)))
    assert records.first_corrupt([intact]) is None
    data = open(intact, "rb").read()
    record = len(data) // written.count
    (tmp_path / "flipped.tfrecord").write_bytes(data[:5 * record + 14] + b"\xff" + data[5 * record + 15:])
    (tmp_path / "truncated.gz").write_bytes(gzip.compress(data)[:-12])
    path, read, message = records.first_corrupt([intact, str(tmp_path / "flipped.tfrecord")], batch=2)
    assert (path, read) == (str(tmp_path / "flipped.tfrecord"), 5) and "corrupted record at" in message
    path, read, _ = records.first_corrupt([str(tmp_path / "truncated.gz")])
    assert (path, read) == (str(tmp_path / "truncated.gz"), 6)


def test_every_evaluation_reader_runs_without_the_autotuner(tmp_path):
    """The classifier's (and SQuAD's, through the same reader) and the pretraining evaluation's; training readers
    keep the autotuner (their iterators live as long as the run)."""
    path = str(tmp_path / "empty.tfrecord")
    records.write(path, [])
    assert features.file_based_input_fn_builder(path, 8, is_training=False, drop_remainder=False)(4).options() \
        .autotune.enabled is False
    assert pretraining_dataset.evaluation_dataset([path], 4, 8, 2).options().autotune.enabled is False
    assert features.file_based_input_fn_builder(path, 8, is_training=True, drop_remainder=True)(4).options() \
        .autotune.enabled is not False


def _updates(dataset, replicas, count):
    """The first `count` updates of `dataset` (consecutive batches, one per replica), whose batches must share
    one shape: each as the replicas' batches stacked in order, and that shape."""
    iterator = iter(dataset)
    for _ in range(count):
        batches = [next(iterator) for _ in range(replicas)]
        shapes = {tuple(batch[0]["input_ids"].shape) for batch in batches}
        assert len(shapes) == 1, shapes
        yield tf.nest.map_structure(lambda *parts: np.concatenate(parts), *batches), shapes.pop()


def _assert_split(replicated, whole, replicas, count=6, rows=slice(None)):
    """Each update of `replicated` (batches of 2 rows, `replicas` of them) is `rows` of the batch of `whole` at the
    same position, cut to that batch's length (the same for every replica); the length varies."""
    seen = set()
    for (update, shape), batch in zip(_updates(replicated, replicas, count), whole):
        expected = tf.nest.map_structure(lambda t: t.numpy()[rows], batch)
        assert shape == (2, expected[0]["input_ids"].shape[1])
        tf.nest.map_structure(np.testing.assert_array_equal, update, expected)
        seen.add(expected[0]["input_ids"].shape[1])
    assert len(seen) > 2, seen


def test_the_replicas_of_an_update_get_the_rows_of_one_batch_cut_as_one(tmp_path):
    """run_classifier.py's reader for 2 replicas of one worker, and for worker 1 of 2 with 2 replicas each (the
    rows 4..7 of each batch of 8 that one device reads); run_pretraining.py's for 2 replicas of one worker: each
    update's batches are the rows of the one-replica reader's batch, cut to its longest text."""
    path = str(tmp_path / "train.tf_record")
    schema = features.name_to_features(16)
    rng = np.random.RandomState(0)
    examples = []
    for length in rng.randint(2, 17, 40):
        mask = np.arange(16) < length
        examples.append(records.example({"input_ids": mask * rng.randint(5, 99, 16), "input_mask": mask,
                                         "segment_ids": 0 * mask, "label_ids": rng.randint(2),
                                         "is_real_example": 1}, schema).SerializeToString())
    records.write(path, examples)
    cut = lengths.SequenceLengths()

    def classifier(batch_size, pipelines=1, pipeline=0, replicas=1):
        context = tf.distribute.InputContext(pipelines, pipeline, replicas)
        return features.file_based_input_fn_builder(path, 16, True, True, lengths=cut)(batch_size, context, seed=3)

    _assert_split(classifier(2, replicas=2), classifier(4), 2)
    _assert_split(classifier(2, 2, 1, 4), classifier(8), 2, rows=slice(4, 8))
    files = tiny_pretraining.write_varying_records(str(tmp_path))

    def pretraining(batch_size, replicas=1):
        context = tf.distribute.InputContext(1, 0, replicas)
        return pretraining_dataset.training_dataset(files, batch_size, tiny_pretraining.SEQ_LENGTH,
                                                    tiny_pretraining.PREDICTIONS, seed=3, input_context=context,
                                                    lengths=cut)

    _assert_split(pretraining(2, 2), pretraining(4), 2)
