"""What a training run records in its output_dir, so that a rerun into it resumes only the run it continues.

A run that starts training records, on the chief:
  bert_config.json    the model's config
and on every worker, in its work_dir (the chief's: output_dir; the others': output_dir/workers/worker-<i>, beside
their checkpoints):
  run_settings.json   the settings that shape its input and updates (`training_settings`): max_seq_length, batch
                      size, replicas, workers, gradient accumulation, how batches are cut
                      (bert_tf.data.lengths), the task's own (e.g. max_predictions_per_seq) and a fingerprint of the
                      training files this worker reads (`bert_tf.fileio.fingerprint`: sampled, so that a start
                      reads a few hundred KiB of each; a pretraining worker fingerprints only its own share)
A rerun into an output_dir that holds checkpoints resumes that run from its last one: its weights, optimizer state
and input position. With other settings that position belongs to another input pipeline (a restored iterator
then fails deep in the training loop, or silently reads other data), so `check` refuses such a rerun, naming
each setting that differs, unless `start_over` (which deletes the checkpoints: `delete_checkpoints`). The flags'
settings are checked before any work, the data's once the training records are written (before training). An
output_dir of an older bert-tf without run_settings.json is resumed as before.
"""
import json
import os

from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.model.config import BertConfig

SETTINGS_FILE = "run_settings.json"
CONFIG_FILE = "bert_config.json"


def training_settings(run, replicas, workers):
    """The settings of RunConfig `run` under a strategy of `replicas` replicas on `workers` workers that a resumed
    run must share with the run it continues."""
    lengths = run.sequence_lengths
    return {"max_seq_length": run.max_seq_length, "train_batch_size": run.train_batch_size, "replicas": replicas,
            "workers": workers, "gradient_accumulation_steps": run.gradient_accumulation_steps,
            "pad_to_max_seq_length": lengths.pad, "seq_length_multiple": lengths.multiple,
            "group_by_length": lengths.group_by_length}


def data_settings(train_data):
    """The settings of the training data (a runner.TrainData): its records' fingerprint and the task's settings."""
    return {**(train_data.settings or {}), "data_fingerprint": fileio.fingerprint(train_data.files)}


def _differences(previous, current):
    """'name previous -> current' for each name both dicts hold with different values."""
    return [f"{name} {previous[name]} -> {value}" for name, value in current.items()
            if name in previous and previous[name] != value]


def _resumable(output_dir, start_over):
    return not start_over and bool(checkpoints.latest_checkpoint(output_dir))


def check(output_dir, start_over, config=None, settings=None):
    """Refuses to resume output_dir's run with another bert_config (a BertConfig) or other `settings` (a dict, e.g.
    `training_settings` or `data_settings`), unless `start_over`; a no-op when output_dir holds no checkpoint."""
    if not _resumable(output_dir, start_over):
        return
    config_path, settings_path = os.path.join(output_dir, CONFIG_FILE), os.path.join(output_dir, SETTINGS_FILE)
    if config is not None and fileio.exists(config_path):
        differences = _differences(BertConfig.from_json_file(config_path).to_dict(), config.to_dict())
        if differences:
            raise ValueError(f"{output_dir} holds checkpoints of a run with another bert_config "
                             f"({'; '.join(differences)}): it would resume that run. Use another --output_dir, or "
                             f"--start_over to delete its checkpoints.")
    if settings and fileio.exists(settings_path):
        differences = _differences(_read_settings(settings_path), settings)
        if differences:
            raise ValueError(f"{output_dir} holds checkpoints of a run with other settings "
                             f"({'; '.join(differences)}; recorded in {settings_path}): resuming it would restore its "
                             f"input position into another input pipeline. Rerun with its settings, use another "
                             f"--output_dir, or --start_over to delete its checkpoints.")


def _read_settings(path):
    try:
        return json.loads(fileio.read_text(path, "Run settings"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); delete it or use --start_over.") from None


def delete_checkpoints(directory):
    """--start_over: deletes the checkpoints `directory` holds (each worker its own: `RunConfig.work_dir`)."""
    for name in checkpoints.checkpoint_files(directory):
        logging.info("--start_over: deleting %s", name)
        fileio.remove_tree(name)


def record(work_dir, config, settings):
    """Once every input is checked, each worker records its `settings` (what `check` compares) in its work_dir, and
    the chief (whose work_dir is output_dir) `config` (a BertConfig; None on the other workers)."""
    if config is not None:
        config.to_json_file(os.path.join(work_dir, CONFIG_FILE))
    fileio.write_text_atomically(os.path.join(work_dir, SETTINGS_FILE),
                                 json.dumps(settings, indent=2, sort_keys=True) + "\n")
