"""bert_tf.data.records' readers for pipelines read once to their end (evaluation, prediction): tf.data's autotuner
is off there (`records.read_once`: deleting an exhausted autotuned iterator waited up to 2 s for the autotuner's
next period), and every record still comes back once, in file order, in the same batches."""
import tensorflow as tf

from bert_tf.data import records
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


def test_every_evaluation_reader_runs_without_the_autotuner(tmp_path):
    """The classifier's (and SQuAD's, through the same reader) and the pretraining evaluation's; training readers
    keep the autotuner (their iterators live as long as the run)."""
    path = str(tmp_path / "empty.tfrecord")
    records.write(path, [])
    assert features.file_based_dataset(path, 8, 4, is_training=False, drop_remainder=False).options() \
        .autotune.enabled is False
    assert pretraining_dataset.evaluation_dataset([path], 4, 8, 2).options().autotune.enabled is False
    assert features.file_based_dataset(path, 8, 4, is_training=True, drop_remainder=True).options() \
        .autotune.enabled is not False
