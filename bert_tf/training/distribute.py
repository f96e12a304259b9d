"""tf.distribute strategy and Keras precision policy from the run scripts' flags."""
import keras
import tensorflow as tf
from absl import logging

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(distribution_strategy="auto", num_gpus=None, tpu=None, tpu_zone=None, gcp_project=None):
    """Returns a tf.distribute.Strategy.

    auto: TPU when `tpu` is given, MirroredStrategy over several GPUs, else OneDeviceStrategy (GPU 0 or the CPU).
    multi_worker_mirrored reads the cluster from TF_CONFIG, as TensorFlow does.
    """
    if distribution_strategy not in STRATEGIES:
        raise ValueError(f"Unknown distribution_strategy {distribution_strategy!r}; expected one of {STRATEGIES}.")
    gpus = tf.config.list_logical_devices("GPU")
    if num_gpus is not None:
        if num_gpus > len(gpus):
            raise ValueError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible.")
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


def strategy_from_flags(flag_values):
    """The strategy for the shared distribution flags (bert_tf.flags.define_distribution_flags)."""
    name = flag_values.distribution_strategy
    tpu = flag_values.tpu_name or flag_values.master
    if flag_values.use_tpu and name == "auto":
        name = "tpu"
    return get_strategy(name, flag_values.num_gpus, tpu, flag_values.tpu_zone, flag_values.gcp_project)
