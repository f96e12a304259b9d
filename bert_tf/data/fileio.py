"""File plumbing shared by every module that writes or reads files; TensorFlow-free (tf.io.gfile is imported only
for URLs such as gs://).

* `written_atomically(path)` / `atomic_write(path)`: context managers that write to `temp_path(path)` and rename it to
  `path` only when the block completes; on an error the temporary is removed and `path` is untouched. So a killed
  run leaves at most such temporaries, which `remove_stale_temporaries` finds by name.
* `open_file(path, mode)`: local or gfile paths, `.gz` / `.bz2` (de)compressed by the name, text as UTF-8.
* `expand_patterns(patterns)`: comma-separated names and globs -> files, in one documented order (the original's).
"""
import bz2
import contextlib
import glob
import gzip
import io
import os

TEMP_SUFFIX = ".tmp"
# What a killed run can leave in output_dir: our temporaries and TensorFlow's (the sharded checkpoint save's
# `ckpt-<N>_temp/` directory, the CheckpointManager state file's `checkpoint.tmp<hex>`, the tensor bundle writer's
# `*.tempstate<N>`).
STALE_PATTERNS = ("*" + TEMP_SUFFIX, "ckpt-*_temp", "checkpoint" + TEMP_SUFFIX + "*", "*.tempstate*")


def is_url(path):
    """True for paths that only tf.io.gfile can open (gs://, hdfs://, ...)."""
    return "://" in str(path)


def temp_path(path):
    """The temporary name `path` is written under before it is renamed to `path`: `<path>.tmp`."""
    return path + TEMP_SUFFIX


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


def remove_stale_temporaries(directory):
    """Removes the temporaries a killed run left in `directory` (files and directories matching STALE_PATTERNS, not
    recursing). Returns the paths removed, sorted."""
    import tensorflow as tf

    stale = sorted({path for pattern in STALE_PATTERNS for path in tf.io.gfile.glob(os.path.join(directory, pattern))})
    for path in stale:
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)
    return stale
