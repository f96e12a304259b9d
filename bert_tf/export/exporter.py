"""One export call for every format: `export(ExportRequest(...), model=... | init_checkpoint=...)`.

    from bert_tf.export import exporter
    exporter.export(exporter.ExportRequest(task="classifier", export_dir="gs://bucket/models/mrpc",
                                           label_list="0,1", max_seq_length=128),
                    init_checkpoint="gs://bucket/mrpc_output", vocab_file="gs://bucket/bert/vocab.txt")

| format    | writes `export_dir/<version>/`                   | tasks                             | module        |
|-----------|--------------------------------------------------|-----------------------------------|---------------|
| `serving` | a SavedModel with tensor and raw-text signatures | every task, preprocessing         | `saved_model` |
| `tfhub`   | the TF Hub BERT formats of Model Garden's export | encoder, masked_lm, preprocessing | `tfhub`       |
| `litert`  | model.tflite                                     | every task                        | `portable`    |
| `onnx`    | model.onnx                                       | every task                        | `portable`    |

Every task: those of `task_models.REGISTRY`; a task's model, inputs, outputs, label output and whether text applies
are its `task_models.TaskSpec`'s, and the writers read them there.

(`preprocessing` with `serving` writes TF Hub's preprocessing model too.) Every format gets
`assets.extra/export_metadata.json` (task, format, casing, max_seq_length, labels, bert_config and the format's
own settings).

The request is checked as a whole before anything loads (`ExportRequest.check`: a format or task that does not
exist, an option given for a format or task it does not apply to, labels for a task without labels or that
disagree with --num_labels); the version is taken next (`version_dir`, which every export goes through:
versions only increase and a version directory is never written twice), then the model is loaded
(`checkpoints.load_pretrained`, any format it reads) unless given. Every path may be a URL (gs://): the version is
written into a staging directory beside it and committed as a whole
(`fileio.staged_directory`, its saved_model.pb / model.tflite / model.onnx last, so that TF Serving never loads a
half-written version); what a tool writes only to a local disk (tf2onnx, the assets' sources) is staged in a local
scratch directory.
"""
import dataclasses
import json
import os

from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import label_lists
from bert_tf.export import portable, saved_model, tfhub
from bert_tf.model import heads, task_models
from bert_tf.text import in_graph

FORMATS = ("serving", "tfhub", *portable.FORMATS)
PREPROCESSING = "preprocessing"  # the TF Hub preprocessing model (no weights): a task of "serving" and "tfhub"
# The file of each format that is committed last: a reader takes a version only with it.
KEY_FILES = {"serving": "saved_model.pb", "tfhub": "saved_model.pb", **portable.FILES}
# Options that apply to some formats or tasks only: the request refuses them elsewhere when given (not None).
SERVING_OPTIONS = ("text_ops", "use_xla", "pad_to_max_seq_length", "length_multiple")
PORTABLE_OPTIONS = ("quantization",)
TEXT_OPTIONS = ("max_texts_per_request", "max_request_bytes")  # where text goes in: "serving" and preprocessing
TASK_OPTIONS = ("pooling", "normalize")  # those of a task's spec (`TaskSpec.options`)


def format_tasks(fmt):
    """The tasks format `fmt` exports: TF Hub's own, or every registered task (`task_models.REGISTRY`), with the
    preprocessing model for "serving"."""
    if fmt == "tfhub":
        return tfhub.TASKS
    return (*task_models.REGISTRY, PREPROCESSING) if fmt == "serving" else tuple(task_models.REGISTRY)


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how; the flags of run_scripts/export_saved_model.py under their names.

    Options left None are not given: they take their defaults (text_ops "tf_text", use_xla False,
    pad_to_max_seq_length the spec's `keeps_max_seq_length` (SQuAD's True, else False), length_multiple 32 with
    use_xla else 1, quantization "none", the embedding's pooling "mean" and normalize True, the text limits
    `in_graph.TextLimits`'s), and a given one that does not apply to the format or task is an error.
    """
    task: str
    export_dir: str
    format: str = "serving"
    version: int | None = None  # None: the next free version (`version_dir`)
    min_version: int = 1  # the lowest version that None takes (the runner's: the global step)
    max_seq_length: int = 128
    num_labels: int | None = None  # a labelled task's (classifier, ner): the head's label count (or label_list's)
    label_list: object = None  # a labelled task's label names (a list, "a,b,c" or a file, `label_lists.resolve`)
    # format "serving" (bert_tf.export.saved_model)
    text_ops: str | None = None
    use_xla: bool | None = None
    pad_to_max_seq_length: bool | None = None
    length_multiple: int | None = None
    # every text signature: format "serving", and the preprocessing model (`text_limits`)
    max_texts_per_request: int | None = None
    max_request_bytes: int | None = None
    # formats "litert", "onnx" (bert_tf.export.portable)
    quantization: str | None = None
    # a task with these options (`TaskSpec.options`: embedding)
    pooling: str | None = None
    normalize: bool | None = None

    def check(self):
        """Raises ValueError for anything in the request that cannot be exported (the module docstring)."""
        if self.format not in FORMATS:
            raise ValueError(f"Unknown format {self.format!r}; expected one of {', '.join(FORMATS)}.")
        self._check_options()
        self._check_task()
        if (self.version is not None and int(self.version) < 1) or int(self.min_version) < 1:
            raise ValueError(f"version and min_version must be positive integers, got {self.version} and "
                             f"{self.min_version}.")
        if self.text_ops is not None and self.text_ops not in saved_model.TEXT_OPS:
            raise ValueError(f"text_ops must be one of {saved_model.TEXT_OPS}, got {self.text_ops!r}.")
        if self.quantization is not None and self.quantization not in portable.QUANTIZATIONS:
            raise ValueError(f"Unknown quantization {self.quantization!r}; expected one of "
                             f"{', '.join(portable.QUANTIZATIONS)}.")
        if self.pooling is not None and self.pooling not in heads.POOLINGS:
            raise ValueError(f"Unknown pooling {self.pooling!r}; expected one of {', '.join(heads.POOLINGS)}.")
        self.text_limits  # noqa: B018 (checks them)
        if self.task == PREPROCESSING and int(self.max_seq_length) < 3:
            raise ValueError(f"The preprocessing export needs max_seq_length >= 3 (pairs), got "
                             f"{self.max_seq_length}.")
        self.given_labels()

    def _check_task(self):
        if self.task == PREPROCESSING and self.format in portable.FORMATS:
            raise ValueError(f"--format={self.format} has no preprocessing model: TensorFlow Text's tokenizer ops "
                             f"have no {self.format} form; tokenize with the original FullTokenizer and feed the "
                             f"model's tensor signature.")
        if self.format == "tfhub" and self.task not in tfhub.TASKS:
            raise ValueError(f"--format=tfhub exports the encoder (--task=encoder), the encoder with its masked-LM "
                             f"head (--task=masked_lm) or the preprocessing model (--task=preprocessing), not "
                             f"{self.task!r}.")
        if self.task not in format_tasks(self.format):
            raise ValueError(f"Unknown task {self.task!r}; expected one of {', '.join(format_tasks(self.format))}.")

    def _check_options(self):
        """Options given for a format or task they do not apply to are errors."""
        options = self.spec.options if self.spec and self.format != "tfhub" else ()
        with_options = "/".join(name for name, spec in task_models.REGISTRY.items() if spec.options)
        wrong = {f"--task={with_options} (--format=serving, litert or onnx)": [
                     name for name in TASK_OPTIONS if getattr(self, name) is not None and name not in options],
                 "the TF Serving export of a model (--format=serving)": [
                     name for name in SERVING_OPTIONS if getattr(self, name) is not None
                     and (self.format != "serving" or self.task == PREPROCESSING)],
                 "--format=litert or onnx": [name for name in PORTABLE_OPTIONS if getattr(self, name) is not None
                                             and self.format not in portable.FORMATS],
                 "the text signatures (--format=serving, --task=preprocessing)": [
                     name for name in TEXT_OPTIONS if getattr(self, name) is not None
                     and self.format != "serving" and self.task != PREPROCESSING]}
        for where, names in wrong.items():
            if names:
                given = " and ".join(f"--{name}" for name in names)
                raise ValueError(f"{given} {'applies' if len(names) == 1 else 'apply'} to {where}, not to "
                                 f"--format={self.format} --task={self.task}.")

    @property
    def spec(self):
        """The task's `task_models.TaskSpec` (None for the preprocessing model)."""
        return task_models.REGISTRY.get(self.task)

    @property
    def text_limits(self):
        """The bounds of a request to the text signatures (`in_graph.TextLimits`): those given, else its
        defaults; ValueError if not positive."""
        return in_graph.TextLimits(**{name: getattr(self, name) for name in TEXT_OPTIONS
                                      if getattr(self, name) is not None})

    @property
    def pad(self):
        """Whether the text signatures pack to max_seq_length: pad_to_max_seq_length, by default the spec's
        `keeps_max_seq_length`."""
        given = self.pad_to_max_seq_length
        return bool(self.spec.keeps_max_seq_length if given is None else given)

    def given_labels(self):
        """(labels, num_labels) of num_labels and label_list (as `label_lists.resolve` reads it): the list's length
        is the label count; a num_labels that disagrees with it, or either for a task without labels, is a
        ValueError."""
        labels = label_lists.resolve(self.label_list)
        if (labels is not None or self.num_labels is not None) and not (self.spec and self.spec.labelled):
            labelled = " and ".join(name for name, spec in task_models.REGISTRY.items() if spec.labelled)
            raise ValueError(f"--num_labels / --label_list do not apply to the {self.task} task (only to "
                             f"{labelled}).")
        if labels is None:
            return None, self.num_labels
        if self.num_labels and self.num_labels != len(labels):
            raise ValueError(f"--num_labels={self.num_labels} but the label list has {len(labels)} labels.")
        return labels, len(labels)

    @property
    def options(self):
        """The task model's own options (`TaskSpec.options`, e.g. the embedding's pooling and normalize)."""
        return {name: getattr(self, name) for name in self.spec.options}


def version_dir(export_dir, version=None, min_version=1):
    """`export_dir/<version>` for a new export: versions only increase, and a version directory is never written
    twice (TF Serving loads a version number once and serves the highest). A version is taken by a numbered entry
    of export_dir, complete or not (a killed export's directory without its key file: its number is skipped, never
    reused), or by an export's staging directory (`.<N>.tmp-...`), once the stale temporaries are removed
    (`fileio.remove_stale_temporaries`). `version` None: the next free version, above every taken one and at least
    `min_version`; a given `version` that is taken is refused (FileExistsError naming --version)."""
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


def export(request, model=None, *, vocab_file=None, do_lower_case=None, init_checkpoint=None,
           bert_config_file=None):
    """Writes `request.export_dir/<version>/` in `request.format` and returns its path (module docstring).

    Args:
      request: ExportRequest.
      model: the built Keras task model of `request.task` (its `TaskSpec.describes` it), weights loaded; None: load
        `init_checkpoint` (any format `checkpoints.load_pretrained` reads; a TF Hub model needs no
        bert_config_file, vocab_file or do_lower_case). The preprocessing model needs neither.
      vocab_file, do_lower_case: the tokenization the model was trained with (do_lower_case None: the model's own,
        or True).
    """
    request.check()
    labels, num_labels = request.given_labels()
    target = version_dir(request.export_dir, request.version, request.min_version)  # fail before the slow part
    if request.task == PREPROCESSING:
        if not vocab_file or not fileio.isfile(vocab_file):
            raise FileNotFoundError(f"--vocab_file {vocab_file!r} does not exist.")
    elif model is None:
        loaded = _load(request, num_labels, init_checkpoint, bert_config_file, vocab_file, do_lower_case)
        model, vocab_file, do_lower_case = loaded.model, loaded.files.vocab_file, loaded.files.do_lower_case
    elif not vocab_file:
        raise ValueError("An export needs the model's vocab_file.")
    elif not request.spec.describes(model):
        kwargs = request.spec.kwargs
        given = {key: getattr(model, key, None) for key in kwargs}
        raise ValueError(f"The {request.task} export needs a {request.spec.model.__name__}"
                         f"{f' with {kwargs}' if kwargs else ''}, got a {type(model).__name__}"
                         f"{f' with {given}' if kwargs else ''}.")
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    meta = {"task": request.task, "format": request.format, "do_lower_case": do_lower_case,
            "max_seq_length": int(request.max_seq_length)}
    if model is not None:
        labels = _head_labels(model, request.spec, labels)
        meta.update(bert_config=task_models.encoder_of(model).config.to_dict(),
                    **{name: getattr(model, name) for name in request.spec.options})
    meta["labels"] = labels
    tf_hub = request.format == "tfhub" or request.task == PREPROCESSING  # TF Hub's preprocessing in either format
    writer = tfhub.write if tf_hub else saved_model.write if request.format == "serving" else portable.write
    with fileio.staged_directory(target, key=KEY_FILES[request.format]) as out, fileio.local_directory() as local:
        sources = Sources(os.path.join(local, "vocab.txt"), do_lower_case, labels, local)
        fileio.copy_file(vocab_file, sources.vocab_file)
        meta.update(writer(model, request, sources, out))
        fileio.write_text_atomically(os.path.join(out, "assets.extra", "export_metadata.json"),
                                     json.dumps(meta, indent=2, sort_keys=True))
    logging.info("Exported the %s model (format %s) to %s", request.task, request.format, target)
    return target


@dataclasses.dataclass
class Sources:
    """What a format's writer (`saved_model.write`, `tfhub.write`, `portable.write`) exports besides the model:
    a local copy of the vocabulary named vocab.txt (a SavedModel asset's source), the casing, the label names
    (None without labels), and a local scratch directory for other sources (`labels_file`)."""
    vocab_file: str
    do_lower_case: bool
    labels: list | None
    local_dir: str

    def labels_file(self):
        """A local labels.txt of `labels` (one per line), the labels asset's source; returns its path."""
        path = os.path.join(self.local_dir, "labels.txt")
        fileio.write_text_atomically(path, "".join(label + "\n" for label in self.labels))
        return path


def _load(request, num_labels, init_checkpoint, bert_config_file, vocab_file, do_lower_case):
    """The task model of `request` with `init_checkpoint` loaded (`checkpoints.load_pretrained`), after checking
    that the config fits the vocabulary and max_seq_length. ValueError naming the task if the checkpoint lacks the
    task's head, its encoder does not fit, or its head has another label count. Returns checkpoints.Pretrained."""
    task = request.task
    if not init_checkpoint:
        raise ValueError(f"The {task} export needs --init_checkpoint.")
    loaded = checkpoints.load_pretrained(init_checkpoint=init_checkpoint, bert_config_file=bert_config_file,
                                         vocab_file=vocab_file, do_lower_case=do_lower_case,
                                         max_seq_length=request.max_seq_length)
    try:
        loaded.build_model(lambda config, restored: request.spec.build(config, num_labels, restored,
                                                                        **request.options), request.spec.head_names)
    except ValueError as e:
        given = f" (--num_labels / --label_list gave {num_labels})" if num_labels else ""
        raise ValueError(f"Cannot load {init_checkpoint} into the {task} model{given}: {e}") from e
    return loaded


def _head_labels(model, spec, labels):
    """The label names an export of `model` (the model of `spec`) gives its predictions: `labels` or "0".."L-1"
    for a labelled head, else None. Raises ValueError for labels that do not fit the head."""
    if not spec.labelled:
        return None
    labels = labels or [str(i) for i in range(model.num_labels)]
    if len(labels) != model.num_labels:
        raise ValueError(f"label_list has {len(labels)} labels but the model's head has {model.num_labels}.")
    return labels
