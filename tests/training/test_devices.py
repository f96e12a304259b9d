"""bert_tf.training.devices: the lines that say where a run runs (the strategy, its replicas, the batch per replica,
this machine's CPU, TensorFlow's threads and build), the notice that explains why a TensorFlow built with CUDA found
no GPU, for each cause, and a training script's log that carries them. The GPU and TPU lines need the hardware; a
GPU host checks that the script's log names its GPU."""
import os
import random
import re

import pytest
import tensorflow as tf
from absl import logging
from tiny_classifier import SCRIPT, random_sentence, tsv_line, write_lines, write_tiny_model

from bert_tf.training import devices, machine


def _cpu_model_here():
    """This machine's CPU model as /proc/cpuinfo names it (Linux), else None."""
    if not os.path.exists("/proc/cpuinfo"):
        return None
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        match = re.search(r"^model name\s*:\s*(.+?)\s*$", f.read(), re.M)
    return match and match.group(1)


def test_the_lines_name_the_strategy_replicas_batch_and_compute():
    lines = devices.describe(tf.distribute.OneDeviceStrategy("/cpu:0"), 32, 2, "mixed_bfloat16", True)
    assert lines[:3] == ["Strategy: OneDeviceStrategy, 1 replica(s) on 1 worker: CPU:0",
                         "Batch: 32, 32 per replica, 16 per replica's micro-batch (2 accumulation steps)",
                         "Compute: precision mixed_bfloat16, XLA on"]
    mirrored = devices.describe(tf.distribute.MirroredStrategy(["/cpu:0"]), 8, precision="float32")
    assert mirrored[:3] == ["Strategy: MirroredStrategy, 1 replica(s) on 1 worker: CPU:0", "Batch: 8, 8 per replica",
                            "Compute: precision float32"]


def test_a_long_device_list_is_cut_to_its_first_devices():
    """A TPU pod's hundreds of cores: the first LISTED_DEVICES, then the count."""
    names = [f"/job:worker/replica:0/task:0/device:TPU:{i}" for i in range(devices.LISTED_DEVICES + 2)]
    line = devices.strategy_line(tf.distribute.OneDeviceStrategy("/cpu:0"), names)
    listed = ", ".join(f"TPU:{i}" for i in range(devices.LISTED_DEVICES))
    assert line.endswith(f": {listed}, ... ({devices.LISTED_DEVICES + 2} in all)"), line


def test_the_batch_is_split_over_replicas_and_micro_batches():
    assert devices.batch_line(32, 4, 1) == "Batch: 32, 8 per replica"
    assert devices.batch_line(32, 4, 2) == ("Batch: 32, 8 per replica, 4 per replica's micro-batch "
                                            "(2 accumulation steps)")


def test_without_a_strategy_the_line_names_tensorflows_default_device():
    """A prediction script's devices: GPU 0 where TensorFlow sees a GPU, else the CPU; no compute line unless
    given."""
    default = "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"
    lines = devices.describe(None, 8)
    assert lines[:2] == [f"Strategy: none (TensorFlow's default device): {default}", "Batch: 8, 8 per replica"]
    assert not any(line.startswith("Compute:") for line in lines)


def test_the_cpu_line_names_this_machines_cpu_and_its_cores():
    model = _cpu_model_here()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    line = devices.cpu_line()
    if model:
        assert line.startswith(f"CPU: {model}, "), line
    assert line.endswith(f", {cores} logical core(s) available to this process ({os.cpu_count()} on the machine)")
    assert line in devices.describe(tf.distribute.OneDeviceStrategy("/cpu:0"))


def test_thread_settings_say_what_zero_means(monkeypatch):
    """0 is TensorFlow's default: its environment variable where set, else its choice from the cores."""
    assert devices.thread_setting(3, "TF_NUM_INTRAOP_THREADS") == "3"
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
    assert devices.thread_setting(0, "TF_NUM_INTRAOP_THREADS") == "0 (TensorFlow's default: TF_NUM_INTRAOP_THREADS=1)"
    monkeypatch.delenv("TF_NUM_INTEROP_THREADS", raising=False)
    assert devices.thread_setting(0, "TF_NUM_INTEROP_THREADS") == "0 (TensorFlow's default, from the available cores)"
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    assert devices.threads_line().startswith(f"TensorFlow threads: intra-op {intra}")


def test_the_build_line_names_tensorflow_and_its_cuda():
    line = devices.build_line()
    assert line.startswith(f"TensorFlow {tf.__version__}, built with")
    if tf.test.is_built_with_cuda():
        info = tf.sysconfig.get_build_info()
        assert line.endswith(f"built with CUDA {info['cuda_version']} and cuDNN {info['cudnn_version']}"), line
    else:
        assert line.endswith("built without CUDA")


@pytest.mark.parametrize("value, hides", [("", True), ("-1", True), (" -1", True), ("none", True), ("-1,0", True),
                                          ("0", False), ("1,-1", False), ("GPU-8f3c2a", False),
                                          ("MIG-4b1d", False)])
def test_cuda_visible_devices_hides_every_gpu_when_its_first_entry_names_none(value, hides):
    assert devices.hides_every_gpu(value) == hides


@pytest.mark.parametrize("built_with_cuda, gpus_found, num_gpus", [(True, 1, None), (False, 0, None), (True, 0, 0)])
def test_nothing_to_say_with_a_gpu_a_cpu_build_or_the_cpu_asked_for(built_with_cuda, gpus_found, num_gpus):
    for driver_present in (True, False):
        assert devices.no_gpu_notice(built_with_cuda, gpus_found, None, driver_present, num_gpus) is None


@pytest.mark.parametrize("value", ["", "-1"])
def test_gpus_hidden_by_cuda_visible_devices_is_the_users_choice(value):
    for driver_present in (True, False):
        level, message = devices.no_gpu_notice(True, 0, value, driver_present)
        assert level == logging.INFO
        assert message == f"No GPU: CUDA_VISIBLE_DEVICES={value!r} hides them; running on the CPU."


def test_no_driver_is_a_warning_naming_the_driver():
    level, message = devices.no_gpu_notice(True, 0, None, False)
    assert level == logging.WARNING
    assert message.startswith("TensorFlow is built with CUDA but found no GPU: this machine has no NVIDIA "
                                     "driver (none of /proc/driver/nvidia/version, /dev/nvidia0, /dev/dxg).")
    assert "install its driver" in message and "CUDA_VISIBLE_DEVICES=-1" in message


def test_a_driver_without_loadable_cuda_libraries_is_a_warning_naming_the_package():
    level, message = devices.no_gpu_notice(True, 0, None, True)
    assert level == logging.WARNING
    assert "the NVIDIA driver is present, but it found no GPU: its CUDA libraries are most likely not loadable. " in (
        message)
    major_minor = ".".join(tf.__version__.split(".")[:2])
    assert f"`pip install tensorflow[and-cuda]=={major_minor}.*`" in message
    assert "'Cannot dlopen some GPU libraries'" in message
    level, message = devices.no_gpu_notice(True, 0, "3", True)  # an id this machine may not have: named as a cause
    assert level == logging.WARNING and "(or CUDA_VISIBLE_DEVICES='3' names no GPU of this machine)" in message


@pytest.mark.slow
def test_a_training_script_logs_its_devices(tmp_path, run_main):
    """run_classifier.py (one step of an L=1 model), twice in one process: its log says where it runs; the notice
    for this machine (on one without a GPU and NVIDIA driver: the no-driver warning) in the first run only, the
    second asking for the CPU (--num_gpus=0)."""
    vocab_file, config_file = write_tiny_model(str(tmp_path), num_hidden_layers=1)
    rng = random.Random(0)
    write_lines(str(tmp_path / "data" / "train.tsv"), [tsv_line("text_a", "label")]
                + [tsv_line(random_sentence(rng), ("neg", "pos")[i % 2]) for i in range(8)])
    common = [f"--data_dir={tmp_path / 'data'}", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
              "--task_name=tsv", "--max_seq_length=16", "--do_train", "--train_batch_size=8", "--num_train_epochs=1",
              "--gradient_accumulation_steps=2"]
    errors, logs = run_main(SCRIPT, [*common, f"--output_dir={tmp_path / 'default'}"],
                            [*common, f"--output_dir={tmp_path / 'cpu'}", "--num_gpus=0"], with_logs=True)
    assert errors == [None, None]
    first, second = logs.split("***** Devices *****")[1:]
    gpus = tf.config.list_physical_devices("GPU")
    assert f"Strategy: OneDeviceStrategy, 1 replica(s) on 1 worker: {'GPU:0' if gpus else 'CPU:0'}" in first
    assert "Strategy: OneDeviceStrategy, 1 replica(s) on 1 worker: CPU:0" in second
    for log in (first, second):
        assert "Batch: 8, 8 per replica, 4 per replica's micro-batch (2 accumulation steps)" in log
        assert "Compute: precision float32, XLA off" in log
        assert f"CPU: {_cpu_model_here() or ''}" in log and "TensorFlow threads: intra-op " in log
        assert f"TensorFlow {tf.__version__}, built with" in log
    if gpus:
        assert re.search(r"GPU:0: .+, compute capability \d+\.\d+, ", first), first
    notice = devices.no_gpu_notice(tf.test.is_built_with_cuda(), len(gpus), os.environ.get("CUDA_VISIBLE_DEVICES"),
                                   bool(machine.nvidia_driver_files()))
    if notice:
        assert notice[1] in first
    assert "found no GPU" not in second and "No GPU: " not in second
