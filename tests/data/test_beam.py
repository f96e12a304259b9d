"""The Beam pipeline (DirectRunner) writes the same examples as pretraining_data's fast mode."""
import glob
import os
import re
import sys

import forkserver
import pytest

pytest.importorskip("apache_beam")

from bert_tf import fileio, resources  # noqa: E402
from bert_tf.data.pretraining import beam, shards  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = dict(do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10, random_seed=7, dupe_factor=2,
                masked_lm_prob=0.15, short_seq_prob=0.1)
SHARD_SIZE = 7


def _records(path):
    import tensorflow as tf
    return [bytes(r.numpy()) for r in tf.data.TFRecordDataset(path)]


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory, data_dir):
    """Real text: 40 news articles of gensim's Lee corpus, one sentence per line, plus the original's sample."""
    out = tmp_path_factory.mktemp("beam_corpus")
    with open(resources.gensim_test_file("lee_background.cor"), encoding="utf-8") as f:
        articles = [line.strip() for line in f if line.strip()][:40]
    lee = out / "lee.txt"
    lee.write_text("\n\n".join("\n".join(s for s in re.split(r"(?<=[.!?])\s+", a) if s) for a in articles) + "\n",
                   encoding="utf-8")
    return [str(lee), os.path.join(data_dir, "sample_text.txt")]


@pytest.fixture(scope="module")
def fast_shards(tmp_path_factory, corpus_files, uncased_vocab_file):
    out = tmp_path_factory.mktemp("fast")
    paths, written, _ = shards.run_sharded(
        ",".join(corpus_files), str(out / "ex"), uncased_vocab_file, num_workers=1, shard_size=SHARD_SIZE,
        progress=False, **SETTINGS)
    assert written > 0 and len(paths) == 7  # 43 documents in shards of 7
    return paths


def test_per_shard_files_equal_fast_mode(tmp_path, corpus_files, uncased_vocab_file, fast_shards):
    killed = fileio.temp_path(str(tmp_path / "ex-00000-of-00007"))  # a killed run's partial shard, two days old
    with open(killed, "wb") as f:
        f.write(b"partial")
    os.utime(killed, (os.stat(killed).st_mtime - 2 * 24 * 3600,) * 2)
    paths = beam.run(",".join(corpus_files), str(tmp_path / "ex"), uncased_vocab_file,
                              shard_size=SHARD_SIZE, pipeline_options=["--runner=DirectRunner"], **SETTINGS)
    assert [os.path.basename(p) for p in paths] == [os.path.basename(p) for p in fast_shards]
    for beam_path, fast_path in zip(paths, fast_shards):
        with open(beam_path, "rb") as a, open(fast_path, "rb") as b:
            assert a.read() == b.read(), beam_path
    assert not glob.glob(str(tmp_path / ".*tmp*")) and not os.path.exists(killed)


def test_sink_writes_the_same_examples(tmp_path, corpus_files, uncased_vocab_file, fast_shards):
    import tensorflow as tf
    result = beam.run(",".join(corpus_files), str(tmp_path / "sink"), uncased_vocab_file,
                               shard_size=SHARD_SIZE, write_mode="sink", num_output_shards=3, **SETTINGS)
    assert result is None
    files = sorted(glob.glob(str(tmp_path / "sink-*")))
    assert len(files) == 3
    got = sorted(r for f in files for r in _records(f))
    expected = sorted(r for f in fast_shards for r in _records(f))
    assert got == expected
    example = tf.train.Example.FromString(got[0])
    assert len(example.features.feature["input_ids"].int64_list.value) == SETTINGS["max_seq_length"]
    assert len(example.features.feature["masked_lm_weights"].float_list.value) == SETTINGS["max_predictions_per_seq"]


def test_seeds_differ_per_shard_and_with_random_seed(tmp_path, corpus_files, uncased_vocab_file, fast_shards):
    tasks = shards.plan(corpus_files, str(tmp_path / "x"), SHARD_SIZE)
    config = shards.make_config(uncased_vocab_file, **dict(SETTINGS, random_seed=8))
    other = shards.shard_examples(tasks[0][0], tasks[0][1], config)
    assert other and other != _records(fast_shards[0])
    config = shards.make_config(uncased_vocab_file, **SETTINGS)
    assert shards.shard_examples(tasks[0][0], tasks[0][1], config) == _records(fast_shards[0])


def test_script_passes_beam_options_through(tmp_path, corpus_files, uncased_vocab_file, fast_shards):
    out = tmp_path / "script"
    cmd = [sys.executable, os.path.join(REPO, "run_scripts", "create_pretraining_data_beam.py"),
           f"--input_file={','.join(corpus_files)}", f"--output_file={out}", f"--vocab_file={uncased_vocab_file}",
           f"--shard_size={SHARD_SIZE}", "--runner=DirectRunner", "--direct_num_workers=1",
           "--direct_running_mode=in_memory"] + [f"--{k}={v}" for k, v in SETTINGS.items()]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = sorted(glob.glob(f"{out}-*"))
    assert [os.path.basename(p)[len("script"):] for p in written] == \
        [os.path.basename(p)[len("ex"):] for p in fast_shards]
    for a, b in zip(written, fast_shards):
        assert _records(a) == _records(b)
    # An unknown Beam option reaches Beam (and is rejected there), not absl.
    # --direct_num_workers above went to Beam, not absl; so does a runner name, which Beam rejects.
    bad_cmd = [a if not a.startswith("--runner=") else "--runner=NoSuchRunner" for a in cmd]
    bad = forkserver.run(bad_cmd, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "Unexpected pipeline runner: NoSuchRunner" in bad.stderr
