"""What a task gives `bert_tf.tasks.runner.run`: the `Task` base class (its contract, with defaults) and
`TrainData`, the training set a task hands the Trainer.

A task is a small object that knows its data and outputs, and nothing else. The runner calls it in this order:
  check_flags(run)                   its own settings, before the model files are read
  read_inputs(run, config)           reads and checks every input file the run will need, before any model work
                                     (what it reads stays on the task for the calls below)
  build_model(config, restored_encoder)  the Keras task model, in the strategy's scope (`restored_encoder`: its
                                     encoder is restored from a checkpoint next); by default its spec's
  train_data(run, tokenizer)         (do_train) -> TrainData
  train_steps(run, num_examples)     (do_train) -> (num_train_steps, num_warmup_steps)
  prepare_evaluation(run, trainer)   (do_train with do_eval) traces the evaluation while TensorFlow optimizes
                                     the training graph
  evaluate(run, tokenizer, trainer)  (do_eval) predicts the dev set, writes its outputs -> results (a dict)
  predict(run, tokenizer, trainer)   (do_predict) predicts the test set, writes its outputs -> results or None
and reads its attributes: `spec` (its model's `bert_tf.model.task_models.TaskSpec`: the model, its heads, inputs,
outputs and labels; `heads`, the head attributes a checkpoint must hold to predict, and `export_task`, its export's
task, derive from it), `modes`, `label_list`, `min_seq_length`, `needs_vocab`, and `loss` (per-example
`loss(labels, outputs)` [B] float32, or a batch-level loss object of bert_tf.training.losses).
"""
import abc
import typing

from bert_tf.model.task_models import TaskSpec
from bert_tf.training.trainer import compute_train_steps


class TrainData(typing.NamedTuple):
    """A task's training set (its `train_data`)."""
    dataset_fn: typing.Callable  # the Trainer's dataset_fn(batch_size, input_context, seed)
    num_examples: int | None  # sets the number of steps (None: the task's `train_steps` does)
    files: tuple  # the record files this worker's dataset_fn reads (searched for the corrupt one if reading fails)
    fingerprint: str  # the training data's, alike on every worker with the same data (run_record: data_fingerprint)
    settings: dict | None = None  # the task's own settings that shape the batches (recorded there too)


class Task(abc.ABC):
    """The base of every task (see the module docstring); the defaults are those of a fine-tuning task.

    A subclass names its `spec` and defines `train_data`, `loss` (a class attribute, e.g.
    `staticmethod(span_loss)`, or set in `__init__`), and `evaluate` / `predict` for the modes it has (`modes`:
    SQuAD has no do_eval, pretraining no do_predict; the runner calls only those): a subclass whose `modes` name
    one without its method is refused when it is defined.
    """
    modes = ("do_train", "do_eval", "do_predict")
    label_list = None  # the labels of its head, in the order of its outputs (None for tasks without labels)
    min_seq_length = 3
    needs_vocab = True  # False for a task that reads token ids only (pretraining)

    @property
    @abc.abstractmethod
    def spec(self) -> TaskSpec:
        """Its model's `bert_tf.model.task_models.TaskSpec`: a class attribute (e.g. `task_models.REGISTRY["ner"]`),
        or a property where the data decide (the classifier's regression)."""

    @property
    def heads(self):
        """The head attributes its model needs to predict and export (its spec's)."""
        return self.spec.head_names

    @property
    def export_task(self):
        """Its export's task (`bert_tf.export.exporter.ExportRequest`): its spec's name."""
        return self.spec.name

    def check_flags(self, run):
        """Checks the task's own settings (RunConfig `run` and the task's arguments); raises ValueError. By
        default there are none."""
        return None

    def read_inputs(self, run, config):
        """Reads and checks every input file the run needs (BertConfig `config`), before any model work. By
        default there are none."""
        return None

    def build_model(self, config, restored_encoder=False):
        """The task's Keras model for BertConfig `config` (its spec's, with `len(label_list)` labels where labelled);
        `restored_encoder`: the caller restores the encoder from a checkpoint next, so it need not compute random
        initial values (`encoder.BertModel`'s `restored`)."""
        num_labels = len(self.label_list) if self.spec.labelled else None
        return self.spec.build(config, num_labels, restored=restored_encoder)

    @abc.abstractmethod
    def train_data(self, run, tokenizer):
        """The training set converted into records (in `run.work_dir`) -> TrainData, whose fingerprint is that of
        the records as written (`bert_tf.data.records.Writer`), or of the user's record files
        (`bert_tf.tasks.run_record.fingerprint`)."""

    def train_steps(self, run, num_examples):
        """(num_train_steps, num_warmup_steps): the original fine-tuning scripts' int(num_examples /
        train_batch_size * num_train_epochs), warming up over warmup_proportion of them."""
        return compute_train_steps(num_examples, run.train_batch_size, run.num_train_epochs, run.warmup_proportion)

    def prepare_evaluation(self, run, trainer):
        """Traces what `evaluate` will run (a speed-up; by default nothing is traced ahead)."""
        return None

    def evaluate(self, run, tokenizer, trainer):
        """(do_eval) Predicts the dev set with `trainer`'s model, writes the task's evaluation files into
        run.output_dir and returns its results (a dict, e.g. eval_accuracy, eval_loss, global_step). A task whose
        `modes` hold do_eval defines it."""
        raise NotImplementedError(f"{type(self).__name__} has no do_eval.")

    def predict(self, run, tokenizer, trainer):
        """(do_predict) Predicts the test set with `trainer`'s model, writes the task's prediction files into
        run.output_dir and returns results (a dict) or None. A task whose `modes` hold do_predict defines it."""
        raise NotImplementedError(f"{type(self).__name__} has no do_predict.")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        lacking = [method for mode, method in MODE_METHODS.items()
                   if mode in cls.modes and getattr(cls, method) is getattr(Task, method)]
        if lacking:
            raise TypeError(f"{cls.__name__}: its modes {cls.modes} need {' and '.join(lacking)}.")


MODE_METHODS = {"do_eval": "evaluate", "do_predict": "predict"}  # the Task method the runner calls for each mode
