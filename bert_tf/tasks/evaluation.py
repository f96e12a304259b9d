"""Evaluation during training (--eval_every_steps), the best checkpoint (--best_metric) and early stopping
(--early_stopping_patience): `Controls.on_evaluation`, the Trainer's callback on the chief.

In output_dir:
  eval_history.jsonl  a JSON object per evaluation (global_step and `Task.flat_results`), rewritten whole each time
                      (gs:// objects cannot be appended to)
  eval/               each evaluation's scalars, for TensorBoard
  best/               the best evaluation's weights and global_step (a checkpoint of `training.trainer.trackables`)
The best and the patience count derive from the history alone, so a resumed run continues them exactly (entries after
the step resumed are dropped). best/ is written before the history entry naming it.
"""
import json
import os
import time

import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.training import summaries
from bert_tf.training.trainer import trackables

HISTORY_FILE = "eval_history.jsonl"
BEST_DIR = "best"


def metric_mode(run):
    return run.best_metric_mode or ("min" if run.best_metric.endswith("loss") else "max")


def standing(history, key, mode, min_delta=0.0):
    """(the best entry of `history` by `key`, the evaluations since without an improvement over min_delta); (None, 0) if
    empty."""
    best, waited = None, 0
    for entry in history:
        gain = entry[key] - best[key] if best is not None else None
        if best is None or (gain if mode == "max" else -gain) > min_delta:
            best, waited = entry, 0
        else:
            waited += 1
    return best, waited


def read_history(output_dir):
    """The entries of output_dir's eval_history.jsonl, in order ([] without one)."""
    path = os.path.join(output_dir, HISTORY_FILE)
    if not fileio.exists(path):
        return []
    entries = []
    for number, line in enumerate(fileio.read_text(path, "Evaluation history").splitlines(), 1):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {number}: not a JSON object ({e}); delete the file or use "
                             f"--start_over.") from None
    return entries


def delete(output_dir):
    """--start_over: deletes the history and best/ of output_dir."""
    for name in (HISTORY_FILE, BEST_DIR):
        if fileio.exists(os.path.join(output_dir, name)):
            logging.info("--start_over: deleting %s", os.path.join(output_dir, name))
            fileio.remove_tree(os.path.join(output_dir, name))


def restore_best(trainer, required_heads=()):
    """Loads output_dir/best's weights and global_step into the trainer's model if it exists; -> its path or None."""
    path = checkpoints.latest_checkpoint(os.path.join(trainer.output_dir, BEST_DIR))
    if path:
        trainer.wait_for_checkpoint()  # the last checkpoint, saved in the background
        trainer.restore_step(path)
        checkpoints.restore(trainer.model, path, required_heads)
        logging.info("Using the best checkpoint %s (step %d)", path, trainer.step)
    return path


class Controls:
    """Evaluates a task during training (`on_evaluation`) and keeps its history, best/ and patience. `results`: (step,
    results) of this process's last evaluation, or None."""

    def __init__(self, run, task, tokenizer, trainer):
        self.run, self.task, self.tokenizer, self.trainer = run, task, tokenizer, trainer
        self.history = None  # read at the first evaluation
        self.results = None

    def on_evaluation(self, step):
        """Evaluates at `step` unless the history holds it, and records it; -> whether to stop (patience)."""
        run = self.run
        if self.history is None:
            history = read_history(run.output_dir)
            self.history = [entry for entry in history if entry["global_step"] <= step]
            if len(self.history) < len(history):
                self._write_history()  # without the entries after the step resumed
        if not any(entry["global_step"] == step for entry in self.history):
            self._evaluate(step)
        if not run.best_metric:
            return False
        best, waited = standing(self.history, run.best_metric, metric_mode(run), run.early_stopping_min_delta)
        if run.early_stopping_patience and waited >= run.early_stopping_patience:
            logging.info("Early stopping at step %d: %s has not improved on %s (step %d) for %d evaluations.", step,
                         run.best_metric, best[run.best_metric], best["global_step"], waited)
            return True
        return False

    def _evaluate(self, step):
        run, start = self.run, time.time()
        evaluate = self.task.evaluate if self.task.evaluated_by == "do_eval" else self.task.predict
        results = evaluate(run, self.tokenizer, self.trainer)
        entry = {"global_step": step, **{key: value.item() if hasattr(value, "item") else value  # numpy's as JSON's
                                         for key, value in self.task.flat_results(results).items()
                                         if key != "global_step"}}
        if run.best_metric and run.best_metric not in entry:
            raise ValueError(f"--best_metric={run.best_metric} is not a key of the task's eval results: "
                             f"{', '.join(sorted(entry))}.")
        logging.info("Evaluation at step %d took %.1f s: %s", step, time.time() - start,
                     " ".join(f"{key} {value}" for key, value in sorted(entry.items())))
        with summaries.Writer(os.path.join(run.output_dir, "eval")) as writer:
            writer.scalars(step, {key: value for key, value in entry.items()
                                  if key != "global_step" and isinstance(value, (int, float))})
        self.results = step, results
        self.history.append(entry)
        if run.best_metric and standing(self.history, run.best_metric, metric_mode(run),
                                        run.early_stopping_min_delta)[0] is entry:
            self._save_best(step)
        self._write_history()

    def _write_history(self):
        fileio.write_text_atomically(os.path.join(self.run.output_dir, HISTORY_FILE),
                                     "".join(json.dumps(entry) + "\n" for entry in self.history))

    def _save_best(self, step):
        """Saves `step`'s weights to best/, replacing the previous best once complete."""
        model = self.trainer.model
        checkpoint = tf.train.Checkpoint(global_step=self.trainer.global_step, **trackables(model))
        manager = tf.train.CheckpointManager(checkpoint, os.path.join(self.run.output_dir, BEST_DIR), max_to_keep=1,
                                             checkpoint_name="ckpt")
        logging.info("New best %s %s: saved %s", self.run.best_metric, self.history[-1][self.run.best_metric],
                     manager.save(checkpoint_number=step))

    def finish(self):
        """After training with --best_metric, loads the best weights and step. -> the eval results if this process last
        evaluated that step, else None (always for a task evaluated by its predictions)."""
        if self.run.best_metric:
            restore_best(self.trainer, self.task.spec.head_names)
        if self.task.evaluated_by == "do_eval" and self.results and self.results[0] == self.trainer.step:
            return self.results[1]
        return None
