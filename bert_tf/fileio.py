"""The one module that reads, writes, lists or tests paths: local (the standard library) or a URL that tf.io.gfile knows
(gs://, ram://, ...; TensorFlow imported only for them). Rules:

1. A file is written under a temporary name beside it (`temp_path`) and renamed when complete (`atomic_write`).
2. A directory (`staged_directory`) is staged, then committed with its key file (saved_model.pb, a checkpoint's
   .index) removed first and moved in last: a reader that needs the key file sees the old version, none or the new.
3. A temporary untouched for STALE_AFTER_S is stale; `remove_stale_temporaries` removes those, and every
   `staged_directory` runs it first.
4. Clean-up removes only our temporaries (and a checkpoint directory's owner TensorFlow's) directly in the
   directory given; it reads no file and follows no link.
5. Inputs (`expand_patterns`) are files: never a directory, a temporary or a SHARDS_MANIFEST_SUFFIX file.
"""
import bz2
import contextlib
import fnmatch
import functools
import glob as glob_module
import gzip
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
_TEMPORARY = re.compile(r".+\.tmp-.+-[0-9a-f]{8}")  # the base names `temp_path` makes
STALE_AFTER_S = 24 * 3600
# TensorFlow's checkpoint temporaries: the sharded save's `ckpt-<N>_temp/`, the CheckpointManager state file's
# `checkpoint.tmp<hex>`, the tensor bundle writer's `*.tempstate<N>`.
TENSORFLOW_TEMPORARIES = ("ckpt-*_temp", "checkpoint.tmp*", "*.tempstate*")
SHARDS_MANIFEST_SUFFIX = ".shards.json"
COMPRESSED_SUFFIXES = (".bz2", ".gz")  # `open_file` decompresses and compresses files so named


def is_url(path):
    """True for paths that only tf.io.gfile can open (gs://, hdfs://, ram://, ...)."""
    return "://" in str(path)


def _gfile(path):
    """tf.io.gfile for the URL `path` (`_RamGFile` for TensorFlow's in-memory ram://)."""
    import tensorflow as tf
    return _RamGFile(tf.io.gfile) if path.startswith("ram://") else tf.io.gfile


class _RamGFile:
    """tf.io.gfile for ram:// (the tests' stand-in for gs://), made to answer as an object store: a path exists if its
    exact glob finds it, and listings mark directories with "/"."""

    def __init__(self, gfile):
        self._gfile = gfile

    def __getattr__(self, name):  # the rest as tf.io.gfile does it
        return getattr(self._gfile, name)

    def exists(self, path):
        return path.rstrip("/") in self._gfile.glob(path.rstrip("/"))

    def isdir(self, path):
        return self.exists(path) and self._gfile.isdir(path)

    def listdir(self, path):
        names = [name for name in self._gfile.listdir(path) if self.exists(os.path.join(path, name))]
        return [name + "/" if self._gfile.isdir(os.path.join(path, name)) else name for name in names]

    def rmtree(self, path):
        for name in self.listdir(path):
            (self.rmtree if name.endswith("/") else self._gfile.remove)(os.path.join(path, name.rstrip("/")))
        with contextlib.suppress(Exception):  # a directory only its files' names made has no entry of its own
            self._gfile.remove(path)


def exists(path):
    return _gfile(path).exists(path) if is_url(path) else os.path.exists(path)


def isdir(path):
    return _gfile(path).isdir(path) if is_url(path) else os.path.isdir(path)


def isfile(path):
    return exists(path) and not isdir(path)


def listdir(path):
    """The names in the directory `path`, sorted (subdirectories without gfile's trailing slash)."""
    return sorted(name.rstrip("/") for name in (_gfile(path).listdir(path) if is_url(path) else os.listdir(path)))


def walk_files(path):
    """The files under the directory `path`, as sorted paths relative to it ('/'-separated)."""
    found = []
    for name in listdir(path):
        below = os.path.join(path, name)
        found += [f"{name}/{n}" for n in walk_files(below)] if isdir(below) else [name]
    return sorted(found)


def glob(pattern):
    """The paths that match `pattern`, in the order the file system lists them (local: glob.glob's)."""
    return _gfile(pattern).glob(pattern) if is_url(pattern) else glob_module.glob(os.path.expanduser(pattern))


def stat(path):
    """(size in bytes, modification time in epoch seconds) of the file `path`: one request on a URL."""
    found = _gfile(path).stat(path) if is_url(path) else os.stat(path)
    return (found.length, found.mtime_nsec / 1e9) if is_url(path) else (found.st_size, found.st_mtime)


def mtime(path):
    """`stat`'s time of `path`; a directory's: the newest of its files' and its own."""
    if not isdir(path):
        return stat(path)[1]
    times = [mtime(os.path.join(path, name)) for name in walk_files(path)]
    return max(times + ([] if is_url(path) else [os.path.getmtime(path)]), default=0.0)


def expand_patterns(patterns):
    """Comma-separated names and globs (or a list) -> input files (rule 5) in the original's order. FileNotFoundError
    names every pattern matching none."""
    files, unmatched = [], []
    listing = functools.cache(lambda parent: set(_gfile(parent).listdir(parent)))  # a store lists a folder as "x/"

    def is_input(path):
        name = os.path.basename(path)
        if not name or _TEMPORARY.fullmatch(name) or name.endswith(SHARDS_MANIFEST_SUFFIX):
            return False
        return name in listing(os.path.dirname(path)) if is_url(path) else os.path.isfile(path)

    for pattern in [p.strip() for p in (patterns.split(",") if isinstance(patterns, str) else patterns) if p.strip()]:
        matches = [path for path in glob(pattern) if is_input(path)]
        files += matches
        unmatched += [] if matches else [pattern]
    if unmatched:
        raise FileNotFoundError(f"No file matches {', '.join(repr(p) for p in unmatched)}.")
    if not files:
        raise FileNotFoundError("No input files given.")
    return files


def open_file(path, mode="rb", name=None):
    """Opens `path` ("rb", "wb", "r", "w"), (de)compressed by the COMPRESSED_SUFFIXES `name` (default `path`) ends in;
    text is UTF-8, bad bytes replaced on reading. A store's write completes on close."""
    raw_mode = "rb" if "r" in mode else "wb"
    name = path if name is None else name
    f = open(path, raw_mode) if not is_url(path) else (
        io.BufferedReader if raw_mode == "rb" else io.BufferedWriter)(_GFileStream(path, raw_mode))
    if name.endswith(COMPRESSED_SUFFIXES):  # they close only a file they opened: closing them closes `file` too
        file, f = f, bz2.BZ2File(f, raw_mode) if name.endswith(".bz2") else gzip.GzipFile(fileobj=f, mode=raw_mode)
        closes = contextlib.ExitStack()  # runs last in, first out: `f.close`, then `file`'s, even if that raised
        closes.push(file)
        closes.callback(f.close)
        f.close = closes.close  # what `with`, TextIOWrapper and finalizers call
    if "b" in mode:
        return f
    return io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline="\n" if raw_mode == "wb" else None)


class _GFileStream(io.RawIOBase):
    """A tf.io.gfile.GFile as a raw binary stream for io, gzip and bz2."""

    def __init__(self, path, mode):
        super().__init__()
        self._file, self._mode = _gfile(path).GFile(path, mode), mode

    def readable(self):
        return self._mode == "rb"

    seekable = readable

    def writable(self):
        return self._mode == "wb"

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

    def tell(self):  # a BufferedWriter calls it first: that creates the file, so an empty one is written too
        return self._file.tell()

    def close(self):
        if not self.closed:
            self._file.close()  # a store's upload completes here
        super().close()


def read_bytes(path, what="Input file"):
    """The bytes of the file `path`; FileNotFoundError / IsADirectoryError naming `what` and `path`."""
    if not exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    if isdir(path):
        raise IsADirectoryError(f"{what} is a directory, not a file: {path}")
    with open_file(path, "rb", name="") as f:
        return f.read()


def read_text(path, what="Input file", encoding="utf-8"):
    """The text of the file `path`; ValueError naming the file and line of the first byte that is not UTF-8."""
    data = read_bytes(path, what)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start}); convert the file to UTF-8 "
                         "(e.g. iconv -f latin1 -t utf-8).") from None


def read_json(path, what="JSON file"):
    """The JSON value of the file `path` (a BOM allowed); errors name the file, line and column."""
    try:
        return json.loads(read_text(path, what, encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}:{e.colno}: malformed JSON in {what}: {e.msg}") from None


def makedirs(path):
    if is_url(path):
        _gfile(path).makedirs(path)
    elif path:
        os.makedirs(path, exist_ok=True)


def check_writable(paths):
    """Raises now, not after hours of work, if a local output's directory is missing or not writable, or the output is a
    directory (a URL is checked when written)."""
    for path in (p for p in paths if not is_url(p)):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"Output directory {directory!r} (for {path!r}) does not exist.")
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"Output directory {directory!r} (for {path!r}) is not writable.")
        if os.path.isdir(path):
            raise IsADirectoryError(f"Output file {path!r} is a directory.")


def absolute(path):
    return path if is_url(path) else os.path.abspath(path)


def replace(source, target):
    """Renames the file `source` to `target`, replacing it (on an object store: a copy, then a delete)."""
    if is_url(source) or is_url(target):
        _gfile(target).rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def remove_tree(path):
    """Removes the file or directory `path` (a link: the link, not what it points to)."""
    if is_url(path):
        (_gfile(path).rmtree if isdir(path) else _gfile(path).remove)(path)
    else:
        (shutil.rmtree if os.path.isdir(path) and not os.path.islink(path) else os.remove)(path)


def temp_path(path):
    """`<path>.tmp-<host>-<pid>-<8 hex>`, unique to this process and call (rule 1); nothing parses it."""
    return f"{path}{TEMP_MARK}{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def written_atomically(path):
    """Yields a temporary path to write `path` under (rule 1); removed if the block raises."""
    makedirs(os.path.dirname(path))
    tmp = temp_path(path)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(Exception):
            remove_tree(tmp)
        raise
    replace(tmp, path)


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Yields `path` opened for writing (`open_file`'s "w"/"wb") under rule 1."""
    with written_atomically(path) as tmp, open_file(tmp, mode, name=path) as f:
        yield f


def write_text_atomically(path, text):
    with atomic_write(path, "w") as f:
        f.write(text)


def write_bytes_atomically(path, data):
    """Writes `data` to `path` atomically, uncompressed whatever the name."""
    with written_atomically(path) as tmp, open_file(tmp, "wb", name="") as f:
        f.write(data)


def copy_file(source, target):
    """Copies the file `source` to `target` (local or URL either side), atomically."""
    with written_atomically(target) as tmp:
        if is_url(source) or is_url(tmp):
            _gfile(tmp).copy(source, tmp, overwrite=True)
        else:
            shutil.copyfile(source, tmp)


def copy_tree(source, target):
    """Copies every file under the directory `source` into `target` (created), keeping relative paths."""
    makedirs(target)
    for name in walk_files(source):
        copy_file(os.path.join(source, name), os.path.join(target, name))


@contextlib.contextmanager
def local_file(path, what="Input file"):
    """Yields a local path holding the file `path` (a URL's copy, removed afterwards)."""
    if not isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    if not is_url(path):
        yield path
        return
    with local_directory() as local:
        copy = os.path.join(local, os.path.basename(path))
        copy_file(path, copy)
        yield copy


def local_directory():
    return tempfile.TemporaryDirectory(prefix="bert_tf-", ignore_cleanup_errors=True)


@contextlib.contextmanager
def staged_directory(target, key, remove=".*", label=None):
    """Yields an empty staging directory for `target`'s new content, committed when the block completes (rule 2). Old
    files whose relative paths match `remove` go (".*": exactly the new content; another regex: top-level files
    only)."""
    target = target.rstrip("/")
    where = target if label else os.path.dirname(target)
    remove_stale_temporaries(where)
    staging = temp_path(os.path.join(where, "." + (label or os.path.basename(target))))
    makedirs(staging)
    try:
        yield staging
        new = walk_files(staging)
        if key not in new:
            raise FileNotFoundError(f"The new content of {target} lacks its key file {key}.")
        if not is_url(target) and not os.path.exists(target):
            os.replace(staging, target)  # a new local target: one rename
            return
        makedirs(target)
        if exists(os.path.join(target, key)):
            remove_tree(os.path.join(target, key))  # the old version stops being one first
        for name in [name for name in new if name != key]:
            makedirs(os.path.dirname(os.path.join(target, name)))
            replace(os.path.join(staging, name), os.path.join(target, name))
        old = walk_files(target) if remove == ".*" else [n for n in listdir(target) if isfile(os.path.join(target, n))]
        for name in old:
            if name not in new and TEMP_MARK not in name and re.fullmatch(remove, name):
                remove_tree(os.path.join(target, name))
        for root, _, _ in os.walk(target, topdown=False) if not is_url(target) else ():  # the old ones' directories
            if root != target and TEMP_MARK not in root:
                with contextlib.suppress(OSError):  # not empty
                    os.rmdir(root)
        replace(os.path.join(staging, key), os.path.join(target, key))
    except BaseException:
        with contextlib.suppress(Exception):
            remove_tree(staging)
        raise
    remove_tree(staging)


def remove_stale_temporaries(directory, checkpoints=False):
    """Removes and returns the stale temporaries directly in `directory` (rules 3, 4); with `checkpoints` also
    TENSORFLOW_TEMPORARIES, whatever their age."""
    removed = []
    for name in listdir(directory) if isdir(directory) else []:
        path = os.path.join(directory, name)
        tensorflows = checkpoints and any(fnmatch.fnmatchcase(name, p) for p in TENSORFLOW_TEMPORARIES)
        if not (tensorflows or _TEMPORARY.fullmatch(name)):
            continue
        try:
            if not tensorflows and time.time() - mtime(path) < STALE_AFTER_S:
                logging.info("Leaving %s: it may belong to a running writer (removed once untouched for %d h)",
                             path, STALE_AFTER_S // 3600)
                continue
            remove_tree(path)
            logging.info("Removed %s (left by a killed run)", path)
            removed.append(path)
        except Exception:  # pylint: disable=broad-except
            if exists(path):
                raise  # else another clean-up removed it meanwhile
    return removed
