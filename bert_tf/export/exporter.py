"""One export call for every format (docs/serving.md): `export(task, export_dir, model | init_checkpoint=...,
format=..., **options)` writes `export_dir/<version>/` with the writer of `format`: `saved_model.write` ("serving"),
`tfhub.write_*` ("tfhub": the encoder, masked_lm and preprocessing) or `portable.write` ("litert", "onnx").

- Writers take by name, after `out`: `model`, `spec`, `vocab_file` and `labels_file` (local copies), `do_lower_case`,
  `max_seq_length` and `labels` (None without). `options`: the writer's keyword-only arguments and, where the export
  loads the model, `TaskSpec.options`; any other is a TypeError, raised before anything loads.
- A version is staged and committed whole (`fileio.staged_directory`), so TF Serving never loads a half-written one.
- assets.extra/export_metadata.json records the task, format, casing, max_seq_length, labels, bert_config and settings;
  an init_checkpoint that is a training run's output_dir gives what the run recorded where not given.
"""
import functools
import inspect
import json
import os

from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import label_lists
from bert_tf.export import portable, saved_model, tfhub
from bert_tf.model import task_models

FORMATS = ("serving", "tfhub", *portable.FORMATS)
PREPROCESSING = "preprocessing"  # the TF Hub preprocessing model (no weights): a task of "serving" and "tfhub"


def format_tasks(fmt):
    if fmt == "tfhub":
        return tfhub.TASKS
    return (*task_models.REGISTRY, PREPROCESSING) if fmt == "serving" else tuple(task_models.REGISTRY)


def writer(task, fmt):
    """The function writing `task` in format `fmt`: (out, its inputs by name, **options) -> its settings for the
    metadata."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    if task == PREPROCESSING and fmt in portable.FORMATS:
        raise ValueError(f"--format={fmt} has no preprocessing model: TensorFlow Text's tokenizer ops have no {fmt} "
                         f"form; tokenize with the original FullTokenizer and feed the model's tensor signature.")
    if fmt == "tfhub" and task not in tfhub.TASKS:
        raise ValueError(f"--format=tfhub exports the encoder (--task=encoder), the encoder with its masked-LM head "
                         f"(--task=masked_lm) or the preprocessing model (--task=preprocessing), not {task!r}.")
    if task not in format_tasks(fmt):
        raise ValueError(f"Unknown task {task!r}; expected one of {', '.join(format_tasks(fmt))}.")
    if task == PREPROCESSING:
        return tfhub.write_preprocessing
    if fmt in portable.FORMATS:
        return functools.partial(portable.write, fmt)
    return tfhub.write_encoder if fmt == "tfhub" else saved_model.write


def split_options(task, fmt, options, loads_model=True):
    """(the task model's options, the writer's) of the export `options`; TypeError naming any other."""
    spec = task_models.REGISTRY.get(task)
    model_options = spec.options if spec and loads_model and fmt != "tfhub" else ()
    parameters = inspect.signature(writer(task, fmt)).parameters.values()
    takes = [*model_options, *(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)]
    unknown = [name for name in options if name not in takes]
    if unknown:
        raise TypeError(f"{' and '.join('--' + name for name in unknown)} {'does' if len(unknown) == 1 else 'do'} "
                        f"not apply to --format={fmt} --task={task} (its options: "
                        f"{', '.join('--' + name for name in takes) or 'none'}).")
    return ({name: value for name, value in options.items() if name in model_options},
            {name: value for name, value in options.items() if name not in model_options})


def version_dir(export_dir, version=None, min_version=1):
    """`export_dir/<version>` for a new export. Versions only increase and none is written twice (TF Serving loads a
    number once): a numbered entry or a live staging directory takes its number. `version` None: the next free one >=
    `min_version`; a taken one: FileExistsError."""
    if (version is not None and int(version) < 1) or int(min_version) < 1:
        raise ValueError(f"version and min_version must be positive integers, got {version} and {min_version}.")
    fileio.remove_stale_temporaries(export_dir)
    names = fileio.listdir(export_dir) if fileio.isdir(export_dir) else []
    taken = {int(n) for n in (name.split(fileio.TEMP_MARK)[0].lstrip(".") for name in names)
             if n.isascii() and n.isdigit()}
    free = max(int(min_version), max(taken, default=0) + 1)
    if version is None:
        logging.info("Exporting version %d to %s (the next free version, at least %d)", free, export_dir,
                     min_version)
        version = free
    elif int(version) in taken:
        raise FileExistsError(f"{os.path.join(export_dir, str(int(version)))} already exists or is being written "
                              f"(TF Serving serves a version number once): pass a new --version, or leave --version "
                              f"out to take the next free one ({free}).")
    return os.path.join(export_dir, str(int(version)))


def export(task, export_dir, model=None, *, format="serving", version=None, min_version=1, max_seq_length=128,
           num_labels=None, label_list=None, vocab_file=None, do_lower_case=None, init_checkpoint=None,
           bert_config_file=None, **options):
    """Writes `export_dir/<version>/` of `task` in `format`; -> its path. `model`: the task model, weights loaded (None:
    load `init_checkpoint`). `label_list`: a list, "a,b,c" or a file. `do_lower_case` None: the model's, or True."""
    spec = task_models.REGISTRY.get(task)
    write = writer(task, format)
    model_options, options = split_options(task, format, options, loads_model=model is None)
    recorded = checkpoints.run_record(init_checkpoint) if model is None and init_checkpoint else None
    if recorded:  # a training run's output_dir: what it trained gives what is not given
        label_list, model_options, options = _run_defaults(task, format, recorded, init_checkpoint, label_list,
                                                           num_labels, model_options, options)
    labels = label_lists.resolve(label_list)
    if (labels is not None or num_labels is not None) and not (spec and spec.labelled):
        labelled = " and ".join(name for name, spec in task_models.REGISTRY.items() if spec.labelled)
        raise ValueError(f"--num_labels / --label_list do not apply to the {task} task (only to {labelled}).")
    if labels is not None:
        if num_labels and num_labels != len(labels):
            raise ValueError(f"--num_labels={num_labels} but the label list has {len(labels)} labels.")
        num_labels = len(labels)
    target = version_dir(export_dir, version, min_version)  # fail before the slow part
    if task == PREPROCESSING:
        if not vocab_file or not fileio.isfile(vocab_file):
            raise FileNotFoundError(f"--vocab_file {vocab_file!r} does not exist.")
    elif model is None:
        if not init_checkpoint:
            raise ValueError(f"The {task} export needs --init_checkpoint.")
        loaded = checkpoints.load_pretrained(init_checkpoint=init_checkpoint, bert_config_file=bert_config_file,
                                             vocab_file=vocab_file, do_lower_case=do_lower_case,
                                             max_seq_length=max_seq_length)
        try:
            model = loaded.build_model(
                lambda config, restored: spec.build(config, num_labels, restored, **model_options),
                spec.head_names)
        except ValueError as e:
            given = f" (--num_labels / --label_list gave {num_labels})" if num_labels else ""
            raise ValueError(f"Cannot load {init_checkpoint} into the {task} model{given}: {e}") from e
        vocab_file, do_lower_case = loaded.vocab_file, loaded.do_lower_case
    elif not vocab_file:
        raise ValueError("An export needs the model's vocab_file.")
    elif not spec.describes(model):
        given = {key: getattr(model, key, None) for key in spec.kwargs}
        raise ValueError(f"The {task} export needs a {spec.model.__name__}"
                         f"{f' with {spec.kwargs}' if spec.kwargs else ''}, got a {type(model).__name__}"
                         f"{f' with {given}' if spec.kwargs else ''}.")
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    if model is not None and spec.labelled:  # a labelled head's labels: "0".."L-1" unless given
        labels = labels or [str(i) for i in range(model.num_labels)]
        if len(labels) != model.num_labels:
            raise ValueError(f"label_list has {len(labels)} labels but the model's head has {model.num_labels}.")
    meta = {"format": format, **task_models.metadata(task, model, labels, do_lower_case, max_seq_length)}
    key = portable.FILES.get(format, "saved_model.pb")  # committed last: a reader waits for it
    with fileio.staged_directory(target, key=key) as out, fileio.local_directory() as local:
        sources = dict(model=model, spec=spec, vocab_file=os.path.join(local, "vocab.txt"), do_lower_case=do_lower_case,
                       max_seq_length=int(max_seq_length), labels=labels,
                       labels_file=os.path.join(local, "labels.txt") if labels is not None else None)
        fileio.copy_file(vocab_file, sources["vocab_file"])
        if labels is not None:
            label_lists.write(sources["labels_file"], labels)
        reads = inspect.signature(write).parameters
        meta.update(write(out, **{name: value for name, value in sources.items() if name in reads}, **options))
        fileio.write_text_atomically(os.path.join(out, "assets.extra", "export_metadata.json"),
                                     json.dumps(meta, indent=2, sort_keys=True))
    logging.info("Exported the %s model (format %s) to %s", task, format, target)
    return target


def _run_defaults(task, fmt, recorded, init_checkpoint, label_list, num_labels, model_options, options):
    """(label_list, model options, writer options) from the run that recorded `recorded`: its labels, thresholds and
    text windows where not given. ValueError for another task of its model (a multi-label run as `classifier`)."""
    spec, trained = task_models.REGISTRY[task], recorded["task"]
    if trained != task:
        if trained in task_models.REGISTRY and task_models.REGISTRY[trained].model is spec.model:
            raise ValueError(f"{init_checkpoint} holds a {trained} model (its run's "
                             f"{task_models.METADATA_FILE}): export it as --task={trained}, not {task}.")
        return label_list, model_options, options
    if label_list is None and num_labels is None:
        label_list = recorded.get("labels")
    model_options = {**{name: recorded[name] for name in spec.options if name in recorded}, **model_options}
    takes = inspect.signature(writer(task, fmt)).parameters
    options = {**{name: recorded[name] for name in ("doc_stride", "window_pooling") if name in recorded
                  and name in takes}, **options}
    return label_list, model_options, options
