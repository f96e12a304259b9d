"""bert_tf.fileio, the one module that touches files, on a local directory and on TensorFlow's in-memory ram://
file system (a URL that only tf.io.gfile reaches, as gs:// is): reading, atomic writing, directories committed as a
whole by their writer (the key file last), stale temporaries (untouched for a day) removed and nothing else, inputs
that are files."""
import contextlib
import gzip
import io
import json
import logging
import os
import secrets
import socket
import time

import pytest

from bert_tf import fileio

NO_SUCH_PID = 2**22 + 7  # above Linux's largest pid_max: no process here has it (a writer of another PID namespace)


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
    fileio.write_text_atomically(os.path.join(root, "a", "empty"), "")  # a file with nothing written is one too
    assert fileio.read_text(os.path.join(root, "a", "empty")) == ""
    fileio.remove_tree(os.path.join(root, "a", "empty"))
    with fileio.open_file(os.path.join(root, "z.txt.gz"), "r") as f:
        assert f.read() == "compressed\n"
    assert gzip.decompress(fileio.read_bytes(os.path.join(root, "z.txt.gz"))) == b"compressed\n"
    assert fileio.listdir(root) == ["a", "z.txt.gz"]
    assert fileio.walk_files(os.path.join(root, "a")) == ["b/y.txt", "x.txt"]
    assert fileio.isdir(os.path.join(root, "a")) and not fileio.isfile(os.path.join(root, "a"))
    assert fileio.isfile(os.path.join(root, "a", "x.txt")) and fileio.stat(os.path.join(root, "a", "x.txt"))[0] == 2
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
    with pytest.raises(ValueError, match=r"latin1.txt:2: not valid UTF-8 \(.* at byte 6\); convert the file to UTF-8 "
                                         r"\(e\.g\. iconv -f latin1 -t utf-8\)"):
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


def _age(path, seconds):
    """Sets the modification time of `path` and everything under it `seconds` back (ahead if negative)."""
    when = time.time() - seconds
    for base, _, names in os.walk(path):
        for below in [base] + [os.path.join(base, name) for name in names]:
            os.utime(below, (when, when))
    os.utime(path, (when, when))


def _killed_staging(directory, name, files):
    """A staging directory for `directory/name` as an earlier version's writer (of another host) killed after its
    commit point left it: its content, and a manifest naming `files` as that of `name`."""
    staging = os.path.join(directory, f".{name}{fileio.TEMP_MARK}another-host-1-0-deadbeef")
    for path in files:
        _write(os.path.join(staging, "content", path), f"{name} of the killed writer")
    _write(os.path.join(staging, "manifest.json"), json.dumps(
        {"target": name, "key": "saved_model.pb", "files": sorted(files), "remove": ".*"}))
    return staging


def test_a_planted_staging_directory_is_removed_never_followed(tmp_path):
    """Item 3: a stale staging directory is only removed, whatever it holds (here a manifest naming a sibling
    directory of the export_dir as its target)."""
    victim = {"saved_model.pb": "victim", "variables/v": "victim"}
    for path, text in victim.items():
        _write(str(tmp_path / "victim" / path), text)
    _age(str(tmp_path / "victim"), 2 * fileio.STALE_AFTER_S)
    export_dir = str(tmp_path / "export")
    planted = _killed_staging(export_dir, "1", ["saved_model.pb"])
    _write(os.path.join(planted, "manifest.json"), json.dumps(
        {"target": "../victim", "key": "saved_model.pb", "files": ["saved_model.pb"], "remove": ".*"}))
    _age(planted, fileio.STALE_AFTER_S + 60)
    _version(export_dir, "2", {"saved_model.pb": "two"})
    assert _tree(str(tmp_path / "victim")) == victim and fileio.listdir(export_dir) == ["2"]


def test_a_later_commit_stands_over_an_earlier_killed_one_whatever_the_clocks(tmp_path):
    """Item 4: a writer killed half-way through its commit (its files left in its staging directory) is completed by
    no one: the later commit stands, whatever the writers' clocks say (here the later one's runs a day behind), and
    the staging directory goes once stale."""
    root = str(tmp_path)
    killed = _killed_staging(root, "1", ["saved_model.pb", "variables/v"])
    target = _version(root, "1", {"saved_model.pb": "later"})
    assert fileio.exists(killed)  # young: its writer may run
    _age(killed, fileio.STALE_AFTER_S + 60)
    _age(os.path.join(target, "saved_model.pb"), fileio.STALE_AFTER_S + 3600)
    assert fileio.remove_stale_temporaries(root) == [killed]
    assert _tree(target) == {"saved_model.pb": "later"} and fileio.listdir(root) == ["1"]


def _boot_id():
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip().replace("-", "")[:8]
    return "0"


def test_stale_means_untouched_for_a_day_whoever_wrote_it(tmp_path, caplog):
    """Item 5 and rules 3-4: a temporary is removed once nothing has been written to it for STALE_AFTER_S, whatever
    its name says of its writer (here: this host and boot, a process id that does not exist here, as a writer in
    another PID namespace looks); names that are not our temporaries, and TensorFlow's checkpoint temporaries
    unless `checkpoints`, stay."""
    caplog.set_level(logging.INFO, logger="absl")  # absl logs under "absl", whatever other tests set
    directory = str(tmp_path)
    writer = f"{socket.gethostname()}-{NO_SUCH_PID}-{_boot_id()}.1"
    writing = os.path.join(directory, f".1{fileio.TEMP_MARK}{writer}-0123abcd")
    _write(os.path.join(writing, "content", "variables", "v"), "being written")
    stale = [_write(fileio.temp_path(os.path.join(directory, "eval_results.txt")), "old"),
             _write(os.path.join(directory, "old.txt.tmp-host-1-89abcdef"), "an earlier version's name")]
    kept = [_write(os.path.join(directory, name), "a user's") for name in ("notes.tmp-draft", "eval.tmp-1-not-hex")]
    tensorflows = [_write(os.path.join(directory, name), "TF's") for name in ("checkpoint.tmp5f3c", "x.tempstate1")]
    for path in stale + kept + tensorflows:
        _age(path, fileio.STALE_AFTER_S + 60)
    _version(directory, "2", {"saved_model.pb": "two"})  # a write into the directory cleans it up first
    expected = sorted(os.path.basename(p) for p in [writing, "2", *kept, *tensorflows])
    assert fileio.listdir(directory) == expected and f"Leaving {writing}: it may belong to a running" in caplog.text
    assert fileio.remove_stale_temporaries(directory, checkpoints=True) == sorted(tensorflows)
    _age(writing, fileio.STALE_AFTER_S + 60)
    assert fileio.remove_stale_temporaries(directory) == [writing]


def test_a_temporary_another_clean_up_removed_meanwhile_is_fine(tmp_path, monkeypatch):
    """Item 12: two clean-ups of one directory at once (the other one removes what this one has listed)."""
    directory = str(tmp_path)
    stale = [_write(os.path.join(directory, f"x{i}.tmp-another-host-1-0-0000000{i}"), "old") for i in (1, 2)]
    for path in stale:
        _age(path, fileio.STALE_AFTER_S + 60)
    mtime = fileio.mtime

    def other_clean_up_first(path):
        for other in stale:
            if other != path and os.path.exists(other):
                os.remove(other)
        return mtime(path)

    monkeypatch.setattr(fileio, "mtime", other_clean_up_first)
    fileio.remove_stale_temporaries(directory)
    assert fileio.listdir(directory) == []


def test_inputs_are_files_never_directories_temporaries_or_manifests(root):
    """Rule 5 (on ram://, whose glob answers directories as gs://'s answers folders)."""
    inputs = [_write(os.path.join(root, f"shard-{i}"), "x") for i in range(2)]
    _write(fileio.temp_path(os.path.join(root, "shard-2")), "partial")
    _write(os.path.join(root, "shard" + fileio.SHARDS_MANIFEST_SUFFIX), "{}")
    _write(os.path.join(root, "shard-dir", "f"), "x")
    assert sorted(fileio.expand_patterns(os.path.join(root, "shard*"))) == inputs
    with pytest.raises(FileNotFoundError, match="No file matches .*shard-dir"):
        fileio.expand_patterns(os.path.join(root, "shard-dir"))


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_compressed_write_to_a_url_is_complete_when_its_stream_closes(suffix):
    """Item 12: gzip and bz2 leave a file object they were given open; its upload must complete when the stream
    closes, not when CPython frees it (here it is kept, as a reference cycle or another Python would)."""
    path = f"ram://compressed_{secrets.token_hex(4)}/x.txt{suffix}"
    fileio.makedirs(os.path.dirname(path))
    with fileio.open_file(path, "wb") as f:
        kept = [v for v in vars(f).values() if isinstance(v, io.BufferedWriter)]
        f.write(b"complete\n")
    assert kept and fileio.open_file(path, "rb").read() == b"complete\n"
    fileio.remove_tree(os.path.dirname(path))
