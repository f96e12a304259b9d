"""TensorBoard summaries written while a run trains, at a cost an object store can bear.

On a local path TensorFlow's writer flushes on its own. On a URL, where every flush uploads the whole file again, it
never does: `flush` (at each checkpoint and at the end) closes the events file and the next events open a new one,
so each event is uploaded once.
"""
import contextlib

import tensorflow as tf

from bert_tf import fileio

_NEVER = 2**31 - 1  # the writer's max_queue and flush_millis (int32) on a URL: no flush of its own


class Writer:
    """Scalars to TensorBoard events files in `logdir`, flushed as the module says and at `with`'s end."""

    def __init__(self, logdir):
        self.logdir = logdir
        self._writer = None
        self._default = contextlib.ExitStack()  # the writer's `as_default` while it is open

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.flush()
        self._default.close()

    def scalars(self, step, figures):
        """Writes each of `figures` ({name: number}) at `step`."""
        if self._writer is None:
            quiet = dict(max_queue=_NEVER, flush_millis=_NEVER) if fileio.is_url(self.logdir) else {}
            self._writer = tf.summary.create_file_writer(self.logdir, **quiet)
            self._default.enter_context(self._writer.as_default())
        for name, value in figures.items():
            tf.summary.scalar(name, value, step=step)

    def flush(self):
        """Writes out the events so far (on a URL: closes their events file)."""
        if self._writer is None:
            return
        if fileio.is_url(self.logdir):
            self._default.close()
            self._writer.close()
            self._writer = None
        else:
            self._writer.flush()
