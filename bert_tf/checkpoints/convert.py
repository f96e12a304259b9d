"""Converting a checkpoint between formats: `convert_checkpoint` reads any checkpoint `restore` reads and writes a
release directory in the original or Model Garden's format.
"""
import os

from bert_tf.checkpoints import model_garden, name_map, original
from bert_tf.checkpoints.pretrained import model_files
from bert_tf.checkpoints.restore import restore
from bert_tf.model import task_models

CONVERSION_FORMATS = ("original", "model_garden")


def convert_checkpoint(init_checkpoint, output_dir, to="original", bert_config_file=None, vocab_file=None):
    """Any checkpoint `restore` reads (original, bert-tf, Model Garden TF2, TF Hub SavedModel) -> a release
    directory: output_dir/bert_model.ckpt under the original names (`to="original"`) or in Model Garden's TF2
    layout (`to="model_garden"`, `model_garden.save_model_garden_checkpoint`), with bert_config.json and vocab.txt
    (`model_files`: those given, else a TF Hub model's own). It holds the encoder and whichever pretraining heads
    the checkpoint has. Returns output_dir."""
    if to not in CONVERSION_FORMATS:
        raise ValueError(f"to={to!r}: expected one of {CONVERSION_FORMATS}.")
    files = model_files(init_checkpoint, bert_config_file, vocab_file)
    model = task_models.BertPretrainer(files.config)
    report = restore(model, init_checkpoint)
    mapping = name_map.original_variable_map(model)
    tensors = {name: mapping[name].numpy() for name in report.loaded}
    if to == "original":
        return original.write_release(tensors, files.config, output_dir, files.vocab_file)
    model_garden.save_model_garden_checkpoint(tensors, files.config, os.path.join(output_dir, "bert_model.ckpt"))
    return original.write_release_files(files.config, output_dir, files.vocab_file)
