"""MultiWorkerMirroredStrategy across two local worker processes (a TF_CONFIG cluster of two localhost ports) trains
the one-device numbers: tests/training/pretraining_worker.py runs as both workers and, at the same time, as one
single-device process, on the same global batches of the golden pretraining records (each worker gets its half
of every batch), a dropout-free tiny BertPretrainer and PretrainingLoss, with clipping acting on every update.

Also: the chief writes the checkpoints and the summaries to output_dir, worker 1 its checkpoints (its own input
position) to output_dir/workers/worker-1 and no summaries; both resume from those after a restart.
"""
import json
import os
import socket
import subprocess
import sys
import time

import pytest
import tiny_pretraining
from tiny_training import checkpoint_floats, max_diff, summaries

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretraining_worker.py")
STEPS = 4  # pretraining_worker.STEPS: checkpoints at 2 and 4; the resumed runs restart from 2
TIMEOUT_S = 600
pytestmark = pytest.mark.slow  # three TensorFlow processes, ~40 s of CPU


def _free_ports(n):
    """`n` distinct localhost ports free now (held together while they are picked, then released)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _start(output_dir, log_path, tf_config=None):
    """Starts pretraining_worker.py (stdout and stderr to `log_path`.out / .err)."""
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(f"{log_path}.out", "w") as out, open(f"{log_path}.err", "w") as err:
        return subprocess.Popen([sys.executable, WORKER, str(output_dir)], stdout=out, stderr=err, env=env)


def _wait(processes, timeout):
    """Waits for every process; as soon as one fails (the others would wait for it in their collectives) or the
    time is up, kills the ones still running. Returns the names of those that failed or were killed."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in processes.values()):
        if time.monotonic() > deadline or any(p.returncode for p in processes.values()):
            break
        time.sleep(0.5)
    for p in processes.values():
        if p.poll() is None:
            p.kill()
            p.wait()
    return [name for name, p in processes.items() if p.returncode != 0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs the two workers and the single-device process. Returns (their output dirs, their RESULT dicts)."""
    d = tmp_path_factory.mktemp("multi_worker")
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    dirs = {"single": d / "single", "chief": d / "multi", "worker-1": d / "multi"}
    processes = {"single": _start(dirs["single"], d / "single")}
    for index, name in enumerate(("chief", "worker-1")):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        processes[name] = _start(dirs[name], d / name, tf_config)
    failed = _wait(processes, TIMEOUT_S)
    logs = {name: (d / f"{name}.err").read_text() for name in processes}
    assert not failed, "\n".join(f"{name}: {logs[name][-3000:]}" for name in failed)
    results = {name: json.loads((d / f"{name}.out").read_text().split("RESULT ", 1)[1]) for name in processes}
    return dirs, results


def test_the_workers_form_one_cluster(runs):
    """distribute.worker_position of each process's strategy, and the replicas it trains with."""
    results = runs[1]
    assert (results["single"]["strategy"], results["single"]["position"], results["single"]["replicas"]) == \
        ("OneDeviceStrategy", [0, 1], 1)
    for name, index in (("chief", 0), ("worker-1", 1)):
        assert results[name]["position"] == [index, 2]
        assert results[name]["replicas"] == 2
        assert results[name]["is_chief"] == (index == 0)


def test_two_workers_train_the_single_device_numbers(runs):
    """Every update's figures (TensorBoard: loss, its terms, accuracies, gradient norm) and the final weights and
    Adam moments (measured: 7e-7 apart) are the single device's; both workers hold the same weights."""
    dirs, _ = runs
    single, _ = summaries(dirs["single"] / "straight")
    multi, _ = summaries(dirs["chief"] / "straight")
    for tag in tiny_pretraining.FIGURES:
        assert sorted(multi[tag]) == list(range(1, STEPS + 1)), tag
        for step, value in single[tag].items():
            assert multi[tag][step] == pytest.approx(value, abs=1e-5), (tag, step)
    assert min(multi["gradient_norm"].values()) > 1.05  # clipping to 1.0 acted on every update
    chief = checkpoint_floats(dirs["chief"] / "straight")
    assert max_diff(chief, checkpoint_floats(dirs["single"] / "straight")) <= 1e-5
    assert max_diff(chief, checkpoint_floats(dirs["chief"] / "straight" / "workers" / "worker-1")) == 0.0


def test_the_chief_writes_the_run_and_worker_1_its_checkpoints(runs):
    """Trainer.checkpoint_dir of each worker holds its checkpoints; the summaries are the chief's alone (the event
    files name the process that wrote them)."""
    dirs, results = runs
    straight = dirs["chief"] / "straight"
    assert results["chief"]["checkpoint_dir"] == str(straight)
    assert results["worker-1"]["checkpoint_dir"] == str(straight / "workers" / "worker-1")
    checkpoints = {f"ckpt-{step}.index" for step in (STEPS // 2, STEPS)}
    assert checkpoints <= set(os.listdir(straight))
    assert checkpoints <= set(os.listdir(straight / "workers" / "worker-1"))
    assert os.listdir(straight / "workers") == ["worker-1"]
    _, event_files = summaries(straight)
    assert event_files and all(f".{results['chief']['pid']}." in name for name in event_files), event_files
    assert not [path for path, _, files in os.walk(straight / "workers") for name in files if "tfevents" in name]


def test_both_workers_resume_their_checkpoints(runs):
    """A copy of each worker's step-2 checkpoint, trained on to step 4 by new Trainers: the weights of the
    uninterrupted run on each process, and the chief's figures of steps 3 and 4."""
    dirs, results = runs
    for name in results:
        assert (results[name]["resumed_step"], results[name]["resumed_max_diff"]) == (STEPS, 0.0), name
    straight, _ = summaries(dirs["chief"] / "straight")
    resumed, _ = summaries(dirs["chief"] / "resumed")
    for tag in tiny_pretraining.FIGURES:
        assert resumed[tag] == {step: straight[tag][step] for step in range(STEPS // 2 + 1, STEPS + 1)}, tag
