"""File plumbing shared by every module that writes or reads files; TensorFlow-free (tf.io.gfile is imported only
for URLs such as gs://).

* `written_atomically(path)` / `atomic_write(path)`: context managers that write to `temp_path(path)` and rename it to
  `path` only when the block completes; on an error the temporary is removed and `path` is untouched. So a killed
  run leaves at most such temporaries, which `remove_stale_temporaries` finds by name.
* Temporary names are unique to the process and the call: `<path>.tmp-<host>-<pid>-<8 hex>` (`temp_path`,
  `temp_dir`), so that processes writing beside each other (the workers of a run, two exports) never share one, and
  the cleanup leaves alone the temporaries of a process still running on this host.
* `replace_directory(source, target)`: a directory replaced by another in two renames; a run killed between them
  leaves the old one under a temporary name, which `remove_stale_temporaries` puts back.
* `open_file(path, mode)`: local or gfile paths, `.gz` / `.bz2` (de)compressed by the name, text as UTF-8.
* `expand_patterns(patterns)`: comma-separated names and globs -> files, in one documented order (the original's).
"""
import bz2
import contextlib
import glob
import gzip
import io
import os
import re
import secrets
import shutil
import socket

from absl import logging

TEMP_MARK = ".tmp-"
# Our temporaries (`temp_path`, `temp_dir`, `replace_directory`'s backups): <name>.tmp-<host>-<pid>-<token>.
_TEMP_NAME = re.compile(r"^(?P<name>.*)\.tmp-(?P<host>.+)-(?P<pid>\d+)-(?P<token>[0-9a-f]{8})$")
BACKUP_MARK = ".old"
# A staging directory holding this file is committed: its writer's module completes it (`remove_stale_temporaries`
# leaves it alone).
COMMIT_MANIFEST = "manifest.json"
# What a killed run can leave in a directory: our temporaries (hidden ones too) and TensorFlow's (the sharded
# checkpoint save's `ckpt-<N>_temp/` directory, the CheckpointManager state file's `checkpoint.tmp<hex>`, the tensor
# bundle writer's `*.tempstate<N>`), which a worker writes only into its own checkpoint directory.
OUR_PATTERNS = ("*" + TEMP_MARK + "*", ".*" + TEMP_MARK + "*")
TENSORFLOW_PATTERNS = ("ckpt-*_temp", "checkpoint.tmp*", "*.tempstate*")


def is_url(path):
    """True for paths that only tf.io.gfile can open (gs://, hdfs://, ...)."""
    return "://" in str(path)


def temp_path(path):
    """A temporary name for `path`, unique to this process and call: `<path>.tmp-<host>-<pid>-<8 hex>`."""
    return f"{path}{TEMP_MARK}{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def temp_dir(parent, label):
    """Creates and returns a new hidden directory `parent/.<label>.tmp-<host>-<pid>-<8 hex>` (local paths), for
    staging what is then renamed into place."""
    os.makedirs(parent, exist_ok=True)
    path = temp_path(os.path.join(parent, "." + label))
    os.mkdir(path)
    return path


def temporary_writer(path):
    """(host, pid) of the process that made the temporary `path` (`temp_path`), or None for other names."""
    match = _TEMP_NAME.match(os.path.basename(path.rstrip("/")))
    return (match["host"], int(match["pid"])) if match else None


def _writer_is_running(writer):
    """Whether `writer` (host, pid) is a process running on this host (one of another host counts as ended: a
    directory has one writer at a time, whose earlier incarnations may have run elsewhere)."""
    host, pid = writer
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def replace_directory(source, target):
    """Renames the directory `source` to `target` (local paths), replacing `target` if it exists: the old one is
    renamed to a temporary backup first and removed after. A run killed between the two renames leaves `target`
    missing and the backup, which `remove_stale_temporaries(parent)` renames back to `target`."""
    if not os.path.exists(target):
        os.replace(source, target)
        return
    backup = temp_path(target + BACKUP_MARK)
    os.replace(target, backup)
    os.replace(source, target)
    remove_tree(backup)


def remove_tree(path):
    """Removes the file or directory `path` (local or URL)."""
    if is_url(path):
        import tensorflow as tf
        (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def replace(source, target):
    """Renames `source` to `target`, replacing it (local paths and URLs alike)."""
    if is_url(target):
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def remove_quietly(path):
    """Removes `path` (a local path or a URL); ignores any failure (cleanup of temporary files)."""
    try:
        if is_url(path):
            import tensorflow as tf
            tf.io.gfile.remove(path)
        else:
            os.remove(path)
    except Exception:  # pylint: disable=broad-except
        pass


def exists(path):
    """Whether `path` (a local path or a URL) exists."""
    if is_url(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def read_text(path, what="Input file", encoding="utf-8"):
    """The text of the file `path` (local or URL). FileNotFoundError "<what> not found: <path>" if it is missing;
    ValueError naming the file and line of the first byte that is not valid UTF-8 ("utf-8-sig": a BOM is dropped)."""
    if not exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 ({e.reason}).") from None


def open_file(path, mode="rb", name=None):
    """Opens a local or gfile path for reading or writing ("rb", "wb", "r", "w").

    `.bz2` and `.gz` are decompressed or compressed as `name` (default: `path`) ends (a multi-stream .bz2 dump
    included); text modes are UTF-8 (undecodable bytes replaced on reading).
    """
    binary = "b" in mode
    raw_mode = "rb" if "r" in mode else "wb"
    name = name or path
    if is_url(path):
        import tensorflow as tf
        if name.endswith((".bz2", ".gz")) and raw_mode == "wb":
            raise ValueError(f"Writing a compressed file to {path!r} is not supported; write it uncompressed.")
        f = tf.io.gfile.GFile(path, raw_mode)
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


@contextlib.contextmanager
def written_atomically(path):
    """Yields the temporary path to write `path` under (for writers that take a path, e.g. tf.io.TFRecordWriter);
    renames it to `path` when the block completes, removes it when the block raises (local paths and URLs)."""
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
    if not is_url(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with written_atomically(path) as tmp, open_file(tmp, mode, name=path) as f:
        yield f


def write_text_atomically(path, text):
    """Writes `text` (UTF-8) to `path` through `atomic_write`."""
    with atomic_write(path, "w") as f:
        f.write(text)


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
        if is_url(pattern):
            import tensorflow as tf
            matches = tf.io.gfile.glob(pattern)
        else:
            matches = [p for p in glob.glob(os.path.expanduser(pattern)) if os.path.isfile(p)]
        if not matches:
            unmatched.append(pattern)
        files.extend(matches)
    if unmatched:
        raise FileNotFoundError(f"No file matches {', '.join(repr(p) for p in unmatched)}.")
    if not files:
        raise FileNotFoundError("No input files given.")
    return files


def stale_temporaries(directory):
    """The temporaries in `directory` (not recursing) that no running process writes: ours whose writer is not a
    process running on this host (`temporary_writer`), and TensorFlow's checkpoint temporaries. Sorted."""
    import tensorflow as tf

    def glob(patterns):
        return {path for pattern in patterns for path in tf.io.gfile.glob(os.path.join(directory, pattern))}

    ours = {path for path in glob(OUR_PATTERNS) if temporary_writer(path) and
            not _writer_is_running(temporary_writer(path))}
    return sorted(ours | glob(TENSORFLOW_PATTERNS))


def remove_stale_temporaries(directory):
    """Cleans up after a killed run in `directory`: removes its `stale_temporaries`, except a backup of
    `replace_directory` whose target is missing, which is renamed back to its target, and a staging directory with
    a COMMIT_MANIFEST, which is left for its writer to complete. Returns the paths removed and restored, sorted
    (each logged)."""
    handled = []
    for path in stale_temporaries(directory):
        if not is_url(path) and os.path.isfile(os.path.join(path, COMMIT_MANIFEST)):
            logging.warning("Leaving %s: a replacement killed after its commit point, which the next write into %s "
                            "completes (bert_tf.checkpoints.original.recover)", path, directory)
            continue
        original = _TEMP_NAME.match(os.path.basename(path))
        target = original and original["name"].endswith(BACKUP_MARK) and os.path.join(
            directory, original["name"][:-len(BACKUP_MARK)])
        if target and not exists(target):
            replace(path, target)
            logging.info("Restored %s from %s (a replacement killed half-way)", target, path)
        else:
            remove_tree(path)
            logging.info("Removed %s (left by a killed run)", path)
        handled.append(path)
    return handled


FINGERPRINT_WHOLE_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones by three samples
_FINGERPRINT_SAMPLE = 1 << 20


def file_size(path):
    """The size in bytes of the file `path` (local or URL)."""
    if is_url(path):
        import tensorflow as tf
        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def fingerprint(paths):
    """A SHA-256 hex digest of the files `paths` (local or URLs), in order: each one's size and content. Files over
    64 MiB (pretraining shards) are hashed by their first, middle and last MiB, so that fingerprinting a corpus
    stays quick; it then tells data apart by size and those samples."""
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        size = file_size(path)
        digest.update(f"{size}\n".encode())
        whole = size <= FINGERPRINT_WHOLE_BYTES
        samples = [(0, size)] if whole else [(offset, _FINGERPRINT_SAMPLE) for offset in
                                             (0, (size - _FINGERPRINT_SAMPLE) // 2, size - _FINGERPRINT_SAMPLE)]
        with open_file(path, "rb", name="") as f:
            for offset, length in samples:
                f.seek(offset)
                while length > 0:
                    chunk = f.read(min(length, _FINGERPRINT_SAMPLE))
                    if not chunk:
                        break
                    digest.update(chunk)
                    length -= len(chunk)
    return digest.hexdigest()
