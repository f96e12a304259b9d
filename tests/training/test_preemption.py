"""Preemption of one host: run_pretraining.py and run_classifier.py on two local workers (MultiWorkerMirroredStrategy,
a TF_CONFIG cluster of two localhost ports), one worker SIGKILLed once it has written its checkpoint of step 10. The
other stops within a bound (--heartbeat_timeout_seconds, set short here) with one error line naming the lost worker
and how to resume, instead of waiting in its collective ops forever. The killed worker's directory is then left as
a kill while it wrote that checkpoint leaves it (its latest: step 5), so the rerun's workers must agree to resume
step 5, which both have. The same two commands rerun: both resume step 5 and recompute, bit for bit, the
survivor's checkpoint of step 10 (dropout off; weights, optimizer slots, step, input order seed), the state of the
run uninterrupted until then, then train to the end.

Pretraining loses worker 1, whose heartbeats stop (the chief, the coordination service's leader, notices, or its
connection is reset); the classifier loses the chief (worker 1's heartbeats to it fail, or its connection is reset).
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import test_multi_worker
import tiny_pretraining
from tiny_classifier import random_sentence, tsv_line, write_lines, write_tiny_model

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEARTBEAT_TIMEOUT_S = 2
LOST_WITHIN_S = 60  # the survivor's bound after the kill: the heartbeat timeout, its error and its exit, on a busy CI
RUN_TIMEOUT_S = 300  # any run of the test
STEPS, EVERY = 15, 5  # checkpoints at 5, 10 and 15
COMMON = ["--do_train", "--distribution_strategy=multi_worker_mirrored", f"--save_checkpoints_steps={EVERY}",
          "--learning_rate=1e-2", f"--heartbeat_timeout_seconds={HEARTBEAT_TIMEOUT_S}"]
pytestmark = pytest.mark.slow  # three pairs of TensorFlow processes per script


def _pretraining(d):
    """The golden records in two files (each worker reads its own), the tiny dropout-free BERT."""
    rows = list(tf.data.TFRecordDataset(tiny_pretraining.RECORDS).as_numpy_iterator())
    files = [str(d / f"records-{i}.tfrecord") for i in range(2)]
    for i, path in enumerate(files):
        with tf.io.TFRecordWriter(path) as writer:
            for row in rows[i::2]:
                writer.write(row)
    tiny_pretraining.config().to_json_file(str(d / "bert_config.json"))
    return "run_pretraining.py", [f"--input_file={','.join(files)}", f"--bert_config_file={d / 'bert_config.json'}",
                                  f"--max_seq_length={tiny_pretraining.SEQ_LENGTH}", "--train_batch_size=8",
                                  f"--max_predictions_per_seq={tiny_pretraining.PREDICTIONS}",
                                  f"--num_train_steps={STEPS}", "--num_warmup_steps=0", "--seed=3"]


def _classifier(d):
    """40 tsv examples of 2 labels, 1.5 epochs of batches of 4 (STEPS); an L=1 dropout-free BERT. No --seed: the
    workers read the examples in the order of the seed worker 0 draws (each keeps its share of every batch)."""
    vocab_file, config_file = write_tiny_model(str(d), num_hidden_layers=1, hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)
    rng = random.Random(3)
    rows = [tsv_line(random_sentence(rng), ("neg", "pos")[i % 2]) for i in range(40)]
    write_lines(str(d / "data" / "train.tsv"), [tsv_line("text_a", "label"), *rows])
    return "run_classifier.py", [f"--data_dir={d / 'data'}", "--task_name=tsv", f"--vocab_file={vocab_file}",
                                 f"--bert_config_file={config_file}", "--max_seq_length=16", "--train_batch_size=4",
                                 "--num_train_epochs=1.5"]


class Pair:
    """Two worker processes of `command` on a cluster of two free localhost ports; logs in `log_dir`."""

    def __init__(self, command, log_dir, name, env):
        self.cluster = {"worker": [f"localhost:{port}" for port in test_multi_worker._free_ports(2)]}
        self.logs = [log_dir / f"{name}-{i}.log" for i in range(2)]
        self.processes = []
        for i, log in enumerate(self.logs):
            tf_config = json.dumps({"cluster": self.cluster, "task": {"type": "worker", "index": i}})
            with open(log, "w") as err:
                self.processes.append(forkserver.popen(command, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
                                                       env=env(TF_CONFIG=tf_config)))

    def log(self, i):
        return self.logs[i].read_text()

    def wait(self, timeout=RUN_TIMEOUT_S):
        """Waits for both (killing what runs past `timeout`); asserts that both succeeded."""
        failed = test_multi_worker._wait(dict(enumerate(self.processes)), timeout)
        assert not failed, "\n".join(f"worker {i}: {self.log(i)[-3000:]}" for i in failed)

    def kill(self):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
            p.wait()


def _checkpoint(directory):
    """The latest checkpoint's tensors by name, except the input iterators' states (variant tensors NumPy cannot
    read; the rest of the run depends on them, so equal weights at the end prove they resumed right)."""
    reader = tf.train.load_checkpoint(str(directory))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith("input_iterators/")}


def _as_if_killed_while_saving(directory, step):
    """`directory` as a worker killed while it wrote ckpt-<step> leaves it (whether or not this one got that far):
    its checkpoint state names the one before, ckpt-<step - EVERY>, and no ckpt-<step> is complete."""
    for name in os.listdir(directory):
        if name.startswith(f"ckpt-{step}."):
            os.remove(directory / name)
    tf.compat.v1.train.update_checkpoint_state(str(directory), f"ckpt-{step - EVERY}")


@pytest.mark.parametrize("task, victim", [(_pretraining, 1), (_classifier, 0)], ids=["pretraining", "classifier"])
def test_a_lost_worker_stops_the_other_and_both_resume(task, victim, tmp_path, child_env):
    script, flags = task(tmp_path)
    command = [sys.executable, os.path.join(REPO, "run_scripts", script), *COMMON, *flags,
               f"--output_dir={tmp_path / 'run'}"]
    dirs = [tmp_path / "run", tmp_path / "run" / "workers" / "worker-1"]
    pairs = []
    try:
        pairs.append(first := Pair(command, tmp_path, "first", child_env))
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not (dirs[victim] / f"ckpt-{2 * EVERY}.index").exists():
            assert time.monotonic() < deadline and all(p.poll() is None for p in first.processes), \
                f"no ckpt-{2 * EVERY}: {first.log(victim)[-3000:]}"
            time.sleep(0.005)
        first.processes[victim].send_signal(signal.SIGKILL)
        survivor = first.processes[1 - victim]
        try:
            returncode = survivor.wait(LOST_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker {1 - victim} still runs {LOST_WITHIN_S} s after worker {victim} was killed")
        log = first.log(1 - victim)
        assert returncode == 1 and first.processes[victim].wait() == -signal.SIGKILL, log[-3000:]
        assert re.search(rf"{script}: error: worker {victim} of 2 \({first.cluster['worker'][victim]}\) stopped "
                         rf"responding during training .*Restart every worker with the same flags: the run resumes "
                         rf"from the latest checkpoint every worker has in {dirs[0]}\.", log), log[-3000:]
        # The survivor's ckpt-<2 * EVERY>: the state of the run, uninterrupted until then, that the rerun recomputes.
        expected = _checkpoint(dirs[1 - victim] / f"ckpt-{2 * EVERY}")
        _as_if_killed_while_saving(dirs[victim], 2 * EVERY)

        pairs.append(rerun := Pair(command, tmp_path, "rerun", child_env))
        rerun.wait()
        assert f"Workers' heartbeat timeout: {HEARTBEAT_TIMEOUT_S} s" in rerun.log(0)
        for i, directory in enumerate(dirs):
            assert f"Resuming from {directory}/ckpt-{EVERY} at step {EVERY}" in rerun.log(i), rerun.log(i)[-3000:]
        survivor_log = rerun.log(1 - victim)
        assert f"Worker {1 - victim} resumes from {dirs[1 - victim]}/ckpt-{EVERY}: worker(s) {victim} have no " \
               f"checkpoint after step {EVERY}" in survivor_log, survivor_log[-3000:]
        assert int(expected["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == 2 * EVERY
        for directory in dirs:
            got = _checkpoint(directory / f"ckpt-{2 * EVERY}")
            assert sorted(got) == sorted(expected)
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{directory}: {name}")
            assert tf.train.latest_checkpoint(str(directory)).endswith(f"ckpt-{STEPS}")
    finally:
        for pair in pairs:
            pair.kill()
