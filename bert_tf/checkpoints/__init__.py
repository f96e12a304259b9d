"""Checkpoints in and out: `name_map` (original variable names), `assign` (name -> tensor maps
into a model), one module per format: `original` (TF1), `model_garden` (TF2), `tfhub`, `keras_hub`,
`huggingface`; `restore` (the one loading path), `pretrained` (`load_pretrained`: the model a run
starts from) and `convert` (between formats). Use the public functions from here:
`checkpoints.restore(model, path)`.
"""
from bert_tf.checkpoints.assign import assign_by_name
from bert_tf.checkpoints.convert import CONVERSION_FORMATS, convert_checkpoint
from bert_tf.checkpoints.huggingface import (
    bert_config_from_hf,
    convert_hf_to_original,
    from_hf_directory,
    load_hf_safetensors,
    seeded_pretraining_heads,
)
from bert_tf.checkpoints.keras_hub import check_preset_writable, export_preset
from bert_tf.checkpoints.name_map import model_parts, original_variable_map
from bert_tf.checkpoints.original import export_original, save_original_checkpoint, save_tensors
from bert_tf.checkpoints.pretrained import Pretrained, load_pretrained, model_files, run_record
from bert_tf.checkpoints.restore import (
    checkpoint_files,
    latest_checkpoint,
    resolve_checkpoint,
    restore,
)

__all__ = [
    "CONVERSION_FORMATS", "Pretrained", "assign_by_name", "bert_config_from_hf",
    "check_preset_writable", "checkpoint_files", "convert_checkpoint", "convert_hf_to_original",
    "export_original", "export_preset", "from_hf_directory", "latest_checkpoint",
    "load_hf_safetensors", "load_pretrained", "model_files", "model_parts", "original_variable_map",
    "resolve_checkpoint", "restore", "run_record", "save_original_checkpoint", "save_tensors",
    "seeded_pretraining_heads",
]
