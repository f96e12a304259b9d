"""One export call for every format: `export(ExportRequest(...), model=... | init_checkpoint=...)`.

    from bert_tf.export import exporter
    exporter.export(exporter.ExportRequest(task="classifier", export_dir="gs://bucket/models/mrpc", version=1,
                                           label_list="0,1", max_seq_length=128),
                    init_checkpoint="gs://bucket/mrpc/model.ckpt-343", vocab_file="gs://bucket/bert/vocab.txt")

| format    | writes `export_dir/<version>/`                   | tasks                              | module        |
|-----------|--------------------------------------------------|------------------------------------|---------------|
| `serving` | a SavedModel with tensor and raw-text signatures | `saved_model.TASKS`, preprocessing | `saved_model` |
| `tfhub`   | the TF Hub BERT formats of Model Garden's export | encoder, masked_lm, preprocessing  | `tfhub`       |
| `litert`  | model.tflite                                     | `saved_model.TASKS`                | `portable`    |
| `onnx`    | model.onnx                                       | `saved_model.TASKS`                | `portable`    |

(`preprocessing` with `serving` writes TF Hub's preprocessing model too.) Every format gets
`assets.extra/export_metadata.json` (task, format, casing, max_seq_length, labels, bert_config and the format's
own settings).

The request is checked as a whole before anything loads (`ExportRequest.check`: a format or task that does not
exist, an option given for a format or task it does not apply to, labels for a task without labels or that
disagree with --num_labels); the version directory is checked next (an existing one is refused unless
`overwrite`), then the model is loaded (`checkpoints.load_pretrained`, any format it reads) unless given. Every
path may be a URL (gs://): the version is written into a staging directory beside it and committed as a whole
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
from bert_tf.model import task_models

FORMATS = ("serving", "tfhub", *portable.FORMATS)
# The tasks each format exports; "preprocessing" is the TF Hub preprocessing model (no weights).
FORMAT_TASKS = {"serving": (*saved_model.TASKS, "preprocessing"), "tfhub": tfhub.TASKS,
                **dict.fromkeys(portable.FORMATS, saved_model.TASKS)}
# The file of each format that is committed last: a reader takes a version only with it.
KEY_FILES = {"serving": "saved_model.pb", "tfhub": "saved_model.pb", **portable.FILES}
# Options that apply to some formats or tasks only: the request refuses them elsewhere when given (not None).
SERVING_OPTIONS = ("text_ops", "use_xla", "pad_to_max_seq_length", "length_multiple")
PORTABLE_OPTIONS = ("quantization",)
EMBEDDING_OPTIONS = ("pooling", "normalize")
POOLINGS = ("mean", "cls")


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how; the flags of run_scripts/export_saved_model.py under their names.

    Options left None are not given: they take their defaults (text_ops "tf_text", use_xla and
    pad_to_max_seq_length False, length_multiple 32 with use_xla else 1, quantization "none", the embedding's
    pooling "mean" and normalize True), and a given one that does not apply to the format or task is an error.
    """
    task: str
    export_dir: str
    format: str = "serving"
    version: int = 1
    overwrite: bool = False
    max_seq_length: int = 128
    num_labels: int | None = None  # classifier / ner: the head's label count (a label_list gives it)
    label_list: object = None  # classifier / ner: label names (a list, "a,b,c" or a file, `label_lists.resolve`)
    # format "serving" (bert_tf.export.saved_model)
    text_ops: str | None = None
    use_xla: bool | None = None
    pad_to_max_seq_length: bool | None = None
    length_multiple: int | None = None
    # formats "litert", "onnx" (bert_tf.export.portable)
    quantization: str | None = None
    # task "embedding"
    pooling: str | None = None
    normalize: bool | None = None

    def check(self):
        """Raises ValueError for anything in the request that cannot be exported (the module docstring)."""
        if self.format not in FORMATS:
            raise ValueError(f"Unknown format {self.format!r}; expected one of {', '.join(FORMATS)}.")
        self._check_options()
        self._check_task()
        if int(self.version) < 1:
            raise ValueError(f"version must be a positive integer, got {self.version}.")
        if self.text_ops is not None and self.text_ops not in saved_model.TEXT_OPS:
            raise ValueError(f"text_ops must be one of {saved_model.TEXT_OPS}, got {self.text_ops!r}.")
        if self.quantization is not None and self.quantization not in portable.QUANTIZATIONS:
            raise ValueError(f"Unknown quantization {self.quantization!r}; expected one of "
                             f"{', '.join(portable.QUANTIZATIONS)}.")
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling {self.pooling!r}; expected one of {', '.join(POOLINGS)}.")
        if self.task == "preprocessing" and int(self.max_seq_length) < 3:
            raise ValueError(f"The preprocessing export needs max_seq_length >= 3 (pairs), got "
                             f"{self.max_seq_length}.")
        self.given_labels()

    def _check_task(self):
        if self.task == "preprocessing" and self.format in portable.FORMATS:
            raise ValueError(f"--format={self.format} has no preprocessing model: TensorFlow Text's tokenizer ops "
                             f"have no {self.format} form; tokenize with the original FullTokenizer and feed the "
                             f"model's tensor signature.")
        if self.format == "tfhub" and self.task not in tfhub.TASKS:
            raise ValueError(f"--format=tfhub exports the encoder (--task=encoder), the encoder with its masked-LM "
                             f"head (--task=masked_lm) or the preprocessing model (--task=preprocessing), not "
                             f"{self.task!r}.")
        if self.task not in FORMAT_TASKS[self.format]:
            raise ValueError(f"Unknown task {self.task!r}; expected one of {', '.join(FORMAT_TASKS[self.format])}.")

    def _check_options(self):
        """Options given for a format or task they do not apply to are errors."""
        wrong = {"--task=embedding (--format=serving, litert or onnx)": [
                     name for name in EMBEDDING_OPTIONS if getattr(self, name) is not None
                     and (self.task != "embedding" or self.format == "tfhub")],
                 "the TF Serving export of a model (--format=serving)": [
                     name for name in SERVING_OPTIONS if getattr(self, name) is not None
                     and (self.format != "serving" or self.task == "preprocessing")],
                 "--format=litert or onnx": [name for name in PORTABLE_OPTIONS if getattr(self, name) is not None
                                             and self.format not in portable.FORMATS]}
        for where, names in wrong.items():
            if names:
                given = " and ".join(f"--{name}" for name in names)
                raise ValueError(f"{given} {'applies' if len(names) == 1 else 'apply'} to {where}, not to "
                                 f"--format={self.format} --task={self.task}.")

    @property
    def labelled(self):
        """Whether the task's head has labels (classifier, ner)."""
        return self.task in task_models.REGISTRY and task_models.REGISTRY[self.task].labelled

    def given_labels(self):
        """(labels, num_labels) of num_labels and label_list (as `label_lists.resolve` reads it): the list's length
        is the label count; a num_labels that disagrees with it, or either for a task without labels, is a
        ValueError."""
        labels = label_lists.resolve(self.label_list)
        if (labels is not None or self.num_labels is not None) and not self.labelled:
            raise ValueError(f"--num_labels / --label_list do not apply to the {self.task} task (only to "
                             f"classifier and ner).")
        if labels is None:
            return None, self.num_labels
        if self.num_labels and self.num_labels != len(labels):
            raise ValueError(f"--num_labels={self.num_labels} but the label list has {len(labels)} labels.")
        return labels, len(labels)

    @property
    def options(self):
        """The task model's own options (`task_models.build_task_model`): the embedding's pooling and normalize."""
        return {"pooling": self.pooling, "normalize": self.normalize} if self.task == "embedding" else {}


def version_dir(export_dir, version, overwrite=False):
    """`export_dir/<version>`; FileExistsError if it exists and not `overwrite`. What a killed export left in
    export_dir is cleaned up first (`fileio.remove_stale_temporaries`: a commit it had begun is completed), so
    that the answer holds for the export that follows."""
    fileio.remove_stale_temporaries(export_dir)
    final_dir = os.path.join(export_dir, str(int(version)))
    if fileio.exists(final_dir) and not overwrite:
        raise FileExistsError(f"{final_dir} already exists: pass a new --version or --overwrite.")
    return final_dir


def export(request, model=None, *, vocab_file=None, do_lower_case=None, init_checkpoint=None,
           bert_config_file=None):
    """Writes `request.export_dir/<version>/` in `request.format` and returns its path (module docstring).

    Args:
      request: ExportRequest.
      model: the built Keras task model of `request.task` (`task_models.REGISTRY`), weights loaded; None: load
        `init_checkpoint` (any format `checkpoints.load_pretrained` reads; a TF Hub model needs no
        bert_config_file, vocab_file or do_lower_case). The preprocessing model needs neither.
      vocab_file, do_lower_case: the tokenization the model was trained with (do_lower_case None: the model's own,
        or True).
    """
    request.check()
    labels, num_labels = request.given_labels()
    target = version_dir(request.export_dir, request.version, request.overwrite)  # fail before the slow part
    if request.task == "preprocessing":
        if not vocab_file or not fileio.isfile(vocab_file):
            raise FileNotFoundError(f"--vocab_file {vocab_file!r} does not exist.")
    elif model is None:
        loaded = _load(request, num_labels, init_checkpoint, bert_config_file, vocab_file, do_lower_case)
        model, vocab_file, do_lower_case = loaded.model, loaded.files.vocab_file, loaded.files.do_lower_case
    elif not vocab_file:
        raise ValueError("An export needs the model's vocab_file.")
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    labels = _head_labels(model, request.task, labels)
    meta = {"task": request.task, "format": request.format, "do_lower_case": do_lower_case,
            "max_seq_length": int(request.max_seq_length), "labels": labels}
    if model is not None:
        meta.update(bert_config=getattr(model, "bert", model).config.to_dict(),
                    **({"pooling": model.pooling, "normalize": model.normalize} if request.task == "embedding" else {}))
    tf_hub = request.format == "tfhub" or request.task == "preprocessing"  # TF Hub's preprocessing in either format
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
        loaded.build_model(lambda config, restored: task_models.build_task_model(
            task, config, num_labels, restored, **request.options), task_models.REGISTRY[task].heads)
    except ValueError as e:
        given = f" (--num_labels / --label_list gave {num_labels})" if num_labels else ""
        raise ValueError(f"Cannot load {init_checkpoint} into the {task} model{given}: {e}") from e
    return loaded


def _head_labels(model, task, labels):
    """The label names an export of `model` gives its predictions: `labels` or "0".."L-1" for a classifier or NER
    head; None for the other tasks and a regression classifier. Raises ValueError for labels that do not fit the
    head."""
    if task == "classifier" and getattr(model, "regression", False):
        if labels:
            raise ValueError("A regression classifier has no labels.")
        return None
    if task not in ("classifier", "ner"):
        return None
    labels = labels or [str(i) for i in range(model.num_labels)]
    if len(labels) != model.num_labels:
        raise ValueError(f"label_list has {len(labels)} labels but the model's head has {model.num_labels}.")
    return labels
