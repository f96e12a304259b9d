"""The run scripts' result files, formatted as the original writes them, written atomically."""
import numpy as np
from absl import logging

from bert_tf import fileio


def write_eval_results(path, results, title="Eval results"):
    """Logs the results (`***** <title> *****`, then the lines) and writes them to `path` as the
    original's eval_results.txt: `key = value` lines, keys sorted, values as str() prints them."""
    logging.info("***** %s *****", title)
    for key in sorted(results):
        logging.info("  %s = %s", key, str(results[key]))
    text = "".join(f"{key} = {str(results[key])}\n" for key in sorted(results))
    fileio.write_text_atomically(path, text)


def format_probabilities(rows):
    """The original's test_results.tsv: each example's class probabilities (or regression score), tab-separated, a line
    each, as float32 values print (shortest repr)."""
    return "".join("\t".join(str(v) for v in np.atleast_1d(np.asarray(row, np.float32))) + "\n" for row in rows)
