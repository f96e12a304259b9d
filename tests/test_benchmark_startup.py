"""benchmarks/startup_benchmark.py: its files are what it says (sparse or dense, reused), and the bytes it reports are
what each fingerprint rule reads."""
import json
import os

import benchmark_modules
import pytest

from bert_tf.tasks import run_record

startup = benchmark_modules.load("startup_benchmark")
MIB = 1 << 20


def test_make_shards_makes_sparse_or_dense_files_and_reuses_them(tmp_path):
    sparse = startup.make_shards(str(tmp_path), 3, MIB)
    assert [os.path.basename(p) for p in sparse] == ["shard-00000", "shard-00001", "shard-00002"]
    assert all(os.path.getsize(p) == MIB and os.stat(p).st_blocks == 0 for p in sparse)
    os.utime(sparse[0], (1, 1))  # a rewrite would change its time
    os.truncate(sparse[2], MIB // 2)  # the wrong size: made again
    assert startup.make_shards(str(tmp_path), 3, MIB) == sparse
    assert os.stat(sparse[0]).st_mtime == 1 and os.path.getsize(sparse[2]) == MIB
    dense = startup.make_shards(str(tmp_path), 2, MIB, dense=True)  # sparse files of that name are rewritten
    assert all(os.path.getsize(p) == MIB and not startup.is_sparse(p) for p in dense)
    with open(dense[0], "rb") as f:
        assert f.read().count(0) < MIB // 100  # random bytes, not zeros


def test_parse_io():
    text = "rchar: 6976\nwchar: 0\nsyscr: 10\nread_bytes: 4096\ncancelled_write_bytes: 0\n"
    assert startup.parse_io(text) == {"rchar": 6976, "wchar": 0, "syscr": 10, "read_bytes": 4096,
                                      "cancelled_write_bytes": 0}


def test_measured_bytes_are_what_each_rule_reads(tmp_path):
    small = startup.make_shards(str(tmp_path / "small"), 3, MIB)
    large = startup.make_shards(str(tmp_path / "large"), 1, startup.OLD_WHOLE_BYTES + MIB)
    slack = 4096  # reading /proc/self/io itself
    sample = run_record.FINGERPRINT_SAMPLE_BYTES
    for fingerprint, paths, expected in [(run_record.fingerprint, small, 3 * 3 * sample),
                                         (run_record.fingerprint, large, 3 * sample),
                                         (startup.old_fingerprint, small, 3 * MIB),  # whole
                                         (startup.old_fingerprint, large, 3 * MIB)]:  # three MiB of a large file
        result = startup.measured(fingerprint, paths)
        assert expected <= result["bytes_read"] < expected + slack, (fingerprint, paths)
        assert result["seconds"] > 0


def test_main_writes_a_row_per_rule_and_run(tmp_path):
    out = tmp_path / "startup.json"
    startup.main(["--shards=4", "--shard_mib=1", "--old_shards=2", f"--work_dir={tmp_path}", f"--json={out}"])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["rule"], r["files"], r["run"]) for r in rows] == [
        ("new", 4, "first"), ("new", 4, "again"), ("old", 4, "first"), ("old", 4, "again")]
    assert all(r["measured_files"] == 2 and r["extrapolated"] for r in rows[2:])
    assert rows[2]["bytes_read"] == pytest.approx(4 * MIB, rel=0.01)  # 2 files read whole, scaled by 4 / 2


def test_gcs_fetched_bytes_sums_the_clients_reads():
    log = ("2026-11-28 10:06:24.167558: I external/local_xla/xla/tsl/platform/cloud/gcs_file_system.cc:1132] "
           "Successful read of gs://bert-tf/shard-0 @ 0 of size: 67108864\n"
           "I0000 other line of size: 5\n"
           "2026-11-28 10:06:24.172794: I external/local_xla/xla/tsl/platform/cloud/gcs_file_system.cc:1132] "
           "Successful read of gs://bert-tf/shard-0 @ 100597759 of size: 65537\n")
    assert startup.gcs_fetched_bytes(log) == 67108864 + 65537
