"""benchmarks/input_pipeline.py: its record count, its arithmetic, its checkpoint tensor count, and a pipeline child
pinned as it says (every thread of the process on its one CPU)."""
import json
import os
import shutil
import sys

import benchmark_modules
import forkserver
import pytest
import tensorflow as tf

input_pipeline = benchmark_modules.load("input_pipeline")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def test_count_records_counts_tfrecords_of_any_length(tmp_path):
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    for path, lengths in zip(paths, ([0, 1, 300], [5000] * 4)):
        with tf.io.TFRecordWriter(path) as writer:
            for n in lengths:
                writer.write(b"x" * n)
    assert input_pipeline.count_records(paths) == 7


def test_cores_needed():
    # 8 accelerators at 1,600 sequences/s = 12,800/s; 4,000/s per core: 3.2 cores; 3,200/s per core: 4 cores; the
    # larger x 2 = 8; 6.4 (3.2 x 2) rounds up to 7.
    assert input_pipeline.cores_needed([4000, 3200], 8, 1600, 2.0) == {"demand": 12800, "cores": [3.2, 4.0],
                                                                       "with_margin": 8}
    assert input_pipeline.cores_needed([4000], 8, 1600, 2.0)["with_margin"] == 7


def test_host_rows_take_one_core_at_the_proxy_batch_and_two_cores_per_core():
    def row(seq, batch, masking, cores, rate):
        return {"seq": seq, "batch": batch, "masking": masking, "cores": cores, "sequences_per_s": rate}

    rows = [row(128, 32, "static", 1, 9000.0), row(128, 256, "static", 1, 8000.0), row(128, 256, "static", 2, 12000.0),
            row(512, 32, "dynamic", 1, 2000.0)]
    args = input_pipeline.parse_args(["--gpus=4", "--gpu_rate_128=1000", "--gpu_rate_512=250", "--margin=2"])
    hosts = input_pipeline.host_rows(args, rows)
    # 128: 4,000/s needed: 0.5 cores at 8,000/s, 0.667 at 12,000 / 2, the larger x 2 = 1.33: 2 cores.
    # 512: 1,000/s needed: 0.5 cores at 2,000/s, x 2 = 1 core.
    assert [(h["seq"], h["batch"], h["masking"], h["one_core"], h["two_cores"], h["demand"], h["with_margin"])
            for h in hosts] == [(128, 256, "static", 8000.0, 12000.0, 4000, 2),
                                (512, 32, "dynamic", 2000.0, None, 1000, 1)]
    assert hosts[0]["cores"] == pytest.approx([0.5, 4000 / 6000]) and hosts[1]["cores"] == [0.5]


def test_float_tensors_counts_the_floating_point_values_of_a_checkpoint(tmp_path):
    checkpoint = tf.train.Checkpoint(w=tf.Variable(tf.zeros([3, 4])), h=tf.Variable(tf.zeros([5], tf.float16)),
                                     step=tf.Variable(7, dtype=tf.int64))
    prefix = checkpoint.write(str(tmp_path / "ckpt"))
    assert input_pipeline.float_tensors(prefix) == (17, 3 * 4 * 4 + 5 * 2)


@pytest.mark.slow
def test_a_child_pins_every_thread_to_its_core_and_counts_whole_batches(tmp_path, child_env):
    records = tmp_path / "records"
    records.mkdir()
    shutil.copy(os.path.join(FIXTURES, "pretraining_sample_text_seed12345.tfrecord"), records / "wiki-00000-of-00001")
    out = forkserver.run([sys.executable, os.path.join(benchmark_modules.BENCHMARKS, "input_pipeline.py"),
                          "--child=128x4:dynamic:1", "--warmup_s=0.2", "--seconds=0.5", f"--records_dir={records}",
                          f"--work_dir={tmp_path}"], env=child_env(), capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.split(input_pipeline.measure.RESULT_PREFIX)[-1])
    first = min(os.sched_getaffinity(0))
    assert result["cpus"] == [first] and result["threads_cpus"] == [first]
    assert result["batches"] > 0 and result["sequences"] == 4 * result["batches"]
    assert result["sequences_per_s"] == pytest.approx(result["sequences"] / result["wall_s"])
