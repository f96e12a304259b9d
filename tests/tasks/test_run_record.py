"""A training run records its settings in output_dir (bert_tf.tasks.run_record); a rerun into it resumes only
with the same ones: another max_seq_length, batch size or batch-length setting is refused before any work, other
training data once its records are written (before training), each naming what differs; --start_over runs anyway.
"""
import json
import os
import random

import pytest
import tiny_classifier

from bert_tf import fileio


def _data(directory, seed):
    rng = random.Random(seed)
    rows = [tiny_classifier.tsv_line("label", "text_a")] + [
        tiny_classifier.tsv_line(rng.choice(["neg", "pos"]), tiny_classifier.random_sentence(rng)) for _ in range(8)]
    tiny_classifier.write_lines(os.path.join(directory, "train.tsv"), rows)


def test_a_rerun_with_other_settings_is_refused_naming_them(tmp_path, run_main):
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
    assert settings["data_fingerprint"] == fileio.fingerprint([os.path.join(out, "train.tf_record")])

    # --start_over: the other data trains, and is recorded.
    assert run_main(tiny_classifier.SCRIPT,
                    [*common, f"--data_dir={d}/other_data", "--max_seq_length=32", "--start_over"]) == [None]
    assert json.loads(open(os.path.join(out, "run_settings.json")).read())["data_fingerprint"] != \
        settings["data_fingerprint"]


def test_the_flags_settings_are_checked_before_any_work(tmp_path, run_main):
    """The refused rerun leaves output_dir as it was: no record rewritten, no label list, no checkpoint touched."""
    d = str(tmp_path)
    vocab_file, config_file = tiny_classifier.write_tiny_model(d)
    _data(f"{d}/data", 0)
    out = f"{d}/out"
    flags = ["--task_name=tsv", "--do_train", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
             f"--output_dir={out}", "--num_train_epochs=1", "--train_batch_size=4", f"--data_dir={d}/data"]
    assert run_main(tiny_classifier.SCRIPT, [*flags, "--max_seq_length=32"]) == [None]
    before = {name: os.path.getmtime(os.path.join(out, name)) for name in os.listdir(out)
              if os.path.isfile(os.path.join(out, name))}
    errors = run_main(tiny_classifier.SCRIPT, [*flags, "--max_seq_length=16", "--gradient_accumulation_steps=2"])
    assert "max_seq_length 32 -> 16" in errors[0] and "gradient_accumulation_steps 1 -> 2" in errors[0]
    assert {name: os.path.getmtime(os.path.join(out, name)) for name in before} == before


def test_fingerprints_tell_contents_apart(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 1000)
    b.write_bytes(b"x" * 999 + b"y")
    assert fileio.fingerprint([str(a)]) == fileio.fingerprint([str(a)])
    assert fileio.fingerprint([str(a)]) != fileio.fingerprint([str(b)])
    assert fileio.fingerprint([str(a), str(b)]) != fileio.fingerprint([str(b), str(a)])
    big = tmp_path / "big"
    size = 64 * fileio.FINGERPRINT_SAMPLE_BYTES + 3
    with open(big, "wb") as f:
        f.truncate(size)
    reference = fileio.fingerprint([str(big)])
    sample = fileio.FINGERPRINT_SAMPLE_BYTES
    for offset in (0, sample - 1, size // 2, size - sample, size - 1):  # in the first, middle and last samples
        with open(big, "r+b") as f:
            f.seek(offset)
            f.write(b"\1")
        assert fileio.fingerprint([str(big)]) != reference, offset
        with open(big, "r+b") as f:
            f.seek(offset)
            f.write(b"\0")
    assert fileio.fingerprint([str(big)]) == reference
    with open(big, "r+b") as f:  # between the samples: not read (a start reads 3 samples of each file)
        f.seek(2 * sample)
        f.write(b"\1")
    assert fileio.fingerprint([str(big)]) == reference


def test_a_pretraining_worker_fingerprints_only_the_files_it_reads(tmp_path):
    """Worker i of n reads every n-th training file from the i-th (as Dataset.shard deals them): its recorded
    fingerprint covers those files alone, so a start reads nothing of the other workers' shares."""
    from bert_tf.data.pretraining import dataset
    from bert_tf.tasks import pretraining, runner

    files = []
    for i in range(5):
        files.append(str(tmp_path / f"shard-{i}.tfrecord"))
        with open(files[-1], "wb") as f:
            f.write(bytes([i]) * 100)
    task = pretraining.PretrainingTask(",".join(files))
    task.train_files = files
    run = runner.RunConfig(bert_config_file=None, vocab_file=None, output_dir=str(tmp_path / "out"),
                           worker_index=1, num_workers=2)
    data = task.train_data(run, None)
    assert list(data.files) == files[1::2] == dataset.worker_files(files, 1, 2)
    assert fileio.fingerprint(data.files) != fileio.fingerprint(dataset.worker_files(files, 0, 2))
    with pytest.raises(ValueError, match="5 input file.* for 6 workers"):
        dataset.worker_files(files, 0, 6)
