"""Checkpoints in and out: `name_map` (the original variable names of our models and the registry of task heads),
`original` (TF1 checkpoints by name: assign, report, write back), `restore` (the one loading path of every script:
original, bert-tf, Model Garden or TF Hub; the model files of a run; conversion between formats), `model_garden`
(Model Garden TF2 checkpoints and TF Hub BERT SavedModels in, Model Garden checkpoints out) and `huggingface`
(safetensors import).

The public functions are importable from here: `from bert_tf import checkpoints; checkpoints.restore(model, path)`.
"""
from bert_tf.checkpoints.huggingface import (
    bert_config_from_hf,
    convert_hf_to_original,
    from_hf_directory,
    load_hf_safetensors,
    pretrainer_from_hf_directory,
    seeded_pretraining_heads,
)
from bert_tf.checkpoints.model_garden import (
    HubModel,
    infer_bert_config,
    read_hub_model,
    save_model_garden_checkpoint,
)
from bert_tf.checkpoints.name_map import TASK_HEADS, model_parts, original_variable_map
from bert_tf.checkpoints.original import (
    LoadReport,
    assign_by_name,
    export_original,
    save_original_checkpoint,
    save_tensors,
)
from bert_tf.checkpoints.restore import (
    CONVERSION_FORMATS,
    ModelFiles,
    checkpoint_files,
    convert_checkpoint,
    latest_checkpoint,
    load_original_checkpoint,
    model_files,
    resolve_checkpoint,
    restore,
)

__all__ = [
    "CONVERSION_FORMATS", "TASK_HEADS", "HubModel", "LoadReport", "ModelFiles", "assign_by_name", "bert_config_from_hf",
    "checkpoint_files", "convert_checkpoint", "convert_hf_to_original", "export_original", "from_hf_directory",
    "infer_bert_config", "latest_checkpoint", "load_hf_safetensors", "load_original_checkpoint", "model_files",
    "model_parts", "original_variable_map", "pretrainer_from_hf_directory", "read_hub_model", "resolve_checkpoint",
    "restore", "save_model_garden_checkpoint", "save_original_checkpoint", "save_tensors", "seeded_pretraining_heads",
]
