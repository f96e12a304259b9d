"""Model Garden's own tools (tf-models-official) applied to an original checkpoint, for the tests of Model Garden and
TF Hub input (tests/checkpoints/test_model_garden.py, tests/tasks/test_classifier_with_tfhub.py)."""
import os

import pytest
import tensorflow as tf


def require_official():
    """Model Garden's (configs, tf2_bert_encoder_checkpoint_converter, export_tfhub_lib); skips the test where
    tf-models-official is not installed."""
    pytest.importorskip("tf_keras", reason="Model Garden needs tf_keras (pip install -e .[ecosystem])")
    pytest.importorskip("official", reason="needs tf-models-official (pip install -e .[ecosystem])")
    from official.legacy.bert import configs
    from official.nlp.tools import export_tfhub_lib, tf2_bert_encoder_checkpoint_converter

    return configs, tf2_bert_encoder_checkpoint_converter, export_tfhub_lib


def model_garden_files(directory, prefix, config, vocab_file, hidden_act=None, encoder=True):
    """Model Garden's converter and exporter applied to the original checkpoint `prefix`: (encoder checkpoint,
    BertPretrainerV2 checkpoint, TF Hub SavedModel with .mlm). `hidden_act`: a callable for Model Garden where
    its name for the activation differs from ours; `encoder=False`: no encoder checkpoint (None)."""
    configs, converter, exporter = require_official()
    mg_config = configs.BertConfig.from_dict({**config.to_dict(), **({"hidden_act": hidden_act} if hidden_act
                                                                      else {})})
    for name, kind in (("encoder", "encoder"), ("pretrainer", "pretrainer"))[0 if encoder else 1:]:
        converter.convert_checkpoint(mg_config, os.path.join(directory, name, "bert_model.ckpt"), prefix,
                                     checkpoint_model_name="encoder" if kind == "encoder" else "model",
                                     converted_model=kind)
    encoder_ckpt, pretrainer_ckpt = (tf.train.latest_checkpoint(os.path.join(directory, n))
                                     for n in ("encoder", "pretrainer"))  # None where not converted
    hub = os.path.join(directory, "hub")
    exporter.export_model(hub, bert_config=mg_config, model_checkpoint_path=pretrainer_ckpt, with_mlm=True,
                          vocab_file=vocab_file, do_lower_case=True)
    return encoder_ckpt, pretrainer_ckpt, hub
