"""benchmarks/finetune_benchmark.py: the loops and phases it reads from run_classifier.py's log (no timing is
tested)."""
import datetime

import benchmark_modules
import pytest

finetune = benchmark_modules.load("finetune_benchmark")

# run_classifier.py's stderr, abridged: absl lines (one after a progress bar, as tqdm leaves it) and other output.
LOG = """2026-11-23 02:59:45.100000: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.
I1123 02:59:49.500000 140582213643136 distribute.py:64] Distribution: OneDeviceStrategy with 1 replica(s)
I1123 02:59:51.000000 140582213643136 runner.py:191] ***** Running training *****
I1123 03:00:35.000000 140582213643136 trainer.py:352] step 12/25 loss 1.6005 (9.6 examples/s)
train: 96%|9| 24/25I1123 03:01:05.000000 1405822 trainer.py:352] step 24/25 loss 1.3691 (12.8 examples/s)
I1123 03:01:07.000000 140582213643136 trainer.py:352] step 25/25 loss 1.0839 (16.0 examples/s)
I1123 03:01:08.500000 140582213643136 trainer.py:356] Saved /tmp/out/ckpt-25
I1123 03:01:20.000000 140582213643136 runner.py:235] Done; outputs in /tmp/out
"""


def test_loops_and_phases_from_the_log():
    start = datetime.datetime(2026, 11, 23, 2, 59, 42, 500000).timestamp()
    figures = finetune.bert_tf_figures(LOG, start, start + 100.0, 32)
    assert figures["loop_steps"] == [12, 12, 1]
    assert figures["loop_seconds"] == pytest.approx([40.0, 30.0, 2.0])
    assert figures["phases"] == pytest.approx({"start-up": 7.0, "data + model": 1.5, "training": 76.0,
                                               "checkpoint": 1.5, "evaluation": 11.5, "exit": 2.5})
    assert sum(figures["phases"].values()) == pytest.approx(100.0)


def test_a_log_without_training_is_an_error():
    with pytest.raises(RuntimeError, match="logged no training loop"):
        finetune.bert_tf_figures(LOG.replace("step ", "stop "), 0.0, 1.0, 32)


def test_a_checkpoint_saved_during_the_evaluation_ends_its_phase_when_the_evaluation_starts():
    """The last checkpoint written in the background: its phase ends at the dev features' first line, not at its
    "Saved" line inside the evaluation, and not at the training features' line before the training."""
    log = LOG.replace("***** Running training *****",
                      "Writing example 0 of 400\nI1123 02:59:51.000000 140582213643136 runner.py:191] "
                      "***** Running training *****")
    log = log.replace("I1123 03:01:08.500000 140582213643136 trainer.py:356] Saved /tmp/out/ckpt-25",
                      "I1123 03:01:07.200000 140582213643136 features.py:99] Writing example 0 of 200\n"
                      "I1123 03:01:09.000000 140582213643136 trainer.py:381] Saved /tmp/out/ckpt-25")
    start = datetime.datetime(2026, 11, 23, 2, 59, 42, 500000).timestamp()
    phases = finetune.bert_tf_figures(log, start, start + 100.0, 32)["phases"]
    assert phases == pytest.approx({"start-up": 7.0, "data + model": 1.5, "training": 76.0, "checkpoint": 0.2,
                                    "evaluation": 12.8, "exit": 2.5})
