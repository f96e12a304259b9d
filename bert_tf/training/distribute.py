"""tf.distribute strategy and Keras precision policy for the run settings (bert_tf.tasks.runner.RunConfig)."""
import keras
import tensorflow as tf
from absl import logging

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def split_cpu(num_devices):
    """Splits the host CPU into `num_devices` logical CPU devices (one replica each under mirrored without GPUs).

    Must run before TensorFlow initializes its devices; a no-op when the CPU is already split that way.
    """
    if num_devices < 1:
        raise ValueError(f"--num_cpu_devices must be >= 1, got {num_devices}.")
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or [None]) == num_devices:
        return
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError as e:
        raise RuntimeError(f"--num_cpu_devices={num_devices}: TensorFlow's devices were initialized before the CPU "
                           f"could be split (split_cpu must run before the process's first TensorFlow op).") from e


def get_strategy(distribution_strategy="auto", num_gpus=None, tpu=None, tpu_zone=None, gcp_project=None,
                 num_cpu_devices=1):
    """Returns a tf.distribute.Strategy.

    auto: TPU when `tpu` is given, MirroredStrategy over several GPUs, else OneDeviceStrategy (GPU 0 or the CPU).
    multi_worker_mirrored reads the cluster from TF_CONFIG, as TensorFlow does. `num_gpus` limits the GPUs used
    (0: the CPU only); asking for more GPUs than are visible is an error, not a silent fall back to the CPU.
    `num_cpu_devices` > 1 splits the CPU (see `split_cpu`): mirrored without GPUs then has one replica per part.
    """
    if distribution_strategy not in STRATEGIES:
        raise ValueError(f"Unknown distribution_strategy {distribution_strategy!r}; expected one of {STRATEGIES}.")
    if num_cpu_devices != 1:
        split_cpu(num_cpu_devices)
    gpus = tf.config.list_logical_devices("GPU")
    if num_gpus is not None:
        if not 0 <= num_gpus <= len(gpus):
            raise ValueError(f"--num_gpus={num_gpus} but {len(gpus)} GPU(s) are visible: pass at most that many "
                             f"(0 trains on the CPU).")
        gpus = gpus[:num_gpus]
    if distribution_strategy == "auto":
        distribution_strategy = "tpu" if tpu else ("mirrored" if len(gpus) > 1 else "one_device")
    if distribution_strategy == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "", zone=tpu_zone,
                                                                      project=gcp_project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    elif distribution_strategy == "multi_worker_mirrored":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif distribution_strategy == "mirrored":
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices=devices)
    else:
        strategy = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    logging.info("Distribution: %s with %d replica(s)", type(strategy).__name__, strategy.num_replicas_in_sync)
    return strategy


def set_precision(policy="float32"):
    """Sets the global Keras dtype policy: float32, mixed_float16 or mixed_bfloat16. Returns the policy name."""
    if policy not in ("float32", "mixed_float16", "mixed_bfloat16"):
        raise ValueError(f"Unknown precision policy {policy!r}; expected float32, mixed_float16 or mixed_bfloat16.")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def worker_position(strategy):
    """(this worker's index, number of workers) of `strategy`: its input pipeline. Under MultiWorkerMirrored the
    chief (or worker 0 when the cluster has no chief) is 0 and the other workers follow in task order; (0, 1)
    for one-host strategies."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return 0, 1
    jobs = resolver.cluster_spec().as_dict()
    num_workers = len(jobs.get("chief", [])) + len(jobs.get("worker", []))
    if not resolver.task_type or num_workers <= 1:
        return 0, 1
    index = resolver.task_id + (len(jobs.get("chief", [])) if resolver.task_type == "worker" else 0)
    return index, num_workers
