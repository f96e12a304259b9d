"""run_classifier_with_tfhub.py: the original's flags, and the same results as run_classifier.py from the checkpoint
the TF Hub model was exported from. Its main is run_classifier.py's with the handle as init_checkpoint: that
run_classifier.py takes the vocabulary, casing and config from a TF Hub init_checkpoint is shown by the same run."""
import os
import random
import re
import sys

import forkserver
import numpy as np
import numpy_bert
import pytest
import script_steps
from tiny_classifier import REPO, SCRIPT, eval_results, write_mrpc, write_tiny_model
from tiny_model_garden import model_garden_files

from bert_tf.model.config import BertConfig

HUB_SCRIPT = os.path.join(REPO, "run_scripts", "run_classifier_with_tfhub.py")


def _flag_names(script):
    result = forkserver.run([sys.executable, script, "--helpfull"], capture_output=True, text=True, cwd=REPO)
    return set(re.findall(r"^\s+--(?:\[no\])?(\w+):", result.stdout, re.M))


@pytest.mark.slow
def test_flags_are_run_classifier_flags_plus_the_hub_handle():
    assert _flag_names(HUB_SCRIPT) == _flag_names(SCRIPT) | {"bert_hub_module_handle"}


@pytest.mark.slow
def test_same_eval_results_as_run_classifier_from_the_original_checkpoint(tmp_path, child_env):
    d = str(tmp_path)
    vocab_file, config_file = write_tiny_model(os.path.join(d, "release"))
    config = BertConfig.from_json_file(config_file)
    weights = {k: v for k, v in numpy_bert.random_weights(config, seed=3, heads=True).items()
               if k.startswith(("bert/", "cls/predictions"))}
    prefix = numpy_bert.write_tf1_checkpoint(weights, os.path.join(d, "release", "bert_model.ckpt"))
    hub = model_garden_files(os.path.join(d, "mg"), prefix, config, vocab_file, encoder=False)[2]
    write_mrpc(f"{d}/data", random.Random(0), train=12, dev=6)
    common = [f"--data_dir={d}/data", "--task_name=MRPC", "--do_train", "--do_eval", "--max_seq_length=16",
              "--train_batch_size=4", "--num_train_epochs=2", "--eval_batch_size=2", "--seed=1",
              "--learning_rate=1e-3"]
    # run_classifier.py's runs, then run_classifier_with_tfhub.py's (no --vocab_file, --bert_config_file: from the TF
    # Hub model), in one process (tests/script_steps.py)
    done, logs = script_steps.run([
        (SCRIPT, [[*common, f"--output_dir={d}/orig", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
                   f"--init_checkpoint={prefix}"],
                  [*common, f"--output_dir={d}/no_vocab", f"--init_checkpoint={prefix}"]]),
        (HUB_SCRIPT, [[*common, f"--output_dir={d}/hub", f"--bert_hub_module_handle={hub}"]])], REPO, child_env())
    errors = done[0]["errors"]
    assert errors[0] is None, logs[-3000:]
    assert re.match(r"ValueError: No vocab_file given, and init_checkpoint='.*bert_model\.ckpt' is not a TF Hub BERT "
                    r"SavedModel with a vocab_file asset: pass --vocab_file", errors[1])
    assert done[1]["errors"] == [None], logs[-3000:]
    expected = eval_results(f"{d}/orig", float)
    assert sorted(expected) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    assert expected["global_step"] == 6
    results = eval_results(f"{d}/hub", float)
    assert sorted(results) == sorted(expected)
    np.testing.assert_allclose([results[k] for k in sorted(results)], [expected[k] for k in sorted(results)],
                               rtol=1e-5)
