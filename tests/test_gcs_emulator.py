"""TensorFlow's own GCS client against the emulator of tests/gcs_emulator.py: what bert-tf can rely on on gs://.

One child process, started with the fixture's environment (TensorFlow reads it at start), runs every check in turn
and reports each one's error; the emulator's own listing (through its JSON API, not TensorFlow) then shows what
was written and removed. Semantics of TensorFlow's client that differ from a local disk, as seen here:
listdir and walk name subdirectories with a trailing "/"; makedirs writes a zero-byte "dir/" marker object for each
level that no object name has as a prefix yet; rename and copy rewrite objects (a directory object by object) and
give them a new mtime; stat results are cached for 5 s per process (GCS_STAT_CACHE_MAX_AGE), so a directory still
exists for up to 5 s after rmtree or a rename in the process that did it.
"""
import json
import os
import sys

import forkserver
import pytest
from gcs_emulator import forwarded_head, gcs_emulator_fixture  # noqa: F401 (the gcs_emulator fixture)

# Each check raises on a wrong result; the child prints {check: None or "ErrorType: message"} as its last line.
CHECKS = r'''
import json, sys, time
import tensorflow as tf

g = tf.io.gfile
B = sys.argv[1]
BIG = bytes(range(256)) * (33 * 1024) + b"end"  # 8.25 MiB + 3 bytes: over 8 MiB, not a multiple of a block


def write(path, data, mode="w"):
    with g.GFile(path, mode) as f:
        f.write(data)


def read(path, mode="r"):
    with g.GFile(path, mode) as f:
        return f.read()


def raises(error, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except error:
        return
    raise AssertionError(f"{fn.__name__}{args} did not raise {error.__name__}")


def object_from_another_client():
    assert read(f"{B}/input.txt", "rb") == b"uploaded without TensorFlow\n"
    assert g.stat(f"{B}/input.txt").length == 28


def makedirs():
    g.makedirs(f"{B}/d/e")
    assert g.isdir(f"{B}/d/e") and g.isdir(f"{B}/d")


def small_file():
    before = time.time()
    write(f"{B}/d/small.txt", "h\u00e9llo\n")
    after = time.time()
    assert read(f"{B}/d/small.txt") == "h\u00e9llo\n"
    stat = g.stat(f"{B}/d/small.txt")
    assert stat.length == 7 and not stat.is_directory, stat
    assert before - 2 <= stat.mtime_nsec / 1e9 <= after + 2, (before, stat.mtime_nsec, after)


def big_file():
    write(f"{B}/d/big.bin", BIG, "wb")
    assert read(f"{B}/d/big.bin", "rb") == BIG
    with g.GFile(f"{B}/d/big.bin", "rb") as f:
        f.seek(8 * 2**20 + 1)
        assert f.read(5) == BIG[8 * 2**20 + 1:8 * 2**20 + 6]
    assert g.stat(f"{B}/d/big.bin").length == len(BIG)


def exists_isdir():
    assert g.exists(f"{B}/d/big.bin") and not g.isdir(f"{B}/d/big.bin")
    assert not g.exists(f"{B}/d/missing") and not g.isdir(f"{B}/d/missing")
    raises(tf.errors.NotFoundError, read, f"{B}/d/missing")


def listings():
    assert sorted(g.listdir(f"{B}/d")) == ["big.bin", "e/", "small.txt"], g.listdir(f"{B}/d")
    assert g.glob(f"{B}/d/*.txt") == [f"{B}/d/small.txt"], g.glob(f"{B}/d/*.txt")
    walk = [(top, sorted(dirs), sorted(files)) for top, dirs, files in g.walk(f"{B}/d")]
    assert walk == [(f"{B}/d", ["e/"], ["big.bin", "small.txt"]), (f"{B}/d/e/", [], [])], walk


def rename_file():
    g.rename(f"{B}/d/small.txt", f"{B}/d/renamed.txt")
    assert not g.exists(f"{B}/d/small.txt") and read(f"{B}/d/renamed.txt") == "h\u00e9llo\n"
    write(f"{B}/d/other.txt", "other")
    raises(tf.errors.AlreadyExistsError, g.rename, f"{B}/d/other.txt", f"{B}/d/renamed.txt")
    g.rename(f"{B}/d/other.txt", f"{B}/d/renamed.txt", overwrite=True)
    assert read(f"{B}/d/renamed.txt") == "other" and not g.exists(f"{B}/d/other.txt")


def copy_remove():
    g.copy(f"{B}/d/renamed.txt", f"{B}/d/copy.txt")
    raises(tf.errors.AlreadyExistsError, g.copy, f"{B}/d/big.bin", f"{B}/d/copy.txt")
    g.copy(f"{B}/d/big.bin", f"{B}/d/copy.txt", overwrite=True)
    assert read(f"{B}/d/copy.txt", "rb") == BIG
    g.remove(f"{B}/d/copy.txt")
    assert not g.exists(f"{B}/d/copy.txt")


def append():
    write(f"{B}/d/log.txt", "ab")
    write(f"{B}/d/log.txt", "cd", "a")
    assert read(f"{B}/d/log.txt") == "abcd"


def rename_and_rmtree_directory():
    write(f"{B}/tree/a/x.txt", "x")
    write(f"{B}/tree/y.txt", "y")
    g.rename(f"{B}/tree", f"{B}/moved")
    assert read(f"{B}/moved/a/x.txt") == "x" and not g.exists(f"{B}/tree/a/x.txt")
    g.rmtree(f"{B}/moved")
    assert not g.exists(f"{B}/moved/a/x.txt") and not g.exists(f"{B}/moved/y.txt")


def tfrecords():
    with tf.io.TFRecordWriter(f"{B}/data.tfrecord") as writer:
        for i in range(100):
            writer.write(b"record %d" % i)
    got = [r.numpy() for r in tf.data.TFRecordDataset(f"{B}/data.tfrecord")]
    assert got == [b"record %d" % i for i in range(100)], got[:3]


def checkpoints():
    variable = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), f"{B}/ckpt", max_to_keep=1)
    manager.save()
    variable.assign([3.0, 4.0])
    manager.save()
    restored = tf.Variable([0.0, 0.0])
    tf.train.Checkpoint(v=restored).restore(tf.train.latest_checkpoint(f"{B}/ckpt")).assert_consumed()
    assert restored.numpy().tolist() == [3.0, 4.0]
    assert sorted(g.listdir(f"{B}/ckpt")) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]


def saved_model():
    class Scale(tf.Module):
        def __init__(self):
            self.w = tf.Variable(2.0)

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def __call__(self, x):
            return self.w * x

    tf.saved_model.save(Scale(), f"{B}/model")
    assert float(tf.saved_model.load(f"{B}/model")(tf.constant(3.0))) == 6.0


def summaries():
    writer = tf.summary.create_file_writer(f"{B}/logs")
    with writer.as_default():
        for step in range(3):
            tf.summary.scalar("loss", 1.5 * step, step=step)
            writer.flush()  # each flush uploads the whole file again
    writer.close()
    files = g.glob(f"{B}/logs/events.out.tfevents.*")
    events = [tf.compat.v1.Event.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files)]
    got = [(e.step, v.tag, float(tf.make_ndarray(v.tensor))) for e in events for v in e.summary.value]
    assert got == [(0, "loss", 0.0), (1, "loss", 1.5), (2, "loss", 3.0)], got


results = {}
for check in (object_from_another_client, makedirs, small_file, big_file, exists_isdir, listings, rename_file,
              copy_remove, append, rename_and_rmtree_directory, tfrecords, checkpoints, saved_model, summaries):
    try:
        check()
        results[check.__name__] = None
    except Exception as e:
        results[check.__name__] = f"{type(e).__name__}: {e}"
print(json.dumps(results))
'''


@pytest.mark.slow
def test_tensorflow_gcs_client_through_the_emulator(gcs_emulator, child_env, tmp_path):
    """Every check passes in a child process (the first reads an object uploaded here), nothing lands in its
    working directory, the proxy refused nothing, and the emulator holds exactly what the checks left, directory
    markers included, with the contents TensorFlow wrote."""
    refused_before = len(gcs_emulator.proxy.refused)
    gcs_emulator.upload("gfile/input.txt", b"uploaded without TensorFlow\n")
    result = forkserver.run([sys.executable, "-c", CHECKS, f"{gcs_emulator.url}/gfile"], capture_output=True,
                            text=True, cwd=tmp_path, env=child_env(**gcs_emulator.env), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    failures = {k: v for k, v in json.loads(result.stdout.splitlines()[-1]).items() if v is not None}
    assert not failures, json.dumps(failures, indent=1)
    assert os.listdir(tmp_path) == []
    assert gcs_emulator.proxy.refused[refused_before:] == []
    names = [name for name in gcs_emulator.object_names() if name.startswith("gfile/")]
    events = [name for name in names if name.startswith("gfile/logs/events.out.tfevents.")]
    assert len(events) == 1, names
    assert [name for name in names if name not in events] == [
        "gfile/ckpt/", "gfile/ckpt/checkpoint", "gfile/ckpt/ckpt-2.data-00000-of-00001", "gfile/ckpt/ckpt-2.index",
        "gfile/d/", "gfile/d/big.bin", "gfile/d/e/", "gfile/d/log.txt", "gfile/d/renamed.txt", "gfile/data.tfrecord",
        "gfile/input.txt", "gfile/logs/", "gfile/model/", "gfile/model/assets/", "gfile/model/fingerprint.pb",
        "gfile/model/saved_model.pb", "gfile/model/variables/", "gfile/model/variables/variables.data-00000-of-00001",
        "gfile/model/variables/variables.index"]
    assert gcs_emulator.download("gfile/d/log.txt") == b"abcd"


def test_the_proxy_refuses_every_other_host(gcs_emulator):
    """A CONNECT to another host, or to a Google host on another port, and a plain-HTTP request are refused (403)
    and recorded; nothing is forwarded."""
    import http.client
    refused_before = len(gcs_emulator.proxy.refused)
    gcs_emulator.upload("gfile/input.txt", b"uploaded without TensorFlow\n")
    for host, port in (("example.com", 443), ("www.googleapis.com", 80)):
        connection = http.client.HTTPConnection("127.0.0.1", gcs_emulator.proxy.port, timeout=10)
        connection.set_tunnel(host, port)
        with pytest.raises(OSError, match="403"):
            connection.request("GET", "/")
        connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", gcs_emulator.proxy.port, timeout=10)
    connection.request("GET", "http://metadata.google.internal/computeMetadata/v1/")
    assert connection.getresponse().status == 403
    connection.close()
    assert gcs_emulator.proxy.refused[refused_before:] == [
        "CONNECT example.com:443 HTTP/1.0", "CONNECT www.googleapis.com:80 HTTP/1.0",
        "GET http://metadata.google.internal/computeMetadata/v1/ HTTP/1.1"]


def test_forwarded_head_drops_transfer_encoding_identity():
    """libcurl's "Transfer-Encoding: identity" (which Go's HTTP server refuses) is dropped, the Content-Length kept
    and returned, "X-Forwarded-Proto: https" replaces any other; a chunked body has no length, even with the
    Content-Length that TensorFlow's resumable uploads send beside it."""
    head = (b"POST /upload/storage/v1/b/x/o?uploadType=media&name=d%2F HTTP/1.1\r\nHost: www.googleapis.com\r\n"
            b"Content-Length: 0\r\nTransfer-Encoding: identity\r\nX-Forwarded-Proto: http\r\n\r\n")
    assert forwarded_head(head) == (
        b"POST /upload/storage/v1/b/x/o?uploadType=media&name=d%2F HTTP/1.1\r\nHost: www.googleapis.com\r\n"
        b"Content-Length: 0\r\nX-Forwarded-Proto: https\r\n\r\n", 0)
    assert forwarded_head(b"PUT /u HTTP/1.1\r\ncontent-length: 12\r\n\r\n")[1] == 12
    assert forwarded_head(b"PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")[1] is None
    assert forwarded_head(b"PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 78\r\n\r\n")[1] is None

