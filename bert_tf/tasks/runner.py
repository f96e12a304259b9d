"""One way to run a fine-tuning task: everything run_classifier.py, run_squad.py, run_ner.py and run_swag.py share.

A task (`bert_tf.tasks.classifier.ClassifierTask`, `squad.SquadTask`, `ner.NerTask`, `swag.SwagTask`) is a small
object that knows its data and outputs, and nothing else:

  heads                       the head attributes of its model, e.g. ("classifier",): required to predict and export
  modes                       optional: the run modes it has (default do_train, do_eval, do_predict; SQuAD has no
                              do_eval: its predictions are evaluated when the predict file has answers)
  export_task                 its `bert_tf.export.saved_model` task name, or None (no SavedModel export)
  min_seq_length              the smallest max_seq_length it accepts
  check_settings(run)         optional: checks of its own settings that come before the model files are read
  check(run, config)          validates its own settings and reads every input it will need, before any work
  build_model(config)         the Keras task model (`bert_tf.model.task_models`)
  loss(labels, outputs)       per-example loss [B], float32; or a batch-level loss object (bert_tf.training.losses,
                              e.g. the pretraining loss)
  train_data(run, tokenizer)  -> (dataset_fn, num_examples): the training set converted (output_dir/train.tf_record)
                              and a Trainer `dataset_fn(batch_size, input_context)` reading it
  train_steps(run)            optional: (num_train_steps, num_warmup_steps) (default: from the examples, epochs
                              and warmup_proportion, as the original fine-tuning scripts)
  evaluate(run, tokenizer, trainer)   (with do_eval) predicts the dev set, logs and writes its eval outputs, returns
                                      the results
  predict(run, tokenizer, trainer)    predicts the test set and writes its outputs
  label_list                  the labels to export with the model (None for tasks without labels)
  needs_vocab                 optional: False for a task that reads token ids only (pretraining); default True

`run(task, RunConfig(...))` does the rest, in the original scripts' order: checks, seed, strategy, training
(`Trainer`), evaluation, prediction, `--export_dir` and `--save_original_checkpoint`. `RunConfig` holds the shared
settings under the original flag names (`bert_tf.flags.run_config` builds one from the flags), so a task runs from
Python without absl:

    from bert_tf.tasks import ner, runner
    runner.run(ner.NerTask(data_dir="conll"), runner.RunConfig(
        bert_config_file="bert/bert_config.json", vocab_file="bert/vocab.txt",
        init_checkpoint="bert/bert_model.ckpt", output_dir="/tmp/ner", do_train=True, do_eval=True))
"""
import dataclasses
import functools
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.data import lengths
from bert_tf.model.config import BertConfig, check_vocab_size
from bert_tf.text import tokenization
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer, compute_train_steps


@dataclasses.dataclass
class RunConfig:
    """The settings every fine-tuning run shares, with the original scripts' names and defaults."""
    # The pre-trained model (bert_config_file, vocab_file, do_lower_case: None takes a TF Hub init_checkpoint's own,
    # see `checkpoints.model_files`; do_lower_case otherwise defaults to True).
    bert_config_file: str | None
    vocab_file: str | None
    output_dir: str
    init_checkpoint: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    # What to run.
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    seed: int | None = None
    export_dir: str | None = None
    save_original_checkpoint: bool = False
    # Devices, precision and compilation.
    use_tpu: bool = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None
    num_tpu_cores: int = 8
    distribution_strategy: str = "auto"
    num_gpus: int | None = None
    num_cpu_devices: int = 1
    mixed_precision: str = "float32"
    use_xla: bool = False
    gradient_accumulation_steps: int = 1
    adam_bias_correction: bool = False
    fused_adam: bool = True
    keep_checkpoint_max: int = 5
    optimizer: str = "adamw"
    start_over: bool = False
    # Batch lengths (bert_tf.data.lengths): cut to the longest text of each batch unless pad_to_max_seq_length.
    pad_to_max_seq_length: bool = False
    seq_length_multiple: int | None = None
    group_by_length: bool = False

    @property
    def fixed_batches(self):
        """Whether evaluation and prediction need whole batches (TPU), padded with examples the metrics ignore."""
        return self.use_tpu or self.distribution_strategy == "tpu"

    @property
    def sequence_lengths(self):
        """How batches are cut (bert_tf.data.lengths.SequenceLengths): to their longest text, rounded up to
        seq_length_multiple (default 32 with use_xla or on TPU, where each length compiles a program, else 1)."""
        return lengths.SequenceLengths.for_run(self.pad_to_max_seq_length, self.use_xla or self.fixed_batches,
                                               self.seq_length_multiple, self.group_by_length)

    def strategy(self):
        """The tf.distribute strategy these settings ask for (`--use_tpu` means tpu when the strategy is auto)."""
        name = "tpu" if self.use_tpu and self.distribution_strategy == "auto" else self.distribution_strategy
        return distribute.get_strategy(name, self.num_gpus, self.tpu_name or self.master, self.tpu_zone,
                                       self.gcp_project, self.num_cpu_devices)


# The original scripts' messages when nothing is asked for (run_classifier.py's has its stray quote).
_NO_MODE = {
    ("do_train", "do_eval", "do_predict"): "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
    ("do_train", "do_predict"): "At least one of `do_train` or `do_predict` must be True.",
}


def prepare(run, task):
    """The checks every run makes before any work, in the original scripts' order; creates output_dir.
    Returns (the RunConfig with its model files resolved (`checkpoints.model_files`: a TF Hub model's own
    bert_config, vocab_file and do_lower_case where they are not given), BertConfig, FullTokenizer)."""
    files = checkpoints.model_files(run.init_checkpoint, run.bert_config_file, run.vocab_file, run.do_lower_case)
    run = dataclasses.replace(run, vocab_file=files.vocab_file, do_lower_case=files.do_lower_case)
    tokenization.validate_case_matches_checkpoint(run.do_lower_case, run.init_checkpoint)
    modes = getattr(task, "modes", ("do_train", "do_eval", "do_predict"))
    if not any(getattr(run, mode) for mode in modes):
        raise ValueError(_NO_MODE[modes])
    if hasattr(task, "check_settings"):
        task.check_settings(run)
    if run.export_dir and not task.export_task:
        raise ValueError("--export_dir: this task has no SavedModel export; see run_scripts/export_saved_model.py "
                         "for the tasks that have one.")
    config = files.config
    if run.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"Cannot use sequence length {run.max_seq_length} because the BERT model was only trained "
                         f"up to sequence length {config.max_position_embeddings}")
    if run.max_seq_length < task.min_seq_length:
        raise ValueError(f"max_seq_length must be at least {task.min_seq_length}, got {run.max_seq_length}.")
    tf.io.gfile.makedirs(run.output_dir)
    if run.do_train:
        check_output_dir(run, config)
    if not run.vocab_file:
        if getattr(task, "needs_vocab", True):
            raise ValueError(f"No vocab_file given, and init_checkpoint={run.init_checkpoint!r} is not a TF Hub BERT "
                             f"SavedModel with a vocab_file asset: pass --vocab_file (the vocab.txt the model was "
                             f"trained on).")
        return run, config, None
    tokenizer = tokenization.FullTokenizer(run.vocab_file, run.do_lower_case)
    check_vocab_size(config, tokenizer.vocab, run.vocab_file)
    return run, config, tokenizer


def check_output_dir(run, config):
    """Training resumes the run of output_dir: refuses one whose checkpoints belong to another bert_config (the
    output_dir/bert_config.json that `start_training` recorded), unless `start_over`."""
    path = os.path.join(run.output_dir, "bert_config.json")
    if run.start_over or not tf.io.gfile.exists(path) or not checkpoints.latest_checkpoint(run.output_dir):
        return
    previous = BertConfig.from_json_file(path).to_dict()
    differences = [f"{key} {previous.get(key)} -> {value}" for key, value in config.to_dict().items()
                   if previous.get(key) != value]
    if differences:
        raise ValueError(f"{run.output_dir} holds checkpoints of a run with another bert_config "
                         f"({'; '.join(differences)}): it would resume that run. Use another --output_dir, or "
                         f"--start_over to delete its checkpoints.")


def start_training(run, trainer):
    """Once every input is checked, on the chief: with `start_over`, deletes the checkpoints output_dir holds;
    records the model's config as output_dir/bert_config.json (what `check_output_dir` compares)."""
    if not trainer.is_chief:
        return
    if run.start_over:
        for name in checkpoints.checkpoint_files(run.output_dir):
            logging.info("--start_over: deleting %s", name)
            if tf.io.gfile.isdir(name):
                tf.io.gfile.rmtree(name)
            else:
                tf.io.gfile.remove(name)
    trainer.model.bert.config.to_json_file(os.path.join(run.output_dir, "bert_config.json"))


def make_trainer(run, strategy, build_model, loss_fn):
    """A Trainer under `strategy` (`run.strategy()`) with the run's precision, optimizer and checkpoint settings
    (`loss_fn`: per-example losses or a batch-level loss, see bert_tf.training.losses)."""
    return Trainer(build_model, loss_fn, run.output_dir, strategy=strategy,
                   init_checkpoint=run.init_checkpoint, learning_rate=run.learning_rate,
                   save_checkpoints_steps=run.save_checkpoints_steps, iterations_per_loop=run.iterations_per_loop,
                   gradient_accumulation_steps=run.gradient_accumulation_steps,
                   mixed_precision=run.mixed_precision, use_xla=run.use_xla,
                   adam_bias_correction=run.adam_bias_correction, keep_checkpoint_max=run.keep_checkpoint_max,
                   optimizer=run.optimizer, fused_adam=run.fused_adam)


def train(run, task, tokenizer, trainer):
    """Converts the training set and trains for the original's number of steps: the task's `train_steps(run)`,
    else int(num_examples / train_batch_size * num_train_epochs), warming up over warmup_proportion of them."""
    dataset_fn, num_examples = task.train_data(run, tokenizer)
    if hasattr(task, "train_steps"):
        num_train_steps, num_warmup_steps = task.train_steps(run)
    else:
        num_train_steps, num_warmup_steps = compute_train_steps(num_examples, run.train_batch_size,
                                                                run.num_train_epochs, run.warmup_proportion)
    start_training(run, trainer)
    logging.info("***** Running training *****")
    if num_examples is not None:
        logging.info("  Num examples = %d", num_examples)
    logging.info("  Batch size = %d", run.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    meanwhile = None  # while TensorFlow optimizes the training graph: the evaluation's trace, where there is one
    if run.do_eval and hasattr(task, "prepare_evaluation"):
        meanwhile = functools.partial(task.prepare_evaluation, run, trainer)
    return trainer.train(dataset_fn, run.train_batch_size, num_train_steps, num_warmup_steps, seed=run.seed,
                         meanwhile=meanwhile, save_last_in_background=True)


def export(run, task, trainer):
    """After a run: with save_original_checkpoint (and training), the model in the original TF1 format at
    <output_dir>/original; with export_dir, a SavedModel at <export_dir>/<global_step>. Returns the paths written."""
    written = []
    if run.save_original_checkpoint and run.do_train:
        written.append(checkpoints.export_original(trainer.model, os.path.join(run.output_dir, "original"),
                                                   vocab_file=run.vocab_file))
        logging.info("Wrote the fine-tuned model in the original format to %s", written[-1])
    if run.export_dir and task.export_task:
        from bert_tf.export import saved_model

        written.append(saved_model.export_task_model(
            trainer.model, task.export_task, run.export_dir, run.vocab_file, run.do_lower_case, run.max_seq_length,
            version=max(trainer.step, 1), overwrite=True, label_list=task.label_list,
            pad_to_max_seq_length=run.pad_to_max_seq_length, length_multiple=run.seq_length_multiple))
        logging.info("Exported the %s model to %s", task.export_task, written[-1])
    return written


def run(task, run_config):
    """Runs `task` as its script would: train, evaluate, predict and export as `run_config` says."""
    run_config, config, tokenizer = prepare(run_config, task)
    # Before the task reads its inputs: --num_cpu_devices and multi_worker_mirrored must precede any TensorFlow op.
    strategy = run_config.strategy()
    task.check(run_config, config)
    if run_config.seed is not None:
        keras.utils.set_random_seed(run_config.seed)
    trainer = make_trainer(run_config, strategy, lambda: task.build_model(config), task.loss)
    if run_config.do_train:
        train(run_config, task, tokenizer, trainer)
    else:  # eval / predict / export only: the latest checkpoint of output_dir, else init_checkpoint
        trainer.restore_for_predict(required_heads=task.heads)
    if run_config.do_eval and hasattr(task, "evaluate"):
        task.evaluate(run_config, tokenizer, trainer)
    if run_config.do_predict:
        task.predict(run_config, tokenizer, trainer)
    export(run_config, task, trainer)
    trainer.wait_for_checkpoint()
    logging.info("Done; outputs in %s", run_config.output_dir)
    return trainer
