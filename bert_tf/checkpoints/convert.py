"""Converting a checkpoint: `convert_checkpoint` reads any checkpoint `restore` reads and writes an original or
Model Garden release directory, a Hugging Face transformers directory or a KerasHub preset.
"""
import dataclasses
import os

from bert_tf.checkpoints import huggingface, keras_hub, model_garden, name_map, original
from bert_tf.checkpoints.pretrained import checkpoint_directory, file_beside, model_files, run_record
from bert_tf.checkpoints.restore import checkpoint_heads, restore
from bert_tf.data import label_lists
from bert_tf.model import task_models
from bert_tf.text import tokenization

CONVERSION_FORMATS = ("original", "model_garden", "huggingface", "keras_hub")


def convert_checkpoint(init_checkpoint, output_dir, to="original", bert_config_file=None, vocab_file=None,
                       do_lower_case=None, task=None):
    """Writes `init_checkpoint` to output_dir as `to` ("original" or "model_garden": a release directory;
    "huggingface"; "keras_hub"); returns output_dir. do_lower_case: the written tokenizer's casing."""
    if to not in CONVERSION_FORMATS:
        raise ValueError(f"to={to!r}: expected one of {CONVERSION_FORMATS}.")
    if to not in ("huggingface", "keras_hub") and do_lower_case is not None:
        raise ValueError(f"do_lower_case applies to to='huggingface' and to='keras_hub' only, not to={to!r}.")
    if to != "huggingface" and task is not None:
        raise ValueError(f"task applies to to='huggingface' only, not to={to!r}.")
    files = model_files(init_checkpoint, bert_config_file, vocab_file, do_lower_case)
    files = dataclasses.replace(files, vocab_file=files.vocab_file or file_beside(init_checkpoint, "vocab.txt"))
    if to == "huggingface":
        return to_huggingface(init_checkpoint, files, output_dir, task)
    if to == "keras_hub":
        return to_keras_hub(init_checkpoint, files, output_dir)
    model = task_models.BertPretrainer(files.config)
    tensors = name_map.model_tensors(model, restore(model, init_checkpoint).loaded)
    if to == "original":
        return original.write_release(tensors, files.config, output_dir, files.vocab_file)
    model_garden.save_model_garden_checkpoint(tensors, files.config, os.path.join(output_dir, "bert_model.ckpt"))
    return original.write_release_files(files.config, output_dir, files.vocab_file)


def hf_task_of_heads(heads, task=None):
    """The TaskSpec whose transformers class a checkpoint with `heads` ({head attribute: rows}) is written as:
    `task`, else the one with exactly `heads` (one classifier output: regression); ValueError if none fits."""
    found = ", ".join(heads) or "no head"
    specs = [task_models.REGISTRY[name] for name in huggingface.ARCHITECTURES]
    if task is not None:
        if task not in huggingface.ARCHITECTURES:
            raise ValueError(f"task={task!r} has no Hugging Face class; expected one of "
                             f"{', '.join(huggingface.ARCHITECTURES)}.")
        spec = task_models.REGISTRY[task]
        if not set(spec.head_names) <= set(heads):
            raise ValueError(f"The {task} task needs the {', '.join(spec.head_names)} head, but the checkpoint holds "
                             f"{found}.")
        return spec
    fits = [spec for spec in specs if set(spec.head_names) == set(heads)
            and all(spec.kwargs.get("num_labels", heads[h]) == heads[h] for h in spec.head_names)]
    # one output: regression; else the first, the classifier (a multi-label one's heads are alike: task=multi_label)
    fits = [spec for spec in fits if "num_labels" in spec.kwargs] or fits[:1]
    if len(fits) != 1:
        fitting = [spec.name for spec in specs if set(spec.head_names) <= set(heads)]
        raise ValueError(f"The checkpoint holds {found}: no one Hugging Face class has exactly these heads; pass "
                         f"task= (--task), one of {', '.join(fitting)}.")
    return fits[0]


def to_huggingface(init_checkpoint, files, output_dir, task=None):
    """Writes `init_checkpoint` as a transformers directory of the class of `task`, else the run's
    recorded task, else `hf_task_of_heads`; label names the run's (else LABEL_i; ValueError for
    another number). Returns output_dir."""
    huggingface.check_hf_output_dir(output_dir)
    tokenization.validate_case_matches_checkpoint(files.do_lower_case, init_checkpoint)
    huggingface.check_vocab(files.vocab_file, files.config)
    heads = checkpoint_heads(init_checkpoint, files.config)
    recorded = run_record(init_checkpoint)
    if task is None and recorded and recorded["task"] in huggingface.ARCHITECTURES:
        task = recorded["task"]
    spec = hf_task_of_heads(heads, task)
    rows = labels = None
    if spec.labelled:  # the label names the run recorded, or saved beside its checkpoint
        rows = heads[spec.head_names[0]]
        directory = checkpoint_directory(init_checkpoint)
        path, labels = label_lists.saved(directory)
        if recorded and recorded.get("labels"):
            path, labels = os.path.join(directory, task_models.METADATA_FILE), recorded["labels"]
        if labels is not None and len(labels) != rows:
            raise ValueError(f"{path} lists {len(labels)} labels but the checkpoint's "
                             f"{spec.head_names[0]} head has {rows} outputs.")
    model = spec.build(files.config, rows, restored=True)
    restore(model, init_checkpoint, spec.head_names, strict=True)
    tensors = name_map.model_tensors(model)
    return huggingface.write_hf_directory(tensors, files.config, spec, output_dir, files.vocab_file,
                                          files.do_lower_case, labels)


def to_keras_hub(init_checkpoint, files, output_dir):
    """The checkpoint as a KerasHub preset: the encoder and a classifier head if it has one, with
    files' vocabulary and casing; other heads are left out."""
    if not files.vocab_file:
        raise ValueError(f"A KerasHub preset needs the model's vocab.txt for its tokenizer (and a classifier's "
                         f"preprocessor): pass vocab_file (--vocab_file), or keep it beside {init_checkpoint}.")
    keras_hub.check_preset_writable(files.config, output_dir, files.vocab_file)
    heads = checkpoint_heads(init_checkpoint, files.config)
    spec = task_models.REGISTRY["classifier" if "classifier" in heads else "encoder"]
    size = heads[spec.head_names[0]] if spec.head_names else None
    model = spec.build(files.config, num_labels=size, restored=True)
    restore(model, init_checkpoint, spec.head_names)  # every variable of the model, or a ValueError
    return keras_hub.export_preset(model, output_dir, files.vocab_file, files.do_lower_case)
