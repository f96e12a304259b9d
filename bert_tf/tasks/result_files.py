"""Result files of the run scripts, written as the original writes them and atomically (temp name + rename)."""
import numpy as np
import tensorflow as tf

from bert_tf import fileio


def write_text_atomically(path, text):
    """Writes `text` to `path.tmp`, then renames it to `path` (local paths and gs:// alike)."""
    with fileio.written_atomically(path) as tmp, tf.io.gfile.GFile(tmp, "w") as writer:
        writer.write(text)


def format_eval_results(results):
    """The original's eval_results.txt: `key = value` lines, keys sorted, values as str() prints them (numpy
    float32 metrics print as the original's did, e.g. 0.8)."""
    return "".join(f"{key} = {str(results[key])}\n" for key in sorted(results))


def write_eval_results(path, results):
    write_text_atomically(path, format_eval_results(results))


def format_probabilities(rows):
    """The original's test_results.tsv: each example's class probabilities (or regression score), tab-separated,
    one line each, printed as the original's float32 values print (shortest repr, e.g. 0.47435144)."""
    return "".join("\t".join(str(v) for v in np.atleast_1d(np.asarray(row, np.float32))) + "\n" for row in rows)
