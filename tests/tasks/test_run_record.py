"""A training run records its settings in output_dir (bert_tf.tasks.run_record); a rerun into it resumes only
with the same ones: another max_seq_length, batch size or batch-length setting is refused before any work, other
training data once its records are written (before training), each naming what differs; --start_over runs anyway.
The data's fingerprint: a fine-tuning run's records by their content, the user's pretraining files by a sample
(local) or their metadata (a URL), the same on every worker.
"""
import hashlib
import json
import os
import random
import secrets
import types

import pytest
import tensorflow as tf
import tiny_classifier

from bert_tf import fileio
from bert_tf.tasks import classifier, run_record, runner


def _data(directory, seed):
    rng = random.Random(seed)
    rows = [tiny_classifier.tsv_line("label", "text_a")] + [
        tiny_classifier.tsv_line(rng.choice(["neg", "pos"]), tiny_classifier.random_sentence(rng)) for _ in range(8)]
    tiny_classifier.write_lines(os.path.join(directory, "train.tsv"), rows)


def test_a_rerun_with_other_settings_is_refused_naming_them(tmp_path, run_main):
    """A rerun into a finished output_dir with other flags or data is refused, naming them, before any work (no
    record rewritten, no label list, no checkpoint touched); --start_over trains. The script runs in one process;
    the runs after it, whose checks come between them, run in this one (`runner.run`, as the script does)."""
    d = str(tmp_path)
    vocab_file, config_file = tiny_classifier.write_tiny_model(d)
    _data(f"{d}/data", 0)
    _data(f"{d}/other_data", 1)
    out = f"{d}/out"
    common = ["--task_name=tsv", "--do_train", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
              f"--output_dir={out}", "--num_train_epochs=1", "--train_batch_size=4", "--seed=1"]
    first = [*common, f"--data_dir={d}/data", "--max_seq_length=32"]

    # Four runs in one process, in order: the first, then three reruns into its output_dir.
    errors = run_main(
        tiny_classifier.SCRIPT, first,
        [*common, f"--data_dir={d}/data", "--max_seq_length=16", "--train_batch_size=2", "--pad_to_max_seq_length"],
        [*common, f"--data_dir={d}/other_data", "--max_seq_length=32"],
        first)
    assert errors[0] is None and errors[3] is None
    assert errors[1].startswith(f"ValueError: {out} holds checkpoints of a run with other settings (")
    for difference in ("max_seq_length 32 -> 16", "train_batch_size 4 -> 2", "pad_to_max_seq_length False -> True"):
        assert difference in errors[1]
    assert "--start_over" in errors[1] and os.path.join(out, "run_settings.json") in errors[1]
    assert "data_fingerprint " in errors[2] and "max_seq_length" not in errors[2]

    settings = json.loads(open(os.path.join(out, "run_settings.json")).read())
    assert {key: settings[key] for key in ("max_seq_length", "train_batch_size", "replicas", "workers",
                                           "gradient_accumulation_steps", "pad_to_max_seq_length",
                                           "seq_length_multiple", "group_by_length")} == {
        "max_seq_length": 32, "train_batch_size": 4, "replicas": 1, "workers": 1, "gradient_accumulation_steps": 1,
        "pad_to_max_seq_length": False, "seq_length_multiple": 1, "group_by_length": False}
    digest = hashlib.sha256()  # the records' content, digested as they were written
    for record in tf.data.TFRecordDataset(os.path.join(out, "train.tf_record")).as_numpy_iterator():
        digest.update(len(record).to_bytes(8, "little") + record)
    assert settings["data_fingerprint"] == digest.hexdigest()

    # The refusal comes before any work: output_dir is left as it was.
    before = {name: os.path.getmtime(os.path.join(out, name)) for name in os.listdir(out)
              if os.path.isfile(os.path.join(out, name))}
    common_settings = dict(do_train=True, vocab_file=vocab_file, bert_config_file=config_file, output_dir=out,
                           num_train_epochs=1, train_batch_size=4, seed=1)
    with pytest.raises(ValueError) as refused:
        runner.run(classifier.ClassifierTask("tsv", f"{d}/data"), runner.RunConfig(
            **common_settings, max_seq_length=16, gradient_accumulation_steps=2))
    assert "max_seq_length 32 -> 16" in str(refused.value)
    assert "gradient_accumulation_steps 1 -> 2" in str(refused.value)
    assert {name: os.path.getmtime(os.path.join(out, name)) for name in before} == before

    # --start_over: the other data trains, and is recorded.
    runner.run(classifier.ClassifierTask("tsv", f"{d}/other_data"), runner.RunConfig(
        **common_settings, max_seq_length=32, start_over=True))
    assert json.loads(open(os.path.join(out, "run_settings.json")).read())["data_fingerprint"] != \
        settings["data_fingerprint"]


def test_fingerprints_tell_contents_apart(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 1000)
    b.write_bytes(b"x" * 999 + b"y")
    assert run_record.fingerprint([str(a)]) == run_record.fingerprint([str(a)])
    assert run_record.fingerprint([str(a)]) != run_record.fingerprint([str(b)])
    assert run_record.fingerprint([str(a), str(b)]) == run_record.fingerprint([str(b), str(a)])  # dealt sorted
    big = tmp_path / "big"
    size = 64 * run_record.FINGERPRINT_SAMPLE_BYTES + 3
    with open(big, "wb") as f:
        f.truncate(size)
    reference = run_record.fingerprint([str(big)])
    sample = run_record.FINGERPRINT_SAMPLE_BYTES
    for offset in (0, sample - 1, size // 2, size - sample, size - 1):  # in the first, middle and last samples
        with open(big, "r+b") as f:
            f.seek(offset)
            f.write(b"\1")
        assert run_record.fingerprint([str(big)]) != reference, offset
        with open(big, "r+b") as f:
            f.seek(offset)
            f.write(b"\0")
    assert run_record.fingerprint([str(big)]) == reference
    with open(big, "r+b") as f:  # between the samples: not read (a start reads 3 samples of each file)
        f.seek(2 * sample)
        f.write(b"\1")
    assert run_record.fingerprint([str(big)]) == reference


def test_a_urls_fingerprint_reads_its_metadata_alone():
    """On a URL (here ram://, whose files all bear modification time 0) a file counts by its size and modification
    time, read from its metadata: other bytes of the same size and time give the same fingerprint, another size
    another one. (On gs:// a read fetches a 64 MiB block: sampling would fetch whole shards.)"""
    root = f"ram://fingerprint_{secrets.token_hex(4)}"
    fileio.write_bytes_atomically(f"{root}/a", b"x" * 1000)
    before = run_record.fingerprint([f"{root}/a"])
    fileio.write_bytes_atomically(f"{root}/a", b"y" * 1000)
    assert run_record.fingerprint([f"{root}/a"]) == before
    fileio.write_bytes_atomically(f"{root}/a", b"y" * 1001)
    assert run_record.fingerprint([f"{root}/a"]) != before
    fileio.remove_tree(root)


def test_pretraining_workers_fingerprint_every_file_and_split_the_sorted_list(tmp_path):
    """Worker i of n reads every n-th file of the sorted list from the i-th (as Dataset.shard deals them), whatever
    order the file system listed them in; every worker records the fingerprint of all the files (the workers
    compare theirs before the first update)."""
    from bert_tf.data.pretraining import dataset
    from bert_tf.tasks import pretraining, runner

    files = []
    for i in range(5):
        files.append(str(tmp_path / f"shard-{i}.tfrecord"))
        with open(files[-1], "wb") as f:
            f.write(bytes([i]) * 100)
    shuffled = random.Random(0).sample(files, len(files))
    assert shuffled != files
    task = pretraining.PretrainingTask(",".join(files))
    run = runner.RunConfig(bert_config_file=None, vocab_file=None, output_dir=str(tmp_path / "out"))
    data = {}
    for worker in (0, 1):
        task.train_files = shuffled if worker else files  # hosts that list the files in other orders
        position = types.SimpleNamespace(worker_index=worker, num_workers=2)  # what the task reads of its Trainer
        data[worker] = task.train_data(run, None, position)
    assert list(data[0].files) == files[0::2] and list(data[1].files) == files[1::2]
    assert dataset.worker_files(shuffled, 1, 2) == files[1::2]
    assert data[0].fingerprint == data[1].fingerprint == run_record.fingerprint(files)
    with pytest.raises(ValueError, match="5 input file.* for 6 workers"):
        dataset.worker_files(files, 0, 6)
