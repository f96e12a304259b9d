"""bert_tf.fileio, the one module that touches files, on a local directory and on TensorFlow's in-memory ram://
file system (a URL that only tf.io.gfile reaches, as gs:// is): reading, atomic writing, directories committed as a
whole (the key file last, a killed commit rolled forward, a superseded one dropped), temporaries judged by their
writer (host, process id and start)."""
import gzip
import json
import os
import secrets
import socket
import subprocess
import sys
import time

import pytest

from bert_tf import fileio


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
    """A new empty directory: local, or on ram:// (gfile)."""
    if request.param == "local":
        yield str(tmp_path)
        return
    import tensorflow as tf
    path = f"ram://test_fileio_{secrets.token_hex(4)}"
    tf.io.gfile.makedirs(path)
    yield path
    fileio.remove_tree(path)


def _write(path, text):
    fileio.write_text_atomically(path, text)
    return path


def test_reads_writes_and_lists_any_path(root):
    _write(os.path.join(root, "a", "x.txt"), "x\n")  # the parent is made
    _write(os.path.join(root, "a", "b", "y.txt"), "héllo")
    with fileio.atomic_write(os.path.join(root, "z.txt.gz")) as f:
        f.write("compressed\n")
    assert fileio.read_text(os.path.join(root, "a", "b", "y.txt")) == "héllo"
    with fileio.open_file(os.path.join(root, "z.txt.gz"), "r") as f:
        assert f.read() == "compressed\n"
    assert gzip.decompress(fileio.read_bytes(os.path.join(root, "z.txt.gz"))) == b"compressed\n"
    assert fileio.listdir(root) == ["a", "z.txt.gz"]
    assert fileio.walk_files(os.path.join(root, "a")) == ["b/y.txt", "x.txt"]
    assert fileio.isdir(os.path.join(root, "a")) and not fileio.isfile(os.path.join(root, "a"))
    assert fileio.isfile(os.path.join(root, "a", "x.txt")) and fileio.file_size(os.path.join(root, "a", "x.txt")) == 2
    assert sorted(fileio.expand_patterns(f"{root}/a/*.txt,{root}/a/b/y.txt")) == sorted(
        [os.path.join(root, "a", "x.txt"), os.path.join(root, "a", "b", "y.txt")])
    with pytest.raises(FileNotFoundError, match=r"No file matches .*nothing\*"):
        fileio.expand_patterns(f"{root}/nothing*")
    fileio.copy_tree(os.path.join(root, "a"), os.path.join(root, "copy"))
    assert fileio.walk_files(os.path.join(root, "copy")) == ["b/y.txt", "x.txt"]
    with fileio.local_file(os.path.join(root, "copy", "x.txt")) as local:
        assert not fileio.is_url(local) and open(local).read() == "x\n"
    fileio.remove_tree(os.path.join(root, "copy"))
    assert not fileio.exists(os.path.join(root, "copy"))
    assert not [n for n in fileio.walk_files(root) if fileio.TEMP_MARK in n]


def test_read_errors_name_the_file(root):
    missing, bad = os.path.join(root, "missing.json"), _write(os.path.join(root, "bad.json"), '{\n  "a": 1,\n}')
    with pytest.raises(FileNotFoundError, match=f"^BERT config file not found: {missing}$"):
        fileio.read_json(missing, "BERT config file")
    with pytest.raises(ValueError, match=rf"^{bad}:3:1: malformed JSON in BERT config file"):
        fileio.read_json(bad, "BERT config file")
    fileio.write_bytes_atomically(os.path.join(root, "latin1.txt"), b"ok\ncaf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.txt:2: not valid UTF-8"):
        fileio.read_text(os.path.join(root, "latin1.txt"))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        fileio.read_bytes(root, "vocab file")


def test_a_failed_atomic_write_leaves_the_old_file(root):
    path = _write(os.path.join(root, "results.txt"), "old")
    with pytest.raises(RuntimeError):
        with fileio.atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("writer failed")
    assert fileio.read_text(path) == "old" and fileio.listdir(root) == ["results.txt"]


def _version(root, name, files, key="saved_model.pb"):
    """Commits `files` ({relative path: text}) as the directory root/name through `staged_directory`."""
    target = os.path.join(root, name)
    with fileio.staged_directory(target, key=key) as out:
        for path, text in files.items():
            _write(os.path.join(out, path), text)
    return target


def _tree(directory):
    return {name: fileio.read_text(os.path.join(directory, name)) for name in fileio.walk_files(directory)}


def test_a_committed_directory_is_the_new_content_with_its_key_moved_last(root, monkeypatch):
    old = {"saved_model.pb": "old", "variables/v": "old", "assets.extra/only_old": "old"}
    new = {"saved_model.pb": "new", "variables/v": "new", "assets/vocab.txt": "new"}
    target = _version(root, "1", old)
    assert _tree(target) == old and fileio.listdir(root) == ["1"]
    moves, replace = [], fileio.replace

    def recording(source, destination):  # what a reader of the target sees at each move
        moves.append((os.path.relpath(destination, target), fileio.exists(os.path.join(target, "saved_model.pb"))))
        replace(source, destination)

    monkeypatch.setattr(fileio, "replace", recording)
    _version(root, "1", new)
    assert _tree(target) == new and fileio.listdir(root) == ["1"]  # the old-only file gone, no staging left
    assert not os.path.isdir(os.path.join(target, "assets.extra"))  # its emptied directory too (local)
    moved = [name for name, _ in moves if not name.startswith("..")]  # (the manifest is written beside)
    assert moved[-1] == "saved_model.pb" and sorted(moved) == sorted(new)
    assert not any(key_there for name, key_there in moves if name in ("variables/v", "assets/vocab.txt"))


def test_a_block_that_raises_commits_nothing(root):
    target = _version(root, "1", {"saved_model.pb": "old"})
    with pytest.raises(RuntimeError):
        with fileio.staged_directory(target, key="saved_model.pb") as out:
            _write(os.path.join(out, "saved_model.pb"), "new")
            raise RuntimeError("writer failed")
    with pytest.raises(FileNotFoundError, match="lacks its key file saved_model.pb"):
        with fileio.staged_directory(target, key="saved_model.pb") as out:
            _write(os.path.join(out, "variables"), "no key")
    assert _tree(target) == {"saved_model.pb": "old"} and fileio.listdir(root) == ["1"]


def _dead_pid():
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


def _temporary(directory, label, writer):
    """A temporary directory name in `directory` whose writer is `writer` (host, pid, start)."""
    host, pid, start = writer
    path = os.path.join(directory, f".{label}{fileio.TEMP_MARK}{host}-{pid}-{start}-{secrets.token_hex(4)}")
    fileio.makedirs(path)
    return path


def _killed_commit(root, name, files, key="saved_model.pb", host=None):
    """A staging directory for root/name of a writer killed right after its commit point (its manifest): a dead
    process of this host, or a process of `host`."""
    staging = _temporary(root, name, (host, os.getpid(), "0") if host else (socket.gethostname(), _dead_pid(), "0"))
    for path, text in files.items():
        _write(os.path.join(staging, "content", path), text)
    _write(os.path.join(staging, fileio.COMMIT_MANIFEST), json.dumps(
        {"target": name, "key": key, "files": sorted(files), "remove": ".*"}))
    return staging


def test_a_commit_killed_after_its_manifest_is_completed_by_the_next_writer(root):
    target = _version(root, "1", {"saved_model.pb": "old", "variables/v": "old", "only_old": "old"})
    _killed_commit(root, "1", {"saved_model.pb": "new", "variables/v": "new"})
    _killed_commit(root, "2", {"saved_model.pb": "two"})
    fileio.remove_stale_temporaries(root)
    assert _tree(target) == {"saved_model.pb": "new", "variables/v": "new"}
    assert _tree(os.path.join(root, "2")) == {"saved_model.pb": "two"} and fileio.listdir(root) == ["1", "2"]


def _age(directory, seconds):
    """Sets the modification time of `directory` and everything under it `seconds` back."""
    past = time.time() - seconds
    for base, _, names in os.walk(directory):
        for path in [base] + [os.path.join(base, name) for name in names]:
            os.utime(path, (past, past))


def test_a_killed_commit_superseded_by_a_later_one_is_dropped(tmp_path):
    """A commit of another host killed after its manifest, left alone while it could be live, whose target was
    committed again since: once stale it is removed, not rolled forward over the newer version (local: ram://
    keeps no modification times)."""
    root = str(tmp_path)
    staging = _killed_commit(root, "1", {"saved_model.pb": "older", "variables/v": "older"}, host="another-host")
    _age(staging, 60)
    target = _version(root, "1", {"saved_model.pb": "newer"})
    assert fileio.exists(staging)  # another host's, young: its writer may still run
    _age(staging, fileio.FOREIGN_TEMPORARY_AGE_S + 60)
    assert fileio.remove_stale_temporaries(root) == [staging]
    assert _tree(target) == {"saved_model.pb": "newer"} and fileio.listdir(root) == ["1"]


def test_temporaries_name_their_writer_by_host_process_and_start(tmp_path):
    path = str(tmp_path / "eval_results.txt")
    names = {fileio.temp_path(path) for _ in range(100)}
    assert len(names) == 100
    writers = {fileio.temporary_writer(name) for name in names}
    assert len(writers) == 1
    host, pid, start = writers.pop()
    assert (host, pid) == (socket.gethostname(), os.getpid()) and start != "0"  # Linux tells the start
    assert fileio.temporary_writer(path) is None


def test_stale_temporaries_are_those_whose_writer_has_ended(tmp_path):
    directory, host = str(tmp_path), socket.gethostname()
    _, _, start = fileio.temporary_writer(fileio.temp_path(directory))
    boot, tick = start.split(".")
    running = _temporary(directory, "running", (host, os.getpid(), start))
    foreign_young = _temporary(directory, "foreign", ("another-host", os.getpid(), start))
    stale = {
        "dead": _temporary(directory, "dead", (host, _dead_pid(), "0")),
        # a restarted container: the same host name and process id, another process start
        "reused_pid": _temporary(directory, "reused", (host, os.getpid(), f"{boot}.{int(tick) + 1}")),
        "rebooted": _temporary(directory, "rebooted", (host, os.getpid(), f"{'0' * 8}.{tick}")),
        "foreign_old": _temporary(directory, "foreign_old", ("another-host", os.getpid(), start)),
    }
    old = time.time() - fileio.FOREIGN_TEMPORARY_AGE_S - 60
    os.utime(stale["foreign_old"], (old, old))
    checkpoint_temporaries = [str(tmp_path / "ckpt-3_temp"), str(tmp_path / "checkpoint.tmp1a2b")]
    for path in checkpoint_temporaries:
        os.mkdir(path)
    assert fileio.stale_temporaries(directory) == sorted(stale.values())
    assert fileio.stale_temporaries(directory, checkpoints=True) == sorted([*stale.values(), *checkpoint_temporaries])
    assert fileio.remove_stale_temporaries(directory) == sorted(stale.values())
    assert sorted(fileio.listdir(directory)) == sorted(
        os.path.basename(p) for p in (running, foreign_young, *checkpoint_temporaries))


def test_a_writer_whose_start_is_hidden_is_judged_by_the_boot(tmp_path, monkeypatch):
    """Where the system hides a process's start (/proc mounted with hidepid), a new boot still ends every writer."""
    directory, host = str(tmp_path), socket.gethostname()
    _, _, start = fileio.temporary_writer(fileio.temp_path(directory))
    tick = start.split(".")[1]
    this_boot = _temporary(directory, "this_boot", (host, os.getpid(), start))
    rebooted = _temporary(directory, "rebooted", (host, os.getpid(), f"{'0' * 8}.{tick}"))
    monkeypatch.setattr(fileio, "_start_tick", lambda pid: None)
    assert fileio.writer_is_running(this_boot) and not fileio.writer_is_running(rebooted)


def test_a_urls_fingerprint_reads_its_metadata_alone():
    """On a URL (here ram://, whose files all bear modification time 0) a file counts by its size and modification
    time, read from its metadata: other bytes of the same size and time give the same fingerprint, another size
    another one. (On gs:// a read fetches a 64 MiB block: sampling would fetch whole shards.)"""
    root = f"ram://fingerprint_{secrets.token_hex(4)}"
    fileio.write_bytes_atomically(f"{root}/a", b"x" * 1000)
    before = fileio.fingerprint([f"{root}/a"])
    fileio.write_bytes_atomically(f"{root}/a", b"y" * 1000)
    assert fileio.fingerprint([f"{root}/a"]) == before
    fileio.write_bytes_atomically(f"{root}/a", b"y" * 1001)
    assert fileio.fingerprint([f"{root}/a"]) != before
    fileio.remove_tree(root)
