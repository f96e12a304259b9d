"""One way to run a task: everything run_classifier.py, run_squad.py, run_ner.py, run_swag.py and run_pretraining.py
share.

A task (`bert_tf.tasks.classifier.ClassifierTask`, `squad.SquadTask`, `ner.NerTask`, `swag.SwagTask`,
`pretraining.PretrainingTask`) is a `bert_tf.tasks.task.Task`: a small object that knows its data and outputs, and
nothing else (its contract, and the order the runner calls it in: bert_tf/tasks/task.py).

`run(task, RunConfig(...))` does the rest, in the original scripts' order: checks, seed, strategy, training
(`Trainer`), evaluation, prediction, `--export_dir` and `--save_original_checkpoint`, and returns `RunResults`.
`RunConfig` holds the shared settings under the original flag names (`bert_tf.flags.run_config` builds one from the
flags), so a task runs from Python without absl:

    from bert_tf.tasks import ner, runner
    results = runner.run(ner.NerTask(data_dir="conll"), runner.RunConfig(
        bert_config_file="bert/bert_config.json", vocab_file="bert/vocab.txt",
        init_checkpoint="bert/bert_model.ckpt", output_dir="/tmp/ner", do_train=True, do_eval=True))
    results.eval_results["eval_f1"]
"""
import dataclasses
import functools
import os

import keras
from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths, records
from bert_tf.tasks import run_record
from bert_tf.training import devices, distribute
from bert_tf.training.config import TrainingConfig
from bert_tf.training.trainer import Trainer


@dataclasses.dataclass(frozen=True)
class RunConfig(TrainingConfig):
    """The settings every fine-tuning run shares, with the original scripts' names and defaults: the training
    settings of `TrainingConfig` (learning_rate, save_checkpoints_steps, iterations_per_loop, precision, XLA, the
    optimizer, checkpoints kept; keyword arguments), and the run's own below. Each default is written once, in
    these two classes: the run scripts' flags take theirs from here (`bert_tf.flags.run_default`)."""
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
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    seed: int | None = None
    export_dir: str | None = None
    save_original_checkpoint: bool = False
    save_keras_hub_preset: bool = False
    # Devices.
    use_tpu: bool = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None
    num_tpu_cores: int = 8
    distribution_strategy: str = "auto"
    num_gpus: int | None = None
    num_cpu_devices: int = 1
    heartbeat_timeout_seconds: float = distribute.HEARTBEAT_TIMEOUT_S  # multi_worker_mirrored: a silent worker is lost
    start_over: bool = False
    # Batch lengths (bert_tf.data.lengths): cut to the longest text of each batch unless pad_to_max_seq_length.
    pad_to_max_seq_length: bool = False
    seq_length_multiple: int | None = None
    group_by_length: bool = False
    # This process's worker under multi_worker_mirrored (set by `run` from the strategy): 0 is the chief, which
    # alone writes output_dir's shared files (results, label_list.txt, exports); each other worker writes only
    # into its own `work_dir`.
    worker_index: int = 0
    num_workers: int = 1

    @property
    def is_chief(self):
        """Whether this process writes the run's results and shared files (worker 0)."""
        return self.worker_index == 0

    @property
    def work_dir(self):
        """Where this worker writes its own files (its training records): output_dir for the chief,
        output_dir/workers/worker-<i> for the others (`distribute.worker_dir`)."""
        return distribute.worker_dir(self.output_dir, self.worker_index)

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
                                       self.gcp_project, self.num_cpu_devices, self.heartbeat_timeout_seconds)


@dataclasses.dataclass
class RunResults:
    """What `run` did: its Trainer (the model, the step), the task's evaluation results (do_eval) and prediction
    results (do_predict; e.g. SQuAD's official evaluation when the predict file has answers), None where not run
    (or on a worker other than the chief)."""
    trainer: Trainer
    eval_results: dict | None = None
    predict_results: dict | None = None


# The original scripts' messages when nothing is asked for (run_classifier.py's has its stray quote).
_NO_MODE = {
    ("do_train", "do_eval", "do_predict"): "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
    ("do_train", "do_predict"): "At least one of `do_train` or `do_predict` must be True.",
}


def prepare(run, task):
    """The checks every run makes before any work, in the original scripts' order; creates output_dir.
    Returns (the RunConfig with its model files resolved (a TF Hub model's own vocab_file and do_lower_case where
    they are not given), the `checkpoints.Pretrained` the run starts from (`checkpoints.load_pretrained`: its
    BertConfig, its FullTokenizer or None, its init_checkpoint, restored later by the Trainer))."""
    if not any(getattr(run, mode) for mode in task.modes):
        raise ValueError(_NO_MODE[task.modes])
    task.check_flags(run)
    loaded = checkpoints.load_pretrained(
        init_checkpoint=run.init_checkpoint, bert_config_file=run.bert_config_file, vocab_file=run.vocab_file,
        do_lower_case=run.do_lower_case, max_seq_length=run.max_seq_length,
        needs_vocab=task.needs_vocab)
    run = dataclasses.replace(run, vocab_file=loaded.files.vocab_file, do_lower_case=loaded.files.do_lower_case)
    if run.max_seq_length < task.min_seq_length:
        raise ValueError(f"max_seq_length must be at least {task.min_seq_length}, got {run.max_seq_length}.")
    fileio.makedirs(run.output_dir)
    if run.do_train:
        run_record.check(run.output_dir, run.start_over, config=loaded.config)
        if run.save_keras_hub_preset:  # before training, not after: keras-hub, the activation, the vocabulary
            checkpoints.check_preset_writable(loaded.config, os.path.join(run.output_dir, "keras_hub"),
                                              run.vocab_file)
    return run, loaded


def make_trainer(run, strategy, build_model, loss_fn, pretrained):
    """A Trainer under `strategy` (`run.strategy()`) with the run's precision, optimizer and checkpoint settings
    (`loss_fn`: per-example losses or a batch-level loss, see bert_tf.training.losses): the RunConfig's
    TrainingConfig settings; a new run starts from `pretrained` (a `checkpoints.Pretrained`)."""
    return Trainer(build_model, loss_fn, run.output_dir, config=TrainingConfig.of(run), strategy=strategy,
                   pretrained=pretrained)


def train(run, task, tokenizer, trainer):
    """Converts the training set and trains for the task's number of steps (`Task.train_steps`: by default the
    original's int(num_examples / train_batch_size * num_train_epochs), warming up over warmup_proportion of them).
    Under several workers, the workers first agree on these settings and the data's fingerprint
    (`run_record.check_workers`). Resumes this worker's run (its checkpoints in its work_dir) only if its recorded
    settings are these (`run_record`: each worker records its own), then records them. A corrupt record met in
    training is an error naming its file (`records.naming_corrupt_records`)."""
    data = task.train_data(run, tokenizer)
    settings = {**run_record.training_settings(run, trainer.strategy.num_replicas_in_sync, trainer.num_workers),
                **run_record.data_settings(data)}
    with distribute.naming_lost_workers(trainer.strategy, run.output_dir):
        run_record.check_workers(trainer.strategy, settings)
    run_record.check(run.work_dir, run.start_over, settings=settings)
    num_train_steps, num_warmup_steps = task.train_steps(run, data.num_examples)
    if run.start_over:
        run_record.delete_checkpoints(run.work_dir)
    run_record.record(run.work_dir, trainer.model.bert.config if run.is_chief else None, settings)
    logging.info("***** Running training *****")
    if data.num_examples is not None:
        logging.info("  Num examples = %d", data.num_examples)
    logging.info("  Batch size = %d", run.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    # while TensorFlow optimizes the training graph: the evaluation's trace
    meanwhile = functools.partial(task.prepare_evaluation, run, trainer) if run.do_eval else None
    with records.naming_corrupt_records(data.files):
        return trainer.train(data.dataset_fn, run.train_batch_size, num_train_steps, num_warmup_steps,
                             seed=run.seed, meanwhile=meanwhile, save_last_in_background=True)


def export(run, task, trainer):
    """After a run: with save_original_checkpoint (and training), the model in the original TF1 format at
    <output_dir>/original; with save_keras_hub_preset (and training), a KerasHub preset at <output_dir>/keras_hub
    (`checkpoints.export_preset`); with export_dir, a SavedModel of the task's export_task at
    <export_dir>/<global_step>, or at the next free version above it where export_dir already holds that step or a
    later one (`exporter.version_dir`: a rerun never rewrites a served version), its text signatures cut to each
    request's texts unless pad_to_max_seq_length or the task's spec keeps max_seq_length (SQuAD). Returns the paths
    written."""
    written = []
    if run.save_original_checkpoint and run.do_train:
        written.append(checkpoints.export_original(trainer.model, os.path.join(run.output_dir, "original"),
                                                   vocab_file=run.vocab_file))
        logging.info("Wrote the fine-tuned model in the original format to %s", written[-1])
    if run.save_keras_hub_preset and run.do_train:
        written.append(checkpoints.export_preset(trainer.model, os.path.join(run.output_dir, "keras_hub"),
                                                 vocab_file=run.vocab_file, do_lower_case=run.do_lower_case))
        logging.info("Wrote the fine-tuned model as a KerasHub preset to %s", written[-1])
    if run.export_dir:
        from bert_tf.export import exporter

        request = exporter.ExportRequest(
            task=task.export_task, export_dir=run.export_dir, min_version=max(trainer.step, 1),
            max_seq_length=run.max_seq_length, label_list=task.label_list,
            pad_to_max_seq_length=run.pad_to_max_seq_length or None, length_multiple=run.seq_length_multiple)
        written.append(exporter.export(request, trainer.model, vocab_file=run.vocab_file,
                                       do_lower_case=run.do_lower_case))
    return written


def run(task, run_config):
    """Runs `task` (a `bert_tf.tasks.task.Task`) as its script would: train, evaluate, predict and export as
    `run_config` says. Returns RunResults.

    Under multi_worker_mirrored every worker trains; the chief alone then evaluates, predicts and exports."""
    run_config, pretrained = prepare(run_config, task)
    config, tokenizer = pretrained.config, pretrained.tokenizer
    # Before the task reads its inputs: --num_cpu_devices and multi_worker_mirrored must precede any TensorFlow op.
    strategy = run_config.strategy()
    worker_index, num_workers = distribute.worker_position(strategy)
    run_config = dataclasses.replace(run_config, worker_index=worker_index, num_workers=num_workers)
    devices.log_devices(strategy, run_config.train_batch_size if run_config.do_train else None,
                        run_config.gradient_accumulation_steps, run_config.mixed_precision, run_config.use_xla,
                        run_config.num_gpus)
    fileio.makedirs(run_config.work_dir)
    if run_config.do_train:  # the flags' settings, before any work (the data's once its records are written)
        run_record.check(run_config.output_dir, run_config.start_over, settings=run_record.training_settings(
            run_config, strategy.num_replicas_in_sync, num_workers))
    task.read_inputs(run_config, config)
    if run_config.seed is not None:
        keras.utils.set_random_seed(run_config.seed)
    # With an init_checkpoint every path restores the encoder before the model is used (Trainer.train: it or a
    # checkpoint of output_dir; restore_for_predict), so its random initial values need not be computed.
    trainer = make_trainer(run_config, strategy,
                           lambda: task.build_model(config, restored_encoder=pretrained.restores), task.loss,
                           pretrained)
    if run_config.do_train:
        train(run_config, task, tokenizer, trainer)
    elif run_config.is_chief:  # eval / predict / export only: the latest checkpoint of output_dir, else init_checkpoint
        trainer.restore_for_predict(required_heads=task.heads)
    results = RunResults(trainer)
    if run_config.is_chief:
        if run_config.do_eval and "do_eval" in task.modes:
            results.eval_results = task.evaluate(run_config, tokenizer, trainer)
        if run_config.do_predict and "do_predict" in task.modes:
            results.predict_results = task.predict(run_config, tokenizer, trainer)
        export(run_config, task, trainer)
    trainer.wait_for_checkpoint()
    logging.info("Done; outputs in %s", run_config.output_dir if run_config.is_chief else run_config.work_dir)
    return results
