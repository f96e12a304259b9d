"""The one module that touches files: every path may be local or a URL that tf.io.gfile knows (gs://, hdfs://,
TensorFlow's in-memory ram://, any registered scheme). Local paths go through the standard library, URLs through
tf.io.gfile, imported only for them, so that this module (and the pure-Python modules on it) runs without TensorFlow.
Path arithmetic (`os.path.join`, `dirname`, `basename`) is plain string work and fine on URLs; every call that reads,
writes, lists or tests a path is here.

* Queries: `exists`, `isdir`, `isfile`, `listdir`, `walk_files`, `glob`, `file_size`, `mtime`; `expand_patterns`
  (comma-separated names and globs -> files, the original's order).
* Reading: `open_file` (`.gz` / `.bz2` by the name, text as UTF-8), `read_bytes`, `read_text`, `read_json` (errors
  name the file, and the line of a bad byte or of malformed JSON).
* Writing one file: `atomic_write`, `written_atomically`, `write_text_atomically`, `write_bytes_atomically`,
  `copy_file`: written under `temp_path(path)` and renamed to `path` when complete (one object on a store: its
  rename is a copy, which appears whole), the temporary removed on an error.
* Writing a directory: `staged_directory(target, key)` yields a staging directory beside `target`; when the block
  completes it commits (below). `local_directory()`: a local scratch directory for tools that need a local disk
  (LiteRT's converter, tf2onnx), copied out with `copy_tree`.
* Temporaries: `<path>.tmp-<host>-<pid>-<start>-<8 hex>` (`temp_path`, `temp_dir`), naming the writer by host,
  process id and process start (the kernel's boot id and the process's start tick on Linux), so that processes
  writing beside each other never share one, and `remove_stale_temporaries` judges whether the writer still runs
  (`writer_is_running`).

Committing a directory (`staged_directory`). On an object store (gs://) a directory rename copies every object, so
a directory is never replaced by a rename there. The new content is written into a staging directory beside the
target; a manifest naming its files is written into the staging directory (one atomic write: the commit point);
then the target's `key` file (a SavedModel's saved_model.pb, a checkpoint's .index) is removed, the other files are
moved in, the target's files the manifest does not name and `remove` matches are removed (the old version's), and
the key file is moved in last. A reader that takes a target only with its key file (as TF Serving and
`tf.train.load_checkpoint` do) never takes a mix of old and new. A writer killed before the manifest leaves the
target untouched and a staging directory that the next write into the same directory removes; one killed after it
is rolled forward by that next write (`remove_stale_temporaries`): the commit is idempotent. A staging directory
whose target has since been committed again (its key file newer than the manifest) is removed, not rolled forward.
On a local disk a target that does not exist yet is the staging content renamed (one rename).
"""
import bz2
import contextlib
import glob as glob_module
import gzip
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
import time

from absl import logging

TEMP_MARK = ".tmp-"
# Our temporaries (`temp_path`, `temp_dir`): <name>.tmp-<host>-<pid>-<start>-<token> (earlier versions wrote
# <name>.tmp-<host>-<pid>-<token>: a writer of unknown start).
_TEMP_NAME = re.compile(r"^(?P<name>.*)\.tmp-(?P<host>.+?)-(?P<pid>\d+)(?:-(?P<start>[0-9a-f]+\.\d+|0))?-"
                        r"(?P<token>[0-9a-f]{8})$")
# A staging directory holding this file is committed (`staged_directory`).
COMMIT_MANIFEST = "manifest.json"
_CONTENT = "content"  # the staging directory's subdirectory that becomes the target
# What a killed run can leave in a directory: our temporaries (hidden ones too), and TensorFlow's (the sharded
# checkpoint save's `ckpt-<N>_temp/` directory, the CheckpointManager state file's `checkpoint.tmp<hex>`, the tensor
# bundle writer's `*.tempstate<N>`), which only the run that owns the checkpoint directory removes.
OUR_PATTERNS = ("*" + TEMP_MARK + "*", ".*" + TEMP_MARK + "*")
TENSORFLOW_PATTERNS = ("ckpt-*_temp", "checkpoint.tmp*", "*.tempstate*")
# A temporary of another host counts as its writer's until it has been left alone this long (no process of another
# host can be asked whether it runs): then it is stale.
FOREIGN_TEMPORARY_AGE_S = 24 * 3600


def is_url(path):
    """True for paths that only tf.io.gfile can open (gs://, hdfs://, ram://, ...)."""
    return "://" in str(path)


def _gfile():
    import tensorflow as tf
    return tf.io.gfile


# --- queries -------------------------------------------------------------------------------------------------

def exists(path):
    """Whether `path` (a local path or a URL) exists."""
    if _is_ram(path):
        return _ram_exists(path)
    return _gfile().exists(path) if is_url(path) else os.path.exists(path)


def isdir(path):
    if _is_ram(path) and not _ram_exists(path):
        return False
    return _gfile().isdir(path) if is_url(path) else os.path.isdir(path)


# TensorFlow's in-memory ram:// file system (the tests' stand-in for gs://) matches names as prefixes: any prefix of
# a file's path "exists" as a directory (`x/bert_model.ckpt` beside `x/bert_model.ckpt.index`), and `x/a` lists `x/a.b`
# as `.b`. Here it answers as an object store does: a path exists if its parent lists it.
def _is_ram(path):
    return str(path).startswith("ram://")


def _ram_exists(path):
    parent, name = os.path.split(path.rstrip("/"))
    if "/" not in path[len("ram://"):].rstrip("/"):  # ram://<name>: nothing lists it
        return _gfile().exists(path)
    return _gfile().isdir(parent) and name in listdir(parent)


def isfile(path):
    """Whether `path` exists and is not a directory."""
    return exists(path) and not isdir(path)


def listdir(path):
    """The names in the directory `path`, sorted (subdirectories without gfile's trailing slash)."""
    if not is_url(path):
        return sorted(os.listdir(path))
    names = sorted(name.rstrip("/") for name in _gfile().listdir(path))
    if _is_ram(path):  # drop what ram:// lists by prefix (see `_ram_exists`)
        names = [name for name in names if _gfile().exists(os.path.join(path, name))]
    return names


def walk_files(path):
    """The files under the directory `path`, as sorted paths relative to it ('/'-separated)."""
    found = []
    for name in listdir(path):
        if isdir(os.path.join(path, name)):
            found += [f"{name}/{below}" for below in walk_files(os.path.join(path, name))]
        else:
            found.append(name)
    return sorted(found)


def glob(pattern):
    """The paths that match `pattern`, in the order the file system lists them (local: glob.glob's)."""
    return _gfile().glob(pattern) if is_url(pattern) else glob_module.glob(os.path.expanduser(pattern))


def file_size(path):
    """The size in bytes of the file `path`."""
    return _gfile().stat(path).length if is_url(path) else os.path.getsize(path)


def mtime(path):
    """The modification time of `path` in seconds since the epoch (for a directory: the newest of its files and
    its own; object stores keep no time for a directory)."""
    if not isdir(path):
        return _gfile().stat(path).mtime_nsec / 1e9 if is_url(path) else os.path.getmtime(path)
    times = [mtime(os.path.join(path, name)) for name in walk_files(path)]
    return max(times + ([] if is_url(path) else [os.path.getmtime(path)]), default=0.0)


def expand_patterns(patterns):
    """Comma-separated file names and globs (or a list of them) -> the files they name.

    The order is the original BERT scripts' (`tf.io.gfile.glob`): patterns in the order given, the matches of each
    in the order the file system lists them (directory order, not sorted); that order decides e.g. the document
    order of create_pretraining_data. Directories are left out. Raises FileNotFoundError naming every pattern
    that matches nothing.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files, unmatched = [], []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matches = [p for p in glob(pattern) if is_url(p) or os.path.isfile(p)]  # a store lists objects
        if not matches:
            unmatched.append(pattern)
        files.extend(matches)
    if unmatched:
        raise FileNotFoundError(f"No file matches {', '.join(repr(p) for p in unmatched)}.")
    if not files:
        raise FileNotFoundError("No input files given.")
    return files


# --- reading -------------------------------------------------------------------------------------------------

def open_file(path, mode="rb", name=None):
    """Opens a local or gfile path for reading or writing ("rb", "wb", "r", "w").

    `.bz2` and `.gz` are decompressed or compressed as `name` (default: `path`) ends (a multi-stream .bz2 dump
    included); text modes are UTF-8 (undecodable bytes replaced on reading).
    """
    binary = "b" in mode
    raw_mode = "rb" if "r" in mode else "wb"
    name = path if name is None else name
    if is_url(path):
        raw = _GFileStream(path, raw_mode)
        f = io.BufferedReader(raw) if raw_mode == "rb" else io.BufferedWriter(raw)
        if name.endswith(".bz2"):
            f = bz2.BZ2File(f, raw_mode)
        elif name.endswith(".gz"):
            f = gzip.GzipFile(fileobj=f, mode=raw_mode)
    elif name.endswith(".bz2"):
        f = bz2.open(path, raw_mode)
    elif name.endswith(".gz"):
        f = gzip.open(path, raw_mode)
    else:
        f = open(path, raw_mode)
    if binary:
        return f
    return io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline="\n" if raw_mode == "wb" else None)


class _GFileStream(io.RawIOBase):
    """A tf.io.gfile.GFile as a raw binary stream, which io's buffers and text wrapper, gzip and bz2 take."""

    def __init__(self, path, mode):
        super().__init__()
        self._file, self._mode = _gfile().GFile(path, mode), mode

    def readable(self):
        return self._mode == "rb"

    def writable(self):
        return self._mode == "wb"

    def seekable(self):
        return self._mode == "rb"

    def readinto(self, buffer):
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def write(self, data):
        self._file.write(bytes(data))
        return len(data)

    def seek(self, offset, whence=io.SEEK_SET):
        self._file.seek(offset, whence)
        return self._file.tell()

    def tell(self):
        return self._file.tell()

    def close(self):
        if not self.closed:
            self._file.close()  # a store's upload completes here
        super().close()


def read_bytes(path, what="Input file"):
    """The bytes of the file `path`. FileNotFoundError "<what> not found: <path>" if it is missing,
    IsADirectoryError if it is a directory."""
    if not exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    if isdir(path):
        raise IsADirectoryError(f"{what} is a directory, not a file: {path}")
    with open_file(path, "rb", name="") as f:
        return f.read()


def read_text(path, what="Input file", encoding="utf-8"):
    """The text of the file `path` (`read_bytes`); ValueError naming the file and line of the first byte that is
    not valid UTF-8 ("utf-8-sig": a BOM is dropped)."""
    data = read_bytes(path, what)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 ({e.reason}).") from None


def read_json(path, what="JSON file"):
    """The JSON value of the file `path` (UTF-8, a BOM allowed); errors name the file, and the line and column of
    malformed JSON."""
    text = read_text(path, what, encoding="utf-8-sig")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}:{e.colno}: malformed JSON in {what}: {e.msg}") from None


# --- writing one file ----------------------------------------------------------------------------------------

def makedirs(path):
    """Creates the directory `path` and its parents if they are missing."""
    if is_url(path):
        _gfile().makedirs(path)
    elif path:
        os.makedirs(path, exist_ok=True)


def check_writable(paths):
    """Raises a clear error now (not after hours of work) if a local output's directory is missing or not
    writable, or the output is a directory. (A URL's store is asked only when it is written.)"""
    for path in paths:
        if is_url(path):
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"Output directory {directory!r} (for {path!r}) does not exist.")
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"Output directory {directory!r} (for {path!r}) is not writable.")
        if os.path.isdir(path):
            raise IsADirectoryError(f"Output file {path!r} is a directory.")


def absolute(path):
    """`path` made absolute against the working directory (a URL as it is)."""
    return path if is_url(path) else os.path.abspath(path)


def replace(source, target):
    """Renames the file `source` to `target`, replacing it (on an object store: a copy, then a delete)."""
    if is_url(source) or is_url(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def remove_tree(path):
    """Removes the file or directory `path`."""
    if _is_ram(path) and isdir(path):  # its recursive delete trips on its prefix listing (see `_ram_exists`)
        for name in listdir(path):
            remove_tree(os.path.join(path, name))
        with contextlib.suppress(Exception):  # a directory only its files' names made has no entry of its own
            _gfile().remove(path)
    elif is_url(path):
        (_gfile().rmtree if _gfile().isdir(path) else _gfile().remove)(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def remove_quietly(path):
    """Removes the file or directory `path`; ignores any failure (cleanup of temporaries)."""
    try:
        remove_tree(path)
    except Exception:  # pylint: disable=broad-except
        pass


@contextlib.contextmanager
def written_atomically(path):
    """Yields the temporary path to write `path` under (for writers that take a path, e.g. tf.io.TFRecordWriter);
    renames it to `path` when the block completes, removes it when the block raises. Creates the parent
    directory."""
    makedirs(os.path.dirname(path))
    tmp = temp_path(path)
    try:
        yield tmp
    except BaseException:
        remove_quietly(tmp)
        raise
    replace(tmp, path)


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Yields a file opened for writing (`open_file` modes "w"/"wb", compressed as `path` ends) under
    `temp_path(path)`, renamed to `path` when the block completes (see `written_atomically`)."""
    with written_atomically(path) as tmp, open_file(tmp, mode, name=path) as f:
        yield f


def write_text_atomically(path, text):
    """Writes `text` (UTF-8) to `path` through `atomic_write`."""
    with atomic_write(path, "w") as f:
        f.write(text)


def write_bytes_atomically(path, data):
    """Writes `data` to `path` through `atomic_write` (uncompressed, whatever the name)."""
    with written_atomically(path) as tmp, open_file(tmp, "wb", name="") as f:
        f.write(data)


def copy_file(source, target):
    """Copies the file `source` to `target` (local or URL either side), atomically."""
    with written_atomically(target) as tmp:
        if is_url(source) or is_url(tmp):
            _gfile().copy(source, tmp, overwrite=True)
        else:
            shutil.copyfile(source, tmp)


def copy_tree(source, target):
    """Copies every file under the directory `source` into `target` (created), keeping relative paths."""
    makedirs(target)
    for name in walk_files(source):
        copy_file(os.path.join(source, name), os.path.join(target, name))


@contextlib.contextmanager
def local_file(path, what="Input file"):
    """Yields a local path holding the file `path`: itself, or for a URL a local copy removed after the block (for
    libraries that read only local files). FileNotFoundError "<what> not found: <path>" if it is missing."""
    if not isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    if not is_url(path):
        yield path
        return
    with local_directory() as local:
        copy = os.path.join(local, os.path.basename(path))
        copy_file(path, copy)
        yield copy


@contextlib.contextmanager
def local_directory():
    """A new local scratch directory, removed when the block ends (for tools that write only local files)."""
    path = tempfile.mkdtemp(prefix="bert_tf-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- temporaries and their writers ---------------------------------------------------------------------------

def _boot_id():
    """The first 8 hex digits of the kernel's boot id (Linux), else None."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip().replace("-", "")[:8]
    except OSError:
        return None


def _start_tick(pid):
    """When process `pid` started, in clock ticks since boot (Linux's /proc/<pid>/stat field 22), else None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _process_start(pid):
    """`<boot id>.<start tick>` of process `pid` on this host, or "0" where the system does not tell."""
    boot, tick = _boot_id(), _start_tick(pid)
    return f"{boot}.{tick}" if boot and tick is not None else "0"


def temp_path(path):
    """A temporary name for `path`, unique to this process and call: `<path>.tmp-<host>-<pid>-<start>-<8 hex>`."""
    return f"{path}{TEMP_MARK}{socket.gethostname()}-{os.getpid()}-{_process_start(os.getpid())}-" \
           f"{secrets.token_hex(4)}"


def temp_dir(parent, label):
    """Creates and returns a new hidden directory `parent/.<label>.tmp-...` (`temp_path`)."""
    makedirs(parent)
    path = temp_path(os.path.join(parent, "." + label))
    makedirs(path)
    return path


def temporary_writer(path):
    """(host, pid, start) of the process that made the temporary `path` (`temp_path`), or None for other names."""
    match = _TEMP_NAME.match(os.path.basename(path.rstrip("/")))
    return (match["host"], int(match["pid"]), match["start"] or "0") if match else None


def writer_is_running(path):
    """Whether the writer of the temporary `path` may still be writing it. On this host: its process exists and
    started when the name says (a restarted container keeps its host name and often reuses process ids; a new
    boot ends every writer). Of another host, which cannot be asked: until the temporary has been left alone for
    FOREIGN_TEMPORARY_AGE_S."""
    host, pid, start = temporary_writer(path)
    if host != socket.gethostname():
        return time.time() - mtime(path) < FOREIGN_TEMPORARY_AGE_S
    if start != "0" and start.split(".")[0] != _boot_id():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return start == "0" or _process_start(pid) in ("0", start)


def stale_temporaries(directory, checkpoints=False):
    """The temporaries in `directory` (not recursing) whose writer has ended (`writer_is_running`); with
    `checkpoints` (only the run that owns this checkpoint directory passes it) also TensorFlow's checkpoint
    temporaries there. Sorted."""
    def matching(patterns):
        return {path.rstrip("/") for pattern in patterns for path in glob(os.path.join(directory, pattern))}

    ours = {path for path in matching(OUR_PATTERNS) if temporary_writer(path) and not writer_is_running(path)}
    return sorted(ours | (matching(TENSORFLOW_PATTERNS) if checkpoints else set()))


def remove_stale_temporaries(directory, checkpoints=False):
    """Cleans up after killed writers in `directory`: rolls forward each stale staging directory whose commit
    manifest was written (oldest first; one whose target was committed again since is removed instead: see the
    module docstring), and removes the other `stale_temporaries`. Returns the paths handled, sorted (each logged)."""
    if not isdir(directory):
        return []
    stale = stale_temporaries(directory, checkpoints)
    committed = [path for path in stale if isfile(os.path.join(path, COMMIT_MANIFEST))]
    for staging in sorted(committed, key=lambda path: mtime(os.path.join(path, COMMIT_MANIFEST))):
        if _superseded(staging):
            logging.info("Removing %s: a replacement killed after its commit point, committed again since", staging)
            remove_tree(staging)
        else:
            logging.info("Completing the replacement %s left by a killed writer", staging)
            _commit(staging)
    for path in stale:
        if path not in committed:
            remove_tree(path)
            logging.info("Removed %s (left by a killed run)", path)
    return stale


# --- committing a directory ----------------------------------------------------------------------------------

@contextlib.contextmanager
def staged_directory(target, key, remove=".*", label=None):
    """Yields a new, empty staging directory to write the new content of the directory `target` into; when the
    block completes, that content replaces `target`'s (module docstring: the manifest, then the moves, `key` last).

    Args:
      target: the directory the content goes to. The staging directory is made beside it (in its parent), or
        inside it when `label` is given (a directory that holds other files, such as a release's).
      key: the content's file (relative path) that is moved last: a reader takes `target` only with it.
      remove: a regular expression of the relative paths of `target`'s files that are removed when the new
        content lacks them (".*": `target` becomes exactly the new content; a release's old shards otherwise).
    Stale temporaries of the staging directory's parent are cleaned up first (`remove_stale_temporaries`).
    Nothing is committed if the block raises; the staging directory is then removed.
    """
    where = target if label else os.path.dirname(target.rstrip("/"))
    remove_stale_temporaries(where)
    staging = temp_dir(where, label or os.path.basename(target.rstrip("/")))
    content = os.path.join(staging, _CONTENT)
    makedirs(content)
    try:
        yield content
        files = walk_files(content)
        if key not in files:
            raise FileNotFoundError(f"The new content of {target} lacks its key file {key}.")
        write_text_atomically(os.path.join(staging, COMMIT_MANIFEST), json.dumps(
            {"target": "." if label else os.path.basename(target.rstrip("/")), "key": key, "files": files,
             "remove": remove}))
    except BaseException:
        remove_quietly(staging)
        raise
    _commit(staging)  # a failure from here on is completed by the next writer's cleanup


def _manifest_target(staging, manifest):
    where = os.path.dirname(staging.rstrip("/"))
    return where if manifest["target"] == "." else os.path.join(where, manifest["target"])


def _superseded(staging):
    """Whether the target of the committed `staging` has been committed again since (its key file is newer than
    the manifest)."""
    manifest_path = os.path.join(staging, COMMIT_MANIFEST)
    manifest = read_json(manifest_path, "commit manifest")
    key = os.path.join(_manifest_target(staging, manifest), manifest["key"])
    return not exists(os.path.join(staging, _CONTENT, manifest["key"])) or (
        exists(key) and mtime(key) > mtime(manifest_path))


def _commit(staging):
    """Moves the content of the committed `staging` into its target (module docstring), then removes `staging`.
    Idempotent: a commit killed half-way is completed by running it again."""
    manifest = read_json(os.path.join(staging, COMMIT_MANIFEST), "commit manifest")
    target, key, content = _manifest_target(staging, manifest), manifest["key"], os.path.join(staging, _CONTENT)
    if not is_url(target) and not os.path.exists(target):
        os.replace(content, target)  # a new local target: one rename
    makedirs(target)
    if exists(os.path.join(content, key)):  # not committed yet: the old version stops being one first
        remove_quietly(os.path.join(target, key))
    new = set(manifest["files"])
    for name in manifest["files"]:
        if name != key and exists(os.path.join(content, name)):
            makedirs(os.path.dirname(os.path.join(target, name)))
            replace(os.path.join(content, name), os.path.join(target, name))
    old = walk_files(target) if manifest["remove"] == ".*" else [n for n in listdir(target)
                                                                 if isfile(os.path.join(target, n))]
    for name in old:
        if name not in new and TEMP_MARK not in name and re.fullmatch(manifest["remove"], name):
            remove_tree(os.path.join(target, name))
    if not is_url(target):
        _remove_empty_directories(target)
    if exists(os.path.join(content, key)):
        replace(os.path.join(content, key), os.path.join(target, key))
    remove_tree(staging)


def _remove_empty_directories(directory):
    """Removes the empty directories under the local `directory` (an old version's that the new one lacks)."""
    for root, _, _ in os.walk(directory, topdown=False):
        if root != directory and TEMP_MARK not in root:
            with contextlib.suppress(OSError):  # not empty
                os.rmdir(root)


# --- fingerprints --------------------------------------------------------------------------------------------

FINGERPRINT_SAMPLE_BYTES = 64 << 10  # a local file is hashed by its size and its first, middle and last this many bytes


def fingerprint(paths):
    """A SHA-256 hex digest of the files `paths` (local or URLs), in order. A local file counts by its size and its
    first, middle and last FINGERPRINT_SAMPLE_BYTES (the whole file when it is smaller than three samples): it tells
    training data apart (another size, or other first, middle or last records) while a corpus of 1,000 shards costs
    1,000 small reads, at most 192 KiB of each file. A URL's file counts by its size and modification time, from its
    metadata: on gs:// TensorFlow reads a file in blocks of 64 MiB (GCS_READ_CACHE_BLOCK_SIZE_MB), so a sample
    would fetch a whole shard; a start then reads nothing of the data (a copy of it counts as other data)."""
    digest = hashlib.sha256()
    sample = FINGERPRINT_SAMPLE_BYTES
    for path in paths:
        if is_url(path):
            stat = _gfile().stat(path)
            digest.update(f"{stat.length} {stat.mtime_nsec}\n".encode())
            continue
        size = file_size(path)
        digest.update(f"{size}\n".encode())
        offsets = [(0, size)] if size <= 3 * sample else [(0, sample), ((size - sample) // 2, sample),
                                                          (size - sample, sample)]
        with open_file(path, "rb", name="") as f:
            for offset, length in offsets:
                f.seek(offset)
                digest.update(f.read(length))
    return digest.hexdigest()
