"""Checkpoints in and out: `name_map` (the original variable names of our models and the registry of task heads),
`original` (TF1 checkpoints by name: assign, report, write back), `restore` (the one loading path of every script:
original or bert-tf checkpoints) and `huggingface` (safetensors import).

The public functions are importable from here: `from bert_tf import checkpoints; checkpoints.restore(model, path)`.
"""
from bert_tf.checkpoints.huggingface import (
    bert_config_from_hf,
    convert_hf_to_original,
    from_hf_directory,
    load_hf_safetensors,
)
from bert_tf.checkpoints.name_map import TASK_HEADS, model_parts, original_variable_map
from bert_tf.checkpoints.original import LoadReport, assign_by_name, export_original, save_original_checkpoint
from bert_tf.checkpoints.restore import (
    checkpoint_files,
    latest_checkpoint,
    load_original_checkpoint,
    resolve_checkpoint,
    restore,
)

__all__ = [
    "TASK_HEADS", "LoadReport", "assign_by_name", "bert_config_from_hf", "checkpoint_files", "convert_hf_to_original",
    "export_original", "from_hf_directory", "latest_checkpoint", "load_hf_safetensors", "load_original_checkpoint",
    "model_parts", "original_variable_map", "resolve_checkpoint", "restore", "save_original_checkpoint",
]
