"""File helpers for modules that must not import TensorFlow up front (it is imported only for gs:// and the like,
and by the helpers that work on the run scripts' output directories).

Every file bert-tf writes atomically is written under `temp_path(path)` and renamed when complete, so that a
killed run leaves at most such temporaries, which `remove_stale_temporaries` finds by name.
"""
import contextlib
import os

TEMP_SUFFIX = ".tmp"
# What a killed run can leave in output_dir: our temporaries and TensorFlow's (the sharded checkpoint save's
# `ckpt-<N>_temp/` directory, the CheckpointManager state file's `checkpoint.tmp<hex>`, the tensor bundle writer's
# `*.tempstate<N>`).
STALE_PATTERNS = ("*" + TEMP_SUFFIX, "ckpt-*_temp", "checkpoint" + TEMP_SUFFIX + "*", "*.tempstate*")


def remove_quietly(path):
    """Removes `path` (a local path or a URL TensorFlow's gfile knows); ignores any failure (cleanup of temp files)."""
    try:
        if "://" in path:
            import tensorflow as tf
            tf.io.gfile.remove(path)
        else:
            os.remove(path)
    except Exception:  # pylint: disable=broad-except
        pass


def temp_path(path):
    """The temporary name `path` is written under before it is renamed to `path`."""
    return path + TEMP_SUFFIX


@contextlib.contextmanager
def written_atomically(path):
    """Yields the temporary path to write `path` under; renames it to `path` when the block completes and removes
    it when the block raises (local paths and gs:// alike)."""
    import tensorflow as tf

    tmp = temp_path(path)
    try:
        yield tmp
    except BaseException:
        remove_quietly(tmp)
        raise
    tf.io.gfile.rename(tmp, path, overwrite=True)


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
