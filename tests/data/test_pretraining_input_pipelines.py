"""bert_tf.data.pretraining.dataset.training_dataset under several input pipelines (one per worker of
MultiWorkerMirroredStrategy): each reads its own input files, all of their records and no other; fewer files than
workers is an error. The files are shards of the golden records of the original create_pretraining_data.py."""
import pytest
import tensorflow as tf
from tiny_pretraining import PREDICTIONS as PREDS
from tiny_pretraining import RECORDS
from tiny_pretraining import SEQ_LENGTH as SEQ

from bert_tf.data import records
from bert_tf.data.pretraining import dataset


def _key(input_ids, positions):
    """A record's identity: its tokens and masked positions (the 60 golden records differ in these)."""
    return tuple(input_ids) + tuple(positions)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The 60 golden records in 5 files (file i: records i, i + 5, ...). Returns (paths, the keys of each file)."""
    d = tmp_path_factory.mktemp("shards")
    serialized = [record.numpy() for record in tf.data.TFRecordDataset(RECORDS)]
    decode = dataset.decoder(SEQ, PREDS)
    paths, keys = [], []
    for i in range(5):
        paths.append(str(d / f"shard-{i}.tfrecord"))
        records.write(paths[-1], serialized[i::5])
        parsed = [decode(record) for record in serialized[i::5]]
        keys.append({_key(p["input_ids"].numpy(), p["masked_lm_positions"].numpy()) for p in parsed})
    assert sum(len(k) for k in keys) == len(serialized) == 60  # every record is told apart by its key
    return paths, keys


def _drawn(paths, pipeline, pipelines, batches=40):
    """The keys of the records in the first `batches` batches of 6 of input pipeline `pipeline` of `pipelines`."""
    context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=pipelines)
    data = dataset.training_dataset(paths, 6, SEQ, PREDS, seed=3, input_context=context).take(batches)
    return {_key(ids, positions) for features, _ in data
            for ids, positions in zip(features["input_ids"].numpy(), features["masked_lm_positions"].numpy())}


def test_each_worker_reads_its_own_files(shards):
    """Worker p of 2 reads files p, p + 2, ... (as Dataset.shard): every record of those (240 draws from 36 or
    24 records, repeated), none of the other worker's. One pipeline reads all the files."""
    paths, keys = shards
    for pipeline in range(2):
        assert _drawn(paths, pipeline, 2) == set().union(*keys[pipeline::2])
    assert _drawn(paths, 0, 1, batches=60) == set().union(*keys)


def test_fewer_files_than_workers_is_an_error(shards):
    paths, _ = shards
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=0, num_replicas_in_sync=3)
    with pytest.raises(ValueError, match=r"2 input file\(s\) \(--input_file\) for 3 workers: each worker reads its "
                                         r"own files"):
        dataset.training_dataset(paths[:2], 6, SEQ, PREDS, input_context=context)


def test_gzip_records_are_recognized_and_read_alike(shards, tmp_path):
    """create_pretraining_data.py --gzip output: recognized by its first bytes, checked, and read to the same
    batches; plain and GZIP files mixed are an error naming one of them."""
    paths, _ = shards
    gzipped = []
    for i, path in enumerate(paths):
        gzipped.append(str(tmp_path / f"shard-{i}.tfrecord.gz"))
        with tf.io.TFRecordWriter(gzipped[-1], tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
            for record in tf.data.TFRecordDataset(path):
                writer.write(record.numpy())
    assert dataset.check_input_files(paths, SEQ, PREDS) == ""
    assert dataset.check_input_files(gzipped, SEQ, PREDS, vocab_size=30522) == "GZIP"
    for plain, packed in zip(dataset.evaluation_dataset(paths, 8, SEQ, PREDS),
                             dataset.evaluation_dataset(gzipped, 8, SEQ, PREDS, compression="GZIP")):
        tf.nest.map_structure(lambda a, b: tf.debugging.assert_equal(a, b), plain, packed)
    with pytest.raises(ValueError, match=r"GZIP-compressed .*shard-0\.tfrecord\.gz.* and others are not"):
        dataset.check_input_files(paths[:2] + gzipped[:1], SEQ, PREDS)
