"""Converting a checkpoint between formats: `convert_checkpoint` reads any checkpoint `restore` reads and writes a
release directory in the original or Model Garden's format, or a KerasHub preset.
"""
import os

from bert_tf.checkpoints import keras_hub, model_garden, name_map, original
from bert_tf.checkpoints.pretrained import file_beside, model_files
from bert_tf.checkpoints.restore import head_output_size, restore
from bert_tf.model import task_models

CONVERSION_FORMATS = ("original", "model_garden", "keras_hub")


def convert_checkpoint(init_checkpoint, output_dir, to="original", bert_config_file=None, vocab_file=None,
                       do_lower_case=None):
    """Any checkpoint `restore` reads (original, bert-tf, Model Garden TF2, TF Hub SavedModel, KerasHub preset) -> a
    release directory: output_dir/bert_model.ckpt under the original names (`to="original"`) or in Model Garden's
    TF2 layout (`to="model_garden"`, `model_garden.save_model_garden_checkpoint`), with bert_config.json and
    vocab.txt (`model_files`: those given, else a TF Hub model's or preset's own), holding the encoder and whichever
    pretraining heads the checkpoint has; or a KerasHub preset directory (`to="keras_hub"`, `_to_keras_hub`).
    do_lower_case: the preset tokenizer's casing (default: the model's own, else True). Returns output_dir."""
    if to not in CONVERSION_FORMATS:
        raise ValueError(f"to={to!r}: expected one of {CONVERSION_FORMATS}.")
    files = model_files(init_checkpoint, bert_config_file, vocab_file, do_lower_case)
    if to == "keras_hub":
        return _to_keras_hub(init_checkpoint, output_dir, files)
    model = task_models.BertPretrainer(files.config)
    report = restore(model, init_checkpoint)
    mapping = name_map.original_variable_map(model)
    tensors = {name: mapping[name].numpy() for name in report.loaded}
    if to == "original":
        return original.write_release(tensors, files.config, output_dir, files.vocab_file)
    model_garden.save_model_garden_checkpoint(tensors, files.config, os.path.join(output_dir, "bert_model.ckpt"))
    return original.write_release_files(files.config, output_dir, files.vocab_file)


def _to_keras_hub(init_checkpoint, output_dir, files):
    """The checkpoint as a KerasHub preset (`keras_hub.save_preset`): the encoder, and the head of the first task
    whose TaskSpec names a KerasHub class and whose head the checkpoint holds (`head_output_size`: the classifier,
    as a BertTextClassifier with its num_labels), with files' vocabulary (else the release's vocab.txt beside the
    checkpoint) and casing. Pretraining heads are left out (reported unused): KerasHub's BertBackbone has none."""
    specs = [spec for spec in task_models.REGISTRY.values() if spec.keras_hub and spec.heads]
    sizes = ((spec, head_output_size(init_checkpoint, spec.heads[0].attribute)) for spec in specs)
    spec, size = next(((spec, size) for spec, size in sizes if size), (task_models.REGISTRY["encoder"], None))
    model = spec.build(files.config, num_labels=size, restored=True)
    report = restore(model, init_checkpoint, spec.head_names)
    mapping = name_map.original_variable_map(model)
    tensors = {name: mapping[name].numpy() for name in report.loaded}
    vocab_file = files.vocab_file or file_beside(init_checkpoint, "vocab.txt")
    return keras_hub.save_preset(tensors, files.config, output_dir, vocab_file, files.do_lower_case)
