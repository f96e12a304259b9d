"""What every training script shares: `run(task, RunConfig(...))` runs a `bert_tf.tasks.task.Task` in the original
scripts' order (checks, seed, strategy, training, evaluation, prediction, exports) and returns the evaluation's and
prediction's results. `runner.RunConfig` (bert_tf.training.config's) holds the settings under the original flag names,
so a task runs from Python without absl:

    from bert_tf.tasks import ner, runner
    eval_results, _ = runner.run(ner.NerTask(data_dir="conll"), runner.RunConfig(
        bert_config_file="bert/bert_config.json", vocab_file="bert/vocab.txt",
        init_checkpoint="bert/bert_model.ckpt", output_dir="/tmp/ner", do_train=True, do_eval=True))
    eval_results["eval_f1"]
"""
import dataclasses
import functools
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import records
from bert_tf.tasks import evaluation, run_record
from bert_tf.training import devices, distribute
from bert_tf.training.config import RunConfig as RunConfig
from bert_tf.training.trainer import Trainer

# The original scripts' messages when nothing is asked for (run_classifier.py's has its stray quote).
_NO_MODE = {
    ("do_train", "do_eval", "do_predict"): "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
    ("do_train", "do_predict"): "At least one of `do_train` or `do_predict` must be True.",
    ("do_train", "do_eval"): "At least one of `do_train` or `do_eval` must be True.",
}


def prepare(run, task):
    """The checks every run makes before any work, in the original scripts' order; creates output_dir. -> (the
    RunConfig, model files resolved; the `checkpoints.Pretrained` it starts from)."""
    if not run.output_dir:
        raise ValueError("output_dir is required: the directory where the run writes its checkpoints and outputs.")
    if not (any(getattr(run, mode) for mode in task.modes) or run.predict_text_file):
        raise ValueError(_NO_MODE[task.modes])
    if run.predict_text_file:  # answers imports every task: only where a run answers texts
        from bert_tf.tasks import answers

        answers.check_text_file(run.predict_text_file, task.spec.name)
    task.check_flags(run)
    mode = task.evaluated_by
    if run.eval_every_steps and not (run.do_train and getattr(run, mode) and mode in task.modes):
        raise ValueError(f"--eval_every_steps evaluates while training: it needs --do_train and --{mode}"
                         + ("" if mode in task.modes else f", which {type(task).__name__} has not") + ".")
    loaded = checkpoints.load_pretrained(
        init_checkpoint=run.init_checkpoint, bert_config_file=run.bert_config_file, vocab_file=run.vocab_file,
        do_lower_case=run.do_lower_case, max_seq_length=run.max_seq_length,
        needs_vocab=task.needs_vocab)
    run = dataclasses.replace(run, vocab_file=loaded.vocab_file, do_lower_case=loaded.do_lower_case)
    if run.max_seq_length < 3:  # [CLS], a token, [SEP]
        raise ValueError(f"max_seq_length must be at least 3, got {run.max_seq_length}.")
    fileio.makedirs(run.output_dir)
    if run.do_train and run.save_keras_hub_preset:  # before training, not after: keras-hub, the activation, the vocab
        checkpoints.check_preset_writable(loaded.config, os.path.join(run.output_dir, "keras_hub"), run.vocab_file)
    return run, loaded


def train(run, task, tokenizer, trainer, controls=None):
    """Converts the training set and trains for `Task.train_steps`, evaluating with `controls`. The workers first agree
    on the settings and data; a run resumes only with its recorded settings (`run_record`)."""
    data = task.train_data(run, tokenizer, trainer)
    settings = {**run_record.training_settings(run, trainer.strategy), **(data.settings or {}),
                "data_fingerprint": data.fingerprint}
    with distribute.naming_lost_workers(trainer.strategy, run.output_dir):
        run_record.check_workers(trainer.strategy, settings)
    run_record.check(trainer.work_dir, run.start_over, settings=settings)
    num_train_steps, num_warmup_steps = task.train_steps(run, data.num_examples)
    if run.start_over:
        run_record.delete_checkpoints(trainer.work_dir)
        if trainer.is_chief:
            evaluation.delete(run.output_dir)
    run_record.record(trainer.work_dir, trainer.model.bert.config if trainer.is_chief else None, settings)
    if trainer.is_chief and run.vocab_file:  # what it trains, for every later reader
        run_record.record_model(run.output_dir, trainer.model, task.spec.name, task.label_list, run.vocab_file,
                                run.do_lower_case, run.max_seq_length, task.answer_settings)
    logging.info("***** Running training *****")
    if data.num_examples is not None:
        logging.info("  Num examples = %d", data.num_examples)
    logging.info("  Batch size = %d", run.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    # while TensorFlow optimizes the training graph: the evaluation's trace
    meanwhile = functools.partial(task.prepare_evaluation, run, trainer) if run.do_eval else None
    with records.naming_corrupt_records(data.files):
        return trainer.train(data.dataset_fn, run.train_batch_size, num_train_steps, num_warmup_steps,
                             seed=run.seed, meanwhile=meanwhile, save_last_in_background=True,
                             evaluate_every=run.eval_every_steps, on_evaluation=controls and controls.on_evaluation)


def export(run, task, trainer):
    """After training: output_dir/original, output_dir/keras_hub and, with export_dir, a SavedModel at the next free
    version from the global step (`exporter.version_dir`). Returns the paths written."""
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

        written.append(exporter.export(
            task.spec.name, run.export_dir, trainer.model, min_version=max(trainer.step, 1),
            max_seq_length=run.max_seq_length, label_list=task.label_list, vocab_file=run.vocab_file,
            do_lower_case=run.do_lower_case, pad_to_max_seq_length=run.pad_to_max_seq_length or None,
            seq_length_multiple=run.seq_length_multiple, **task.export_options))
    return written


def run(task, run_config):
    """Runs `task` as its script would: every worker trains, the chief alone evaluates, predicts and exports. ->
    (evaluation results, prediction results), each None where not run or not the chief."""
    if run_config.deterministic:  # before any op
        tf.config.experimental.enable_op_determinism()
    run_config, pretrained = prepare(run_config, task)
    config, tokenizer = pretrained.config, pretrained.tokenizer
    # Before the task reads its inputs: --num_cpu_devices and multi_worker_mirrored must precede any TensorFlow op.
    strategy = run_config.strategy()
    devices.log_devices(strategy, run_config.train_batch_size if run_config.do_train else None,
                        run_config.gradient_accumulation_steps, run_config.mixed_precision, run_config.use_xla,
                        run_config.num_gpus)
    if run_config.do_train:  # the model and the flags' settings, before any work (the data's: `train`)
        run_record.check(run_config.output_dir, run_config.start_over, config=config,
                         settings=run_record.training_settings(run_config, strategy))
    task.read_inputs(run_config, config)
    if run_config.seed is not None:
        keras.utils.set_random_seed(run_config.seed)
    # With an init_checkpoint every path restores the encoder before the model is used (Trainer.train: it or a
    # checkpoint of output_dir; restore_for_predict), so its random initial values need not be computed.
    trainer = Trainer(lambda: task.build_model(config, restored=pretrained.restored), task.loss, run_config.output_dir,
                      config=run_config, strategy=strategy, pretrained=pretrained)  # a new run starts from it
    controls = evaluation.Controls(run_config, task, tokenizer, trainer) if run_config.eval_every_steps else None
    eval_results = predict_results = None
    if run_config.do_train:
        train(run_config, task, tokenizer, trainer, controls)
        if controls and trainer.is_chief:  # the best weights (--best_metric); their evaluation if it ran last
            eval_results = controls.finish()
    elif trainer.is_chief:  # eval / predict / export only: output_dir/best, its latest checkpoint, init_checkpoint
        if not evaluation.restore_best(trainer, task.spec.head_names):
            trainer.restore_for_predict(required_heads=task.spec.head_names)
    if trainer.is_chief:
        if run_config.do_eval and "do_eval" in task.modes and eval_results is None:
            eval_results = task.evaluate(run_config, tokenizer, trainer)
        if run_config.do_predict and "do_predict" in task.modes:
            predict_results = task.predict(run_config, tokenizer, trainer)
        if run_config.predict_text_file:
            from bert_tf.tasks import answers

            answers.answer_text_file(run_config, task, tokenizer, trainer)
        export(run_config, task, trainer)
    trainer.wait_for_checkpoint()
    logging.info("Done; outputs in %s", trainer.work_dir)
    return eval_results, predict_results
