"""What a training run records: what it trains, for every later reader, and what a rerun into its output_dir must
share to resume it.

Beside its checkpoints, a run's work_dir holds:
  bert_config.json    the model's config (the chief)
  run_settings.json   what shapes its input and updates: `training_settings`, the task's data fingerprint and settings
  model_metadata.json what it trains (the chief, `record_model`): task, labels, thresholds, casing, max_seq_length,
  + vocab.txt         bert_config, the task's answer settings; read by bert_tf.load, later runs, exports, conversions
A resumed input position belongs to one input pipeline: with other settings a rerun would fail deep in training or
silently read other data, so `check` refuses it, naming each difference, unless `start_over`. An output_dir without
run_settings.json is resumed.
"""
import concurrent.futures
import hashlib
import json
import os

from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import label_lists
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.training import distribute
from bert_tf.training.config import RunConfig

SETTINGS_FILE = "run_settings.json"
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"


def training_settings(run, strategy):
    """The settings of RunConfig `run` under `strategy` that a resumed run must share (lengths, batch size, replicas,
    workers, accumulation)."""
    lengths = run.sequence_lengths
    optional = {name: getattr(run, name) for name in OPTIONAL_SETTINGS
                if getattr(run, name) != getattr(RunConfig, name)}
    return {"max_seq_length": run.max_seq_length, "train_batch_size": run.train_batch_size,
            "replicas": strategy.num_replicas_in_sync, "workers": distribute.worker_position(strategy)[1],
            "gradient_accumulation_steps": run.gradient_accumulation_steps,
            "pad_to_max_seq_length": lengths.pad, "seq_length_multiple": lengths.multiple,
            "group_by_length": lengths.group_by_length, **optional}


# The settings beyond the original's flags that change a run's result: recorded where not at RunConfig's default, and
# a run recorded without one ran at its default (`check`), so adding or dropping one is a difference like any other.
OPTIONAL_SETTINGS = ("eval_every_steps", "best_metric", "best_metric_mode", "early_stopping_patience",
                     "early_stopping_min_delta", "class_weights", "multi_label", "label_separator", "tune_thresholds",
                     "layerwise_lr_decay", "freeze_layers", "deterministic")


FINGERPRINT_SAMPLE_BYTES = 64 << 10  # a local file is hashed by its size and its first, middle and last this many bytes
_THREADS = 16  # `fingerprint` reads this many files at a time (on a URL: a request for its metadata)


def fingerprint(paths):
    """A SHA-256 hex digest of the files `paths`, in any order, each by its size and first, middle and last
    FINGERPRINT_SAMPLE_BYTES (a URL's by size and modification time, so a copy is other data)."""
    digest = hashlib.sha256()
    with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
        for part in pool.map(_file_print, sorted(paths)):
            digest.update(part)
    return digest.hexdigest()


def _file_print(path):
    """What `fingerprint` digests of one file (bytes)."""
    if fileio.is_url(path):
        return "{} {}\n".format(*fileio.stat(path)).encode()  # one request
    size, sample = fileio.stat(path)[0], FINGERPRINT_SAMPLE_BYTES
    offsets = [(0, size)] if size <= 3 * sample else [(0, sample), ((size - sample) // 2, sample),
                                                      (size - sample, sample)]
    parts = [f"{size}\n".encode()]
    with fileio.open_file(path, "rb", name="") as f:
        for offset, length in offsets:
            f.seek(offset)
            parts.append(f.read(length))
    return b"".join(parts)


def check_workers(strategy, settings):
    """Under several workers: ValueError on every worker, naming each that differs, unless every worker's `settings` are
    worker 0's (one all-gather of two digests)."""
    _, num_workers = distribute.worker_position(strategy)
    if num_workers == 1:
        return
    others = {name: value for name, value in settings.items() if name != "data_fingerprint"}
    digests = [settings["data_fingerprint"], hashlib.sha256(json.dumps(others, sort_keys=True).encode()).hexdigest()]
    values = distribute.worker_values(strategy, [int(digest[:15], 16) for digest in digests])  # 60 bits each
    problems = []
    for worker, (data, flags) in sorted(values.items()):
        if data != values[0][0]:
            problems.append(f"worker {worker} of {num_workers} trains on other data than worker 0 (data_fingerprint "
                            f"{data:015x}... vs {values[0][0]:015x}...)")
        elif flags != values[0][1]:
            problems.append(f"worker {worker} of {num_workers} runs with other settings than worker 0")
    if problems:
        raise ValueError(f"{'; '.join(problems)}: every worker must train on the same data (its input files, "
                         f"--input_file or --data_dir, the same on every host) with the same flags.")


def _differences(previous, current):
    """'name previous -> current' for each name both dicts hold with different values."""
    return [f"{name} {previous[name]} -> {value}" for name, value in current.items()
            if name in previous and previous[name] != value]


def check(output_dir, start_over, config=None, settings=None):
    """Refuses to resume output_dir's run with another bert_config or other `settings` (a dict) unless `start_over`; a
    no-op without a checkpoint."""
    if start_over or not checkpoints.latest_checkpoint(output_dir):
        return
    config_path, settings_path = os.path.join(output_dir, CONFIG_FILE), os.path.join(output_dir, SETTINGS_FILE)
    if config is not None and fileio.exists(config_path):
        differences = _differences(BertConfig.from_json_file(config_path).to_dict(), config.to_dict())
        if differences:
            raise ValueError(f"{output_dir} holds checkpoints of a run with another bert_config "
                             f"({'; '.join(differences)}): it would resume that run. Use another --output_dir, or "
                             f"--start_over to delete its checkpoints.")
    if settings and fileio.exists(settings_path):
        defaults = {name: getattr(RunConfig, name) for name in OPTIONAL_SETTINGS}
        try:
            recorded = json.loads(fileio.read_text(settings_path, "Run settings"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{settings_path}: not valid JSON ({e}); delete it or use --start_over.") from None
        differences = _differences({**defaults, **recorded}, {**defaults, **settings})
        if differences:
            raise ValueError(f"{output_dir} holds checkpoints of a run with other settings "
                             f"({'; '.join(differences)}; recorded in {settings_path}): resuming it would restore its "
                             f"input position into another input pipeline. Rerun with its settings, use another "
                             f"--output_dir, or --start_over to delete its checkpoints.")


def delete_checkpoints(directory):
    """--start_over: deletes `directory`'s checkpoints (each worker its own `Trainer.work_dir`)."""
    for name in checkpoints.checkpoint_files(directory):
        logging.info("--start_over: deleting %s", name)
        fileio.remove_tree(name)


def record(work_dir, config, settings):
    """Once every input is checked, records each worker's `settings` in its work_dir and the chief's `config` (a
    BertConfig; None on other workers)."""
    if config is not None:
        config.to_json_file(os.path.join(work_dir, CONFIG_FILE))
    fileio.write_text_atomically(os.path.join(work_dir, SETTINGS_FILE),
                                 json.dumps(settings, indent=2, sort_keys=True) + "\n")


def record_model(output_dir, model, task, labels, vocab_file, do_lower_case, max_seq_length, settings=None):
    """Writes model_metadata.json (`task_models.metadata`, with the task's answer `settings`) and a copy of
    `vocab_file` into the training run's `output_dir`."""
    vocab_copy = os.path.join(output_dir, VOCAB_FILE)
    if os.path.normpath(vocab_file) != os.path.normpath(vocab_copy):
        fileio.copy_file(vocab_file, vocab_copy)
    meta = {**task_models.metadata(task, model, labels, do_lower_case, max_seq_length), **(settings or {})}
    _write_model_record(output_dir, meta)


def _write_model_record(output_dir, meta):
    fileio.write_text_atomically(os.path.join(output_dir, task_models.METADATA_FILE),
                                 json.dumps(meta, indent=2, sort_keys=True))


def recorded_labels(output_dir):
    """(where, labels) of the labels of the model in `output_dir`: its training run's model_metadata.json, else a
    label_list.txt put there by hand (one label per line: a checkpoint trained elsewhere), else (the record, None)."""
    meta = checkpoints.run_record(output_dir)
    if meta and meta.get("labels"):
        return os.path.join(output_dir, task_models.METADATA_FILE), meta["labels"]
    path, labels = label_lists.saved(output_dir)
    return (path, labels) if labels is not None else (os.path.join(output_dir, task_models.METADATA_FILE), None)


def recorded_thresholds(output_dir, labels):
    """A multi-label model's thresholds, one per label of `labels`, as the training run in `output_dir` recorded
    them, or None. ValueError naming the file unless they are numbers in [0, 1] for those labels."""
    meta = checkpoints.run_record(output_dir)
    if not meta or meta.get("thresholds") is None:
        return None
    thresholds, path = meta["thresholds"], os.path.join(output_dir, task_models.METADATA_FILE)
    if meta.get("labels") != list(labels) or len(thresholds) != len(labels) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 1 for t in thresholds):
        raise ValueError(f"{path}: expected a threshold in [0, 1] for each label of {list(labels)}, got "
                         f"{thresholds!r} for {meta.get('labels')!r}.")
    return [float(t) for t in thresholds]


def record_thresholds(output_dir, thresholds):
    """Replaces the thresholds the training run in `output_dir` recorded (a multi-label model's, tuned on dev);
    without its model_metadata.json (a run that did not train here), logs that they stay this run's."""
    meta = checkpoints.run_record(output_dir)
    if meta is None:
        logging.info("%s has no %s (its model was trained elsewhere): the tuned thresholds are not recorded.",
                     output_dir, task_models.METADATA_FILE)
        return
    _write_model_record(output_dir, {**meta, "thresholds": [float(t) for t in thresholds]})
