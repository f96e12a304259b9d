"""Where a run runs, logged once by every training and prediction script (`log_devices`): strategy, batch per
replica, precision, CPU and threads, GPUs or TPU, CUDA build. A CUDA build that finds no GPU says why.
"""
import os
import platform
import re

import tensorflow as tf
from absl import logging

from bert_tf.training import distribute, machine

CUDA_PACKAGE = "tensorflow[and-cuda]==%s.*" % ".".join(tf.__version__.split(".")[:2])
LISTED_DEVICES = 8  # a TPU pod's strategy has hundreds
# A CUDA_VISIBLE_DEVICES entry that names a GPU (index or UUID); CUDA stops at the first that does not.
_GPU_ENTRY = re.compile(r"\d+|GPU-.+|MIG-.+")


def describe(strategy=None, global_batch_size=None, gradient_accumulation_steps=1, precision=None, use_xla=None):
    """The lines that say where a run runs (`strategy` None: TensorFlow's default device)."""
    devices = (list(strategy.extended.worker_devices) if strategy is not None else
               ["/device:GPU:0" if tf.config.list_logical_devices("GPU") else "/device:CPU:0"])
    lines = [strategy_line(strategy, devices)]
    if global_batch_size is not None:
        replicas = strategy.num_replicas_in_sync if strategy is not None else 1
        lines.append(batch_line(global_batch_size, replicas, gradient_accumulation_steps))
    compute = ([f"precision {precision}"] if precision is not None else []) + (
        [f"XLA {'on' if use_xla else 'off'}"] if use_xla is not None else [])
    if compute:
        lines.append("Compute: " + ", ".join(compute))
    lines += [cpu_line(), threads_line()]
    lines += [gpu_line(device) for device in devices if "GPU:" in device]
    if isinstance(strategy, tf.distribute.TPUStrategy):
        extended = strategy.extended
        lines.append(f"TPU: {strategy.num_replicas_in_sync} core(s) on {extended.num_hosts} host(s), "
                     f"{extended.num_replicas_per_host} per host")
    lines.append(build_line())
    return lines


def log_devices(strategy=None, global_batch_size=None, gradient_accumulation_steps=1, precision=None, use_xla=None,
                num_gpus=None):
    """Logs `describe`'s lines, then `no_gpu_notice`'s (not under TPUStrategy)."""
    logging.info("***** Devices *****")
    for line in describe(strategy, global_batch_size, gradient_accumulation_steps, precision, use_xla):
        logging.info("  %s", line)
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return
    notice = no_gpu_notice(tf.test.is_built_with_cuda(), len(tf.config.list_physical_devices("GPU")),
                           os.environ.get("CUDA_VISIBLE_DEVICES"), bool(machine.nvidia_driver_files()), num_gpus)
    if notice:
        logging.log(*notice)


def short_name(device):
    """'/job:localhost/replica:0/task:0/device:GPU:1' -> 'GPU:1'."""
    return device.rsplit("device:", 1)[-1]


def strategy_line(strategy, devices):
    """The strategy, its replicas and workers, and this worker's first LISTED_DEVICES devices."""
    names = ", ".join(short_name(d) for d in devices[:LISTED_DEVICES])
    if len(devices) > LISTED_DEVICES:
        names += f", ... ({len(devices)} in all)"
    if strategy is None:
        return f"Strategy: none (TensorFlow's default device): {names}"
    replicas = strategy.num_replicas_in_sync
    worker_index, num_workers = distribute.worker_position(strategy)
    workers = f"{num_workers} worker(s), this is worker {worker_index}" if num_workers > 1 else "1 worker"
    return f"Strategy: {type(strategy).__name__}, {replicas} replica(s) on {workers}: {names}"


def batch_line(global_batch_size, replicas, gradient_accumulation_steps):
    """The global batch, per replica and per micro-batch."""
    per_replica = global_batch_size / replicas
    line = f"Batch: {global_batch_size}, {per_replica:g} per replica"
    if gradient_accumulation_steps > 1:
        line += (f", {per_replica / gradient_accumulation_steps:g} per replica's micro-batch "
                 f"({gradient_accumulation_steps} accumulation steps)")
    return line


def cpu_model():
    """The CPU's model name (/proc/cpuinfo, else `platform`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass  # not Linux
    return platform.processor() or platform.machine() or "unknown"


def cpu_line():
    """The host CPU's model and logical cores."""
    total = os.cpu_count() or 0
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else total
    return f"CPU: {cpu_model()}, {available} logical core(s) available to this process ({total} on the machine)"


def thread_setting(value, variable):
    """A thread pool's setting: `value`, or for 0 TensorFlow's default (`variable`'s)."""
    if value:
        return str(value)
    if os.environ.get(variable):
        return f"0 (TensorFlow's default: {variable}={os.environ[variable]})"
    return "0 (TensorFlow's default, from the available cores)"


def threads_line():
    """TensorFlow's intra-op and inter-op thread settings."""
    threading = tf.config.threading
    settings = [("intra-op", threading.get_intra_op_parallelism_threads(), "TF_NUM_INTRAOP_THREADS"),
                ("inter-op", threading.get_inter_op_parallelism_threads(), "TF_NUM_INTEROP_THREADS")]
    return "TensorFlow threads: " + ", ".join(f"{pool} {thread_setting(value, variable)}"
                                              for pool, value, variable in settings)


def physical_gpu(logical_index):
    """(CUDA ordinal, PhysicalDevice) of logical GPU `logical_index`."""
    physical = tf.config.list_physical_devices("GPU")
    first = 0
    for gpu in tf.config.get_visible_devices("GPU"):
        count = len(tf.config.get_logical_device_configuration(gpu) or [None])
        if logical_index < first + count:
            return physical.index(gpu), gpu
        first += count
    raise ValueError(f"GPU:{logical_index} is not one of TensorFlow's {first} logical GPU(s).")


def gpu_line(device):
    """A GPU's name, compute capability and total memory (from the CUDA driver)."""
    ordinal, gpu = physical_gpu(int(device.rsplit(":", 1)[1]))
    details = tf.config.experimental.get_device_details(gpu)
    capability = ".".join(map(str, details.get("compute_capability") or ())) or "unknown"
    memory = machine.gpu_memory_bytes(ordinal)
    memory = f"{memory / 2**30:.1f} GiB" if memory else "memory unknown (libcuda did not answer)"
    return (f"{short_name(device)}: {details.get('device_name', 'unknown GPU')}, compute capability {capability}, "
            f"{memory} (CUDA device {ordinal})")


def build_line():
    """TensorFlow's version and the CUDA and cuDNN versions it was built with."""
    if not tf.test.is_built_with_cuda():
        return f"TensorFlow {tf.__version__}, built without CUDA"
    info = tf.sysconfig.get_build_info()
    return (f"TensorFlow {tf.__version__}, built with CUDA {info.get('cuda_version', 'unknown')} and cuDNN "
            f"{info.get('cudnn_version', 'unknown')}")


def hides_every_gpu(cuda_visible_devices):
    """Whether CUDA_VISIBLE_DEVICES hides every GPU: its first entry names none ("", "-1")."""
    return not _GPU_ENTRY.fullmatch(cuda_visible_devices.split(",")[0].strip())


def no_gpu_notice(built_with_cuda, gpus_found, cuda_visible_devices, driver_present, num_gpus=None):
    """Why a TensorFlow built with CUDA found no GPU, as (absl's level, message), or None (GPUs found, no CUDA, or
    `num_gpus` 0): INFO where CUDA_VISIBLE_DEVICES hides them, else a WARNING (no NVIDIA driver, or CUDA libraries
    not loadable)."""
    if gpus_found or not built_with_cuda or num_gpus == 0:
        return None
    if cuda_visible_devices is not None and hides_every_gpu(cuda_visible_devices):
        return (logging.INFO, f"No GPU: CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} hides them; running on "
                                    f"the CPU.")
    if not driver_present:
        return (logging.WARNING, (
            "TensorFlow is built with CUDA but found no GPU: this machine has no NVIDIA driver (none of "
            f"{', '.join(machine.NVIDIA_DRIVER_FILES)}). Running on the CPU. On a machine with an NVIDIA GPU, "
            "install its driver; to run on the CPU without this warning, set CUDA_VISIBLE_DEVICES=-1 (or pass "
            "--num_gpus=0 to a training script)."))
    named = "" if cuda_visible_devices is None else (
        f" (or CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} names no GPU of this machine)")
    return (logging.WARNING, (
        f"TensorFlow is built with CUDA and the NVIDIA driver is present, but it found no GPU: its CUDA libraries "
        f"are most likely not loadable{named}. Running on the CPU. Install them with `pip install "
        f"{CUDA_PACKAGE}`; TensorFlow's 'Could not load dynamic library' and 'Cannot dlopen some GPU libraries' "
        f"lines above name the library that failed (shown unless TF_CPP_MIN_LOG_LEVEL is 2 or more)."))
