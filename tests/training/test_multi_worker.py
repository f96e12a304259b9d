"""MultiWorkerMirroredStrategy across two local worker processes (a TF_CONFIG cluster of two localhost ports) trains
the one-device numbers: tests/training/pretraining_worker.py runs as both workers and, at the same time, as one
process on 2 logical CPU devices, with dropout-free tiny models, on the real training readers:
- run_pretraining.py's (PretrainingTask) on two files of texts of widely varying lengths, each worker reading its own
  file; the single process trains one device on the same global batches (both workers' batches of each update,
  stacked), with clipping acting on every update;
- run_classifier.py's (ClassifierTask: every worker reads the whole set and keeps its share of the global batch)
  under the cluster, on one device and on the 2 devices (MirroredStrategy).
Every replica of every update gets one batch shape, that of the update's longest text, though the replicas' own
texts differ in length (recorded where each replica's model is called, inside the update); MultiWorkerMirroredStrategy
takes one CPU device per worker, so the cluster has 2 workers x 1 device.

Also: the chief writes the checkpoints and the summaries to output_dir, worker 1 its checkpoints (its own input
position) to output_dir/workers/worker-1 and no summaries; both resume from those after a restart. Workers that
train on other data stop before the first update, naming the worker that differs.
"""
import collections
import json
import os
import random
import re
import socket
import sys
import time

import forkserver
import pytest
import tiny_classifier
import tiny_pretraining
from tiny_training import checkpoint_floats, max_diff, summaries

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretraining_worker.py")
STEPS = 4  # pretraining_worker.STEPS: checkpoints at 2 and 4; the workers' resumed runs restart from 2
TIMEOUT_S = 600
pytestmark = pytest.mark.slow  # three TensorFlow processes, ~60 s of CPU


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


def write_data(data_dir):
    """pretraining_worker.py's inputs: tiny_pretraining.write_varying_records, and DATA_DIR/classifier: the tsv
    task's train.tsv (48 texts of 1 to 28 words, most of them short, 3 labels), a vocab.txt and an L=1, H=32
    bert_config.json without dropout."""
    tiny_pretraining.write_varying_records(str(data_dir))
    rng = random.Random(0)
    words = tiny_classifier.WORDS[:22]
    rows = [f"{rng.choice(['neg', 'pos', 'mixed'])}\t{' '.join(rng.choices(words, k=1 + int(28 * rng.random() ** 3)))}"
            for _ in range(48)]
    tiny_classifier.write_lines(str(data_dir / "classifier" / "train.tsv"), ["label\ttext_a", *rows])
    tiny_classifier.write_tiny_model(str(data_dir / "classifier"), num_hidden_layers=1, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)


def _start(data_dir, output_dir, log_path, tf_config=None):
    """Starts pretraining_worker.py (stdout and stderr to `log_path`.out / .err), on the CPU alone."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"}
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(f"{log_path}.out", "w") as out, open(f"{log_path}.err", "w") as err:
        return forkserver.popen([sys.executable, WORKER, str(data_dir), str(output_dir)], stdout=out, stderr=err,
                                env=env)


def _wait(processes, timeout):
    """Waits for every process; as soon as one fails (the others would wait for it in their collectives) or the
    time is up, kills the ones still running. Returns the names of those that failed or were killed."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in processes.values()):
        if time.monotonic() > deadline or any(p.returncode for p in processes.values()):
            break
        time.sleep(0.05)
    for p in processes.values():
        if p.poll() is None:
            p.kill()
            p.wait()
    return [name for name, p in processes.items() if p.returncode != 0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs the two workers and the single-device process. Returns (their output dirs, their RESULT dicts)."""
    d = tmp_path_factory.mktemp("multi_worker")
    write_data(d / "data")
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    dirs = {"single": d / "single", "chief": d / "multi", "worker-1": d / "multi"}
    processes = {"single": _start(d / "data", dirs["single"], d / "single")}
    for index, name in enumerate(("chief", "worker-1")):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        processes[name] = _start(d / "data", dirs[name], d / name, tf_config)
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
    """Trainer.work_dir of each worker holds its checkpoints; the summaries are the chief's alone (the event
    files name the process that wrote them)."""
    dirs, results = runs
    straight = dirs["chief"] / "straight"
    assert results["chief"]["work_dir"] == str(straight)
    assert results["worker-1"]["work_dir"] == str(straight / "workers" / "worker-1")
    checkpoints = {f"ckpt-{step}.index" for step in (STEPS // 2, STEPS)}
    assert checkpoints <= set(os.listdir(straight))
    assert checkpoints <= set(os.listdir(straight / "workers" / "worker-1"))
    assert os.listdir(straight / "workers") == ["worker-1"]
    _, event_files = summaries(straight)
    assert event_files and all(f".{results['chief']['pid']}." in name for name in event_files), event_files
    assert not [path for path, _, files in os.walk(straight / "workers") for name in files if "tfevents" in name]


def test_both_workers_resume_their_checkpoints(runs):
    """A copy of each worker's step-2 checkpoint, trained on to step 4 by new Trainers: the weights of the
    uninterrupted run on each worker, and the chief's figures of steps 3 and 4."""
    dirs, results = runs
    for name in ("chief", "worker-1"):
        assert (results[name]["resumed_step"], results[name]["resumed_max_diff"]) == (STEPS, 0.0), name
    straight, _ = summaries(dirs["chief"] / "straight")
    resumed, _ = summaries(dirs["chief"] / "resumed")
    for tag in tiny_pretraining.FIGURES:
        assert resumed[tag] == {step: straight[tag][step] for step in range(STEPS // 2 + 1, STEPS + 1)}, tag


def test_workers_on_other_data_both_stop_naming_the_one_that_differs(runs):
    """runner.train of the tsv task, worker 1's train.tsv with another label on one row (as many examples): both
    workers stop, with one line naming worker 1, before any update or record of the run."""
    results = runs[1]
    (error,) = {results[name]["other_data"] for name in ("chief", "worker-1")}  # the same on both
    assert error is not None and re.fullmatch(
        r"worker 1 of 2 trains on other data than worker 0 \(data_fingerprint [0-9a-f]{15}\.\.\. vs [0-9a-f]{15}"
        r"\.\.\.\): every worker must train on the same data .*", error), error
    other_data = runs[0]["chief"] / "other_data"
    assert not [name for _, _, files in os.walk(other_data) for name in files if name.startswith(("ckpt", "run_"))]


# run -> (the processes that train it, its name in their RESULT's shapes)
SHAPE_RUNS = {"pretraining, 2 workers": (("chief", "worker-1"), "straight"),
              "pretraining resumed, 2 workers": (("chief", "worker-1"), "resumed"),
              "classifier, 2 devices": (("single",), "classifier_mirrored"),
              "classifier, 2 workers": (("chief", "worker-1"), "classifier")}


def _updates(calls):
    """Model calls ([replica id, input_ids shape, longest real text], each replica's in order) -> per update, the
    (shape, longest text) of each replica: the k-th call of every replica is update k."""
    by_replica = collections.defaultdict(list)
    for replica, shape, longest in calls:
        by_replica[replica].append((tuple(shape), longest))
    assert sorted(by_replica) == [0, 1] and len({len(c) for c in by_replica.values()}) == 1, by_replica
    return list(zip(*by_replica.values()))


@pytest.mark.parametrize("run", SHAPE_RUNS)
def test_every_replica_of_an_update_gets_one_shape(runs, run):
    """Each update's 2 replicas (on 2 devices of one worker, or one on each worker) are called on batches of one
    shape: [4, the update's longest text], nothing padded beyond; the length varies from update to update, and the
    replicas' own longest texts differ in some update (so that cutting each replica's batch on its own would give
    two shapes)."""
    processes, name = SHAPE_RUNS[run]
    updates = _updates([call for process in processes for call in runs[1][process]["shapes"][name]])
    assert len(updates) == (STEPS // 2 if name == "resumed" else STEPS)
    for calls in updates:
        assert {shape for shape, _ in calls} == {(4, max(longest for _, longest in calls))}, calls
    assert len({calls[0][0] for calls in updates}) >= min(3, len(updates)), updates
    assert any(len({longest for _, longest in calls}) > 1 for calls in updates), updates


def test_the_classifier_trains_the_one_device_numbers_on_2_devices_and_2_workers(runs):
    """run_classifier.py's reader on one device, on 2 devices and on 2 workers: every update's loss and gradient
    norm (TensorBoard) and the final weights and Adam moments within 1e-5."""
    dirs, _ = runs
    single, _ = summaries(dirs["single"] / "classifier")
    weights = checkpoint_floats(dirs["single"] / "classifier")
    for output_dir in (dirs["single"] / "classifier_mirrored", dirs["chief"] / "classifier"):
        figures, _ = summaries(output_dir)
        for tag in ("loss", "gradient_norm"):
            assert sorted(figures[tag]) == list(range(1, STEPS + 1)), tag
            for step, value in single[tag].items():
                assert figures[tag][step] == pytest.approx(value, abs=1e-5), (output_dir, tag, step)
        assert max_diff(checkpoint_floats(output_dir), weights) <= 1e-5, output_dir
