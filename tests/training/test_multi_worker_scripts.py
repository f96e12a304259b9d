"""run_classifier.py and run_ner.py on two local workers (MultiWorkerMirroredStrategy, a TF_CONFIG cluster of two
localhost ports) against one process on one device at the same global batch (dropout off, so the two compute the
same updates): the same eval results and predictions; the chief alone writes output_dir's shared files (results,
model_metadata.json, the original-format checkpoint and, run_classifier.py's, the export), worker 1 only its own
checkpoints and training records in output_dir/workers/worker-1; no temporary is left; a second run in a row into
the same output_dir (--start_over) gives the same results again (run_classifier.py's: the runner's export and
--start_over are every script's).
"""
import json
import os
import random
import subprocess
import sys
import time

import forkserver
import pytest
import test_multi_worker
from tiny_classifier import L1_H16, NO_DROPOUT, eval_results, model_flags
from tiny_training import numbers_and_text

from bert_tf import fileio

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks"))
import test_ner  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 600
WORDS = test_ner.VOCAB[5:]
COMMON = ["--do_train", "--do_eval", "--do_predict", "--train_batch_size=4", "--learning_rate=1e-3", "--seed=3",
          "--max_seq_length=16", "--save_checkpoints_steps=2", "--eval_batch_size=3", "--predict_batch_size=3"]
pytestmark = pytest.mark.slow  # three pairs of TensorFlow processes and two single ones


def _classifier(data):
    """Your own tsv data: 3 labels, 12 training examples (3 updates of 4 over one epoch)."""
    rng = random.Random(1)
    for split, count in (("train", 12), ("dev", 5), ("test", 4)):
        rows = ["label\ttext_a\ttext_b"] + [
            f"{rng.choice(['neg', 'pos', 'mixed'])}\t{' '.join(rng.choices(WORDS, k=rng.randint(2, 6)))}\t"
            f"{' '.join(rng.choices(WORDS, k=rng.randint(1, 4)))}" for _ in range(count)]
        (data / f"{split}.tsv").write_text("".join(row + "\n" for row in rows))
    return "run_classifier.py", ["--task_name=tsv", f"--data_dir={data}", "--num_train_epochs=1"], \
        ["eval_results.txt", "test_results.tsv", "predictions.tsv", "model_metadata.json"]


def _ner(data):
    for split in ("train", "dev", "test"):
        (data / f"{split}.txt").write_text(test_ner.CONLL_SAMPLE)  # 8 windows of 16 tokens: 2 updates of 4
    return "run_ner.py", [f"--data_dir={data}", "--num_train_epochs=1"], \
        ["eval_results.txt", "eval_predictions.txt", "test_results.txt", "model_metadata.json"]


def _start(command, log, tf_config=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(log, "w") as err:
        return forkserver.popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)


def _run_two_workers(command, tmp_path, name):
    cluster = {"worker": [f"localhost:{port}" for port in test_multi_worker._free_ports(2)]}
    processes = {f"{name}-{i}": _start(command, tmp_path / f"{name}-{i}.log",
                                      {"cluster": cluster, "task": {"type": "worker", "index": i}})
                 for i in range(2)}
    return processes


def _check(processes, tmp_path):
    failed = test_multi_worker._wait(processes, TIMEOUT_S)
    assert not failed, "\n".join(f"{n}: {(tmp_path / f'{n}.log').read_text()[-3000:]}" for n in failed)


def _temporaries(directory):
    return [os.path.join(d, name) for d, dirs, files in os.walk(directory) for name in dirs + files
            if fileio.TEMP_MARK in name or name.endswith(("_temp", ".tempstate"))]


@pytest.mark.parametrize("task, rerun", [(_classifier, True), (_ner, False)], ids=["classifier", "ner"])
def test_two_workers_give_the_one_device_results(task, rerun, tmp_path):
    """`rerun`: with an export, then again with --start_over."""
    data = tmp_path / "data"
    data.mkdir()
    script, task_flags, outputs = task(data)
    # a tiny model without dropout (so that one device and two workers draw no random numbers)
    model = model_flags(tmp_path, test_ner.VOCAB, **L1_H16, **NO_DROPOUT)
    flags = COMMON + model + task_flags
    single, multi, export = tmp_path / "single", tmp_path / "multi", tmp_path / "export"
    command = [sys.executable, os.path.join(REPO, "run_scripts", script), *flags]
    processes = {"single": _start([*command, f"--output_dir={single}"], tmp_path / "single.log")}
    multi_command = [*command, f"--output_dir={multi}", "--distribution_strategy=multi_worker_mirrored",
                     "--save_original_checkpoint", *([f"--export_dir={export}"] if rerun else [])]
    processes.update(_run_two_workers(multi_command, tmp_path, "first"))
    _check(processes, tmp_path)
    expected = eval_results(single, float)
    first = eval_results(multi, float)
    assert first.keys() == expected.keys() and first["global_step"] > 1
    for key, value in expected.items():
        assert first[key] == pytest.approx(value, abs=1e-5), key
    for name in outputs[1:-1]:  # the predictions
        (got, got_text), (want, want_text) = (numbers_and_text(d / name) for d in (multi, single))
        assert got_text == want_text and got == pytest.approx(want, abs=1e-5), name
    assert (multi / "model_metadata.json").read_text() == (single / "model_metadata.json").read_text()

    worker = multi / "workers" / "worker-1"
    assert os.listdir(multi / "workers") == ["worker-1"]
    step = int(first["global_step"])
    assert {"train.tf_record", "checkpoint", f"ckpt-{step}.index", "run_settings.json"} <= set(os.listdir(worker))
    assert not set(outputs + ["original", "train", "bert_config.json"]) & set(os.listdir(worker))
    assert (os.listdir(export) == [str(step)]) if rerun else not export.exists()
    assert os.path.exists(multi / "original" / "bert_model.ckpt.index")
    for name in ("first-0", "first-1"):
        log = (tmp_path / f"{name}.log").read_text()
        assert ("Running evaluation" in log) == name.endswith("-0"), name
    assert not _temporaries(tmp_path)
    if rerun:
        _rerun_with_start_over(multi_command, first, tmp_path)


def _rerun_with_start_over(multi_command, first, tmp_path):
    """The two workers' command again, with --start_over: each worker deletes its own checkpoints; the same results
    (`first`), written again; the export a new version beside the first (a served version is never rewritten); no
    temporary left."""
    multi, export = tmp_path / "multi", tmp_path / "export"
    started = time.time()
    _check(_run_two_workers([*multi_command, "--start_over"], tmp_path, "again"), tmp_path)
    assert eval_results(multi, float) == first
    assert os.path.getmtime(multi / "eval_results.txt") > started
    assert "--start_over: deleting" in (tmp_path / "again-1.log").read_text()
    step = int(first["global_step"])
    assert sorted(map(int, os.listdir(export))) == [step, step + 1] and not _temporaries(tmp_path)
