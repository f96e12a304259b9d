"""TensorBoard summaries written while a run trains, at a cost an object store can bear.

The rule, for every summary written during training: on a local path TensorFlow's writer flushes on its own (every
10 events or 2 minutes: a live TensorBoard); on a URL, where TensorFlow's client uploads a file whole again at every
flush (gs://: O(updates x size)), it does not, and `flush` (at each checkpoint and at the end) closes its events
file, uploading it once; the next events open a new file (TensorBoard reads every events file of a directory), so
that each event is uploaded once. Either way the writer stays the default one between writes: leaving
`as_default` flushes it.
"""
import contextlib

import tensorflow as tf

from bert_tf import fileio

_NEVER = 2**31 - 1  # the writer's max_queue and flush_millis (int32) on a URL: no flush of its own


class Writer:
    """Scalars to TensorBoard events files in `logdir`, flushed as the module docstring says (and on leaving a
    `with` block on it)."""

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
        """Writes out the events so far: on a URL closes their events file (the next events open a new one)."""
        if self._writer is None:
            return
        if fileio.is_url(self.logdir):
            self._default.close()
            self._writer.close()
            self._writer = None
        else:
            self._writer.flush()
