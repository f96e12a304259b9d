"""create_pretraining_data_beam.py, unchanged, on Beam's DaskRunner over a dask.distributed cluster of two worker
processes writes the fast mode's shards byte for byte (docs/scale.md's recipe; --dask_npartitions spreads the
shards over both workers)."""
import glob
import os
import sys

import forkserver
import pytest

pytest.importorskip("apache_beam")
distributed = pytest.importorskip("distributed")

from bert_tf.data.pretraining import shards  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = dict(do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10, random_seed=7, dupe_factor=2,
                masked_lm_prob=0.15, short_seq_prob=0.1)
RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def test_dask_runner_writes_the_fast_modes_shards(tmp_path, data_dir, uncased_vocab_file):
    corpus = os.path.join(data_dir, "sample_text.txt")  # 3 documents: 3 shards of 1
    fast, _, _ = shards.run_sharded(corpus, str(tmp_path / "fast"), uncased_vocab_file, num_workers=1, shard_size=1,
                                    progress=False, **SETTINGS)
    assert len(fast) == 3
    cmd = [sys.executable, os.path.join(REPO, "run_scripts", "create_pretraining_data_beam.py"),
           f"--input_file={corpus}", f"--output_file={tmp_path / 'dask'}", f"--vocab_file={uncased_vocab_file}",
           "--shard_size=1", f"--runner={RUNNER}", "--dask_npartitions=2"] + [f"--{k}={v}" for k, v in SETTINGS.items()]
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client, distributed.get_task_stream(client) as tasks:
        proc = forkserver.run(cmd + [f"--dask_client_address={cluster.scheduler_address}"], capture_output=True,
                              text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Beam runner {RUNNER}" in proc.stderr
    workers = {task["worker"] for task in tasks.data}
    assert len(workers) == 2, workers  # both worker processes ran the pipeline's tasks
    written = sorted(glob.glob(str(tmp_path / "dask-*")))
    assert [os.path.basename(p)[len("dask"):] for p in written] == [os.path.basename(p)[len("fast"):] for p in fast]
    for dask_path, fast_path in zip(written, fast):
        with open(dask_path, "rb") as a, open(fast_path, "rb") as b:
            assert a.read() == b.read(), dask_path
