"""What a task gives `bert_tf.tasks.runner.run`: the `Task` contract (with defaults) and `TrainData`. A task knows its
data and outputs, nothing else. The runner calls, in order:
  check_flags(run)                     its own settings, before the model files are read
  read_inputs(run, config)             reads and checks every input file, before any model work
  build_model(config, restored)        the Keras task model, in the strategy's scope
  train_data(run, tokenizer, trainer)  (do_train) -> TrainData
  train_steps(run, num_examples)       (do_train) -> (num_train_steps, num_warmup_steps)
  prepare_evaluation(run, trainer)     (do_train with do_eval) traces the evaluation while training's graph is optimized
  evaluate(run, tokenizer, trainer)    (do_eval; with --eval_every_steps also while training) -> results (a dict)
  predict(run, tokenizer, trainer)     (do_predict) -> results or None
and reads its attributes; `loss` is per-example [B] float32, or a bert_tf.training.losses batch loss.
"""
import abc
import os
import typing

from bert_tf.data import lengths as lengths_lib
from bert_tf.data import records
from bert_tf.model.task_models import TaskSpec
from bert_tf.training.trainer import compute_train_steps


class TrainData(typing.NamedTuple):
    """A task's training set (its `train_data`)."""
    dataset_fn: typing.Callable  # the Trainer's dataset_fn(batch_size, input_context, seed)
    num_examples: int | None  # sets the number of steps (None: the task's `train_steps` does)
    files: tuple  # the record files this worker's dataset_fn reads (searched for the corrupt one if reading fails)
    fingerprint: str  # the training data's, alike on every worker with the same data (run_record: data_fingerprint)
    settings: dict | None = None  # the task's own settings that shape the batches (recorded there too)


def write_train_records(trainer, rows, schema, decode, lengths, names):
    """Writes `rows` (dicts holding `schema`'s values) to work_dir/train.tf_record -> its TrainData: shuffled (a buffer
    of up to 10,000 records), `decode(parsed record)` -> (features, labels), batches cut by `lengths` (`names`: the
    arrays with a sequence axis)."""
    path = os.path.join(trainer.work_dir, "train.tf_record")
    serialized = (records.example(row, schema).SerializeToString(deterministic=True) for row in rows)
    written = records.write(path, serialized)

    def parse(record):
        return decode(records.parse(record, schema))

    dataset_fn = records.training_dataset_fn(path, parse, min(written.count, 10000),
                                             batch=lengths_lib.batcher(lengths, names))
    return TrainData(dataset_fn, written.count, (path,), written.fingerprint)


class Task(abc.ABC):
    """The base of every task, with a fine-tuning task's defaults. A subclass names its `spec` and defines `train_data`,
    `loss`, and `evaluate` / `predict` for each of its `modes`."""
    modes = ("do_train", "do_eval", "do_predict")
    label_list = None  # the labels of its head, in the order of its outputs (None for tasks without labels)
    needs_vocab = True  # False for a task that reads token ids only (pretraining)
    answer_settings = {}
    export_options = {}  # what its export takes of the run beyond the model (the classifier's windows)

    @property
    @abc.abstractmethod
    def spec(self) -> TaskSpec:
        """A class attribute, or a property where the data decide (the classifier's regression)."""

    def check_flags(self, run):
        """ValueError for a bad setting of the task's own."""
        return None

    def read_inputs(self, run, config):
        return None

    def build_model(self, config, restored=False):
        """Its spec's model; `restored` (a checkpoint is restored next) skips random initial values."""
        num_labels = len(self.label_list) if self.spec.labelled else None
        return self.spec.build(config, num_labels, restored=restored)

    @abc.abstractmethod
    def train_data(self, run, tokenizer, trainer):
        """The training set as records in `trainer.work_dir` -> TrainData, fingerprinted (`records.Writer`,
        `run_record.fingerprint`)."""

    def train_steps(self, run, num_examples):
        """The original fine-tuning scripts' arithmetic."""
        return compute_train_steps(num_examples, run.train_batch_size, run.num_train_epochs, run.warmup_proportion)

    def prepare_evaluation(self, run, trainer):
        """Traces what `evaluate` will run ahead of time (default: nothing)."""
        return None

    def evaluate(self, run, tokenizer, trainer):
        raise NotImplementedError(f"{type(self).__name__} has no do_eval.")

    def predict(self, run, tokenizer, trainer):
        raise NotImplementedError(f"{type(self).__name__} has no do_predict.")

    evaluated_by = "do_eval"  # the mode --eval_every_steps runs while training (SQuAD: do_predict's evaluation)

    def flat_results(self, results):
        """`evaluate`'s results as one dict of eval_results.txt keys (eval_history.jsonl, --best_metric)."""
        return results

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        lacking = [method for mode, method in (("do_eval", "evaluate"), ("do_predict", "predict"))
                   if mode in cls.modes and getattr(cls, method) is getattr(Task, method)]
        if lacking:
            raise TypeError(f"{cls.__name__}: its modes {cls.modes} need {' and '.join(lacking)}.")
