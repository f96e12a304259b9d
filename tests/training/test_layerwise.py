"""Which weights train, at which rate (bert_tf.training.layers): --layerwise_lr_decay's multipliers against the
formula and in each optimizer's first update, --freeze_layers' fixed weights and resumed runs, --deterministic."""
import json
import os
import shutil
import sys

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier
import toy_task
from tensorflow.python.framework import config as tf_config

from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertClassifier
from bert_tf.tasks import run_record
from bert_tf.training import distribute, layers
from bert_tf.training.config import RunConfig
from bert_tf.training.optimization import AdamWeightDecay, Lamb
from bert_tf.training.trainer import Trainer

CONFIG = toy_task.config()  # L=2
RHO = 0.5


@pytest.fixture(scope="module")
def model():
    tf.keras.utils.set_random_seed(0)
    return BertClassifier(CONFIG, 2)


def _expected_multiplier(path):
    """The issue's formula: layer i at RHO^(L-i), the embeddings at RHO^(L+1), the pooler and the head at 1."""
    top = path.split("/")[0]
    if top == "embeddings":
        return RHO ** 3
    if top.startswith("layer_"):
        return RHO ** (2 - int(top[len("layer_"):]))
    assert top in ("pooler", "classifier"), path
    return 1.0


def test_multipliers_follow_the_formula(model):
    multipliers = layers.learning_rate_multipliers(model, RHO)
    for v in model.trainable_variables:
        assert multipliers.get(v.path, 1.0) == _expected_multiplier(v.path), v.path
    assert len(multipliers) == 5 + 2 * 16  # the embeddings' and the layers' variables, each named


SAMPLE = ("embeddings/LayerNorm/gamma", "layer_0/attention/query/kernel", "layer_1/output/bias", "pooler/dense/kernel",
          "classifier/projection/output_weights")


@pytest.mark.parametrize("make", [
    lambda **kw: AdamWeightDecay(fused=True, **kw),
    lambda **kw: AdamWeightDecay(fused=False, **kw),
    lambda **kw: Lamb(**kw),
    lambda **kw: AdamWeightDecay(jit_update=True, **kw),  # the XLA-compiled update (`device_update`)
], ids=["adamw_fused", "adamw_ops", "lamb", "adamw_xla"])
def test_first_update_is_the_variables_rate(model, make):
    """With the same gradients, each variable's first update (weight decay included) is the multiplier times the
    update at one rate: a variable of each depth, decayed or not."""
    variables = [v for v in model.trainable_variables if v.path in SAMPLE]
    assert len(variables) == len(SAMPLE)
    rng = np.random.RandomState(1)
    grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32)) for v in variables]
    start = [v.numpy() for v in variables]
    deltas = []
    for multipliers in (None, layers.learning_rate_multipliers(model, RHO)):
        optimizer = make(learning_rate=1e-3, learning_rate_multipliers=multipliers)
        optimizer.build(variables)
        if optimizer.jit_update:
            optimizer.device_update(variables)(grads, tf.constant(1e-3))
        else:
            optimizer.apply(grads, variables)
        deltas.append([v.numpy() - s for v, s in zip(variables, start)])
        for v, s in zip(variables, start):
            v.assign(s)
    for v, one_rate, scaled in zip(variables, *deltas):
        assert np.abs(one_rate).max() > 0, v.path
        np.testing.assert_allclose(scaled, _expected_multiplier(v.path) * one_rate, rtol=2e-3, atol=1e-9,
                                   err_msg=v.path)


def _trainer(output_dir, **settings):
    tf.keras.utils.set_random_seed(1)
    return Trainer(lambda: BertClassifier(CONFIG, 2), toy_task.loss_fn, str(output_dir),
                   strategy=distribute.get_strategy("one_device"), learning_rate=1e-3, save_checkpoints_steps=2,
                   **settings)


def _weights(trainer):
    return {v.path: v.numpy() for v in trainer.model.weights}


FROZEN = dict(freeze_layers=1, layerwise_lr_decay=RHO)


def test_frozen_layers_stay_fixed_have_no_slots_and_resume_exactly(tmp_path):
    whole = _trainer(tmp_path / "whole", **FROZEN)
    before = _weights(whole)
    whole.train(toy_task.dataset_fn, 16, 4, 1, seed=3)
    after = _weights(whole)
    frozen = {p for p in before if p.startswith(("embeddings/", "layer_0/"))}
    assert len(frozen) == 5 + 16
    for path in before:
        assert np.array_equal(before[path], after[path]) == (path in frozen), path
    slots = [v for v in whole.optimizer.variables if v.name.endswith(("_adam_m", "_adam_v"))]
    assert len(slots) == 2 * len(whole.model.trainable_variables) == 2 * (len(before) - len(frozen))

    # As a run killed after writing ckpt-2 (its weights and optimizer state, in a fresh Trainer: another process's).
    (tmp_path / "resumed").mkdir()
    for name in os.listdir(tmp_path / "whole"):
        if name.startswith("ckpt-2."):
            shutil.copy(tmp_path / "whole" / name, tmp_path / "resumed" / name)
    tf.compat.v1.train.update_checkpoint_state(str(tmp_path / "resumed"), "ckpt-2")
    resumed = _trainer(tmp_path / "resumed", **FROZEN)
    resumed.train(toy_task.dataset_fn, 16, 4, 1, seed=3)
    for path, value in _weights(resumed).items():
        assert np.array_equal(value, after[path]), path

    # Every weight is in the checkpoint: a model that freezes nothing restores the run's weights.
    plain = _trainer(tmp_path / "resumed")
    plain.restore_for_predict()
    for path, value in _weights(plain).items():
        assert np.array_equal(value, after[path]), path


def test_settings_errors_and_records(model, tmp_path):
    with pytest.raises(ValueError, match=r"--freeze_layers=3: the model has 2 transformer layers \(num_hidden_layers"
                                         r"\); expected -1 \(the whole encoder\) to 2\."):
        layers.freeze(model, 3)
    with pytest.raises(ValueError, match=r"--layerwise_lr_decay must be > 0 \(got 0\.0\) and --freeze_layers >= -1 "
                                         r"\(got 0\)"):
        RunConfig(layerwise_lr_decay=0.0)
    with pytest.raises(ValueError, match=r"--freeze_layers >= -1 \(got -2\)"):
        RunConfig(freeze_layers=-2)
    with pytest.raises(ValueError, match=r"--deterministic needs --seed"):
        RunConfig(deterministic=True)
    strategy = distribute.get_strategy("one_device")
    plain = run_record.training_settings(RunConfig(), strategy)
    assert not set(run_record.OPTIONAL_SETTINGS) & set(plain)
    given = run_record.training_settings(RunConfig(freeze_layers=-1, layerwise_lr_decay=0.9, deterministic=True,
                                                   seed=1), strategy)
    assert {name: given[name] for name in run_record.OPTIONAL_SETTINGS if name in given} == {
        "freeze_layers": -1, "layerwise_lr_decay": 0.9, "deterministic": True}
    # A run recorded without a setting ran at its default: adding or dropping one on resume is refused.
    tf.train.Checkpoint(step=tf.Variable(1)).write(str(tmp_path / "ckpt-1"))
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    for recorded, resumed in ((plain, given), (given, plain)):
        run_record.record(str(tmp_path), None, recorded)
        with pytest.raises(ValueError, match=r"other settings \(.*freeze_layers"):
            run_record.check(str(tmp_path), False, settings=resumed)
    run_record.check(str(tmp_path), False, settings=given)


def test_freezing_the_whole_encoder_leaves_the_head():
    tf.keras.utils.set_random_seed(0)
    probe = BertClassifier(CONFIG, 2)
    layers.freeze(probe, layers.FREEZE_ENCODER)
    assert [v.path for v in probe.trainable_variables] == ["classifier/projection/output_weights",
                                                           "classifier/projection/output_bias"]


# Runs run_classifier.py's main for each argv in one forked child; after each: (its error or None, whether
# TensorFlow's op determinism is on).
_DRIVER = """
import json, runpy, sys
from absl import flags
from tensorflow.python.framework import config
main = runpy.run_path(sys.argv[1])["main"]
results = []
for argv in json.loads(sys.argv[2]):
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["script"] + argv)
    try:
        main(None)
        error = None
    except ValueError as e:
        error = str(e)
    results.append([error, config.is_op_determinism_enabled()])
print("RESULTS " + json.dumps(results))
"""


def test_deterministic_turns_op_determinism_on(tmp_path):
    """A seeded evaluation of a fine-tuned checkpoint under --deterministic (without --seed: the error)."""
    import random

    from numpy_bert import random_weights, write_tf1_checkpoint

    vocab_file, config_file = tiny_classifier.write_tiny_model(tmp_path / "model")
    checkpoint = write_tf1_checkpoint(random_weights(BertConfig.from_json_file(config_file), heads=True, num_labels=2),
                                      str(tmp_path / "model" / "bert_model.ckpt"))
    tiny_classifier.write_mrpc(tmp_path / "data", random.Random(0), dev=4)
    common = ["--task_name=mrpc", f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}", f"--init_checkpoint={checkpoint}",
              "--do_eval", "--max_seq_length=16"]
    result = forkserver.run([sys.executable, "-c", _DRIVER, tiny_classifier.SCRIPT,
                             json.dumps([common + ["--deterministic"], common + ["--deterministic", "--seed=1"]])],
                            capture_output=True, text=True, cwd=tiny_classifier.REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    no_seed, seeded = json.loads(result.stdout.split("RESULTS ", 1)[1])
    assert no_seed == ["--deterministic needs --seed: op determinism repeats a run only from the same seed.", False]
    assert seeded == [None, True]
    assert not tf_config.is_op_determinism_enabled()  # this process: untouched
