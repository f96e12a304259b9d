"""Checkpoints in and out: `name_map` (our models' original variable names), `assign` (name -> tensor maps
assigned to a model), `original` (TF1 checkpoints), `model_garden` (Model Garden TF2 checkpoints), `tfhub` (TF Hub
SavedModels in), `keras_hub` (KerasHub presets), `huggingface` (safetensors), `restore` (the one loading path,
whatever the format), `pretrained` (the model a run starts from: `load_pretrained`) and `convert` (between
formats).

The public functions are importable from here: `from bert_tf import checkpoints; checkpoints.restore(model, path)`.
"""
from bert_tf.checkpoints.assign import LoadReport, assign_by_name
from bert_tf.checkpoints.convert import CONVERSION_FORMATS, convert_checkpoint
from bert_tf.checkpoints.huggingface import (
    bert_config_from_hf,
    convert_hf_to_original,
    from_hf_directory,
    load_hf_safetensors,
    pretrainer_from_hf_directory,
    seeded_pretraining_heads,
)
from bert_tf.checkpoints.keras_hub import check_preset_writable, export_preset, read_preset, save_preset
from bert_tf.checkpoints.model_garden import save_model_garden_checkpoint
from bert_tf.checkpoints.name_map import model_parts, original_variable_map
from bert_tf.checkpoints.original import export_original, save_original_checkpoint, save_tensors
from bert_tf.checkpoints.pretrained import Pretrained, load_pretrained, model_files, run_record
from bert_tf.checkpoints.restore import (
    checkpoint_files,
    latest_checkpoint,
    resolve_checkpoint,
    restore,
)
from bert_tf.checkpoints.tfhub import HubModel, infer_bert_config, read_hub_model

__all__ = [
    "CONVERSION_FORMATS", "HubModel", "LoadReport", "Pretrained", "assign_by_name",
    "bert_config_from_hf", "check_preset_writable", "checkpoint_files", "convert_checkpoint",
    "convert_hf_to_original", "export_original", "export_preset", "from_hf_directory", "infer_bert_config",
    "run_record",
    "latest_checkpoint", "load_hf_safetensors", "load_pretrained", "model_files", "model_parts",
    "original_variable_map", "pretrainer_from_hf_directory", "read_hub_model", "read_preset", "resolve_checkpoint",
    "restore", "save_model_garden_checkpoint", "save_original_checkpoint", "save_preset", "save_tensors",
    "seeded_pretraining_heads",
]
