"""File helpers for modules that must not import TensorFlow up front (it is imported only for gs:// and the like)."""
import os


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
