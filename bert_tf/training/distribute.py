"""tf.distribute strategy and Keras precision policy for the run settings (bert_tf.tasks.runner.RunConfig)."""
import contextlib
import re
import subprocess
import sys

import keras
import tensorflow as tf
from absl import logging
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

from bert_tf.training import peers

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")  # the Keras dtype policies of --mixed_precision
TPU_CONNECT_TIMEOUT_S = 10.0  # how long a TPU worker's address may take to answer
HEARTBEAT_TIMEOUT_S = 10  # TensorFlow's own: a worker silent for longer is taken as lost (--heartbeat_timeout_seconds)
# What a collective op raises when another worker stops responding; this worker's own I/O raises them too (a GCS
# 503): `from_peer` tells them apart.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError)
_PEER_MESSAGE = re.compile(r"Collective ops is aborted|CoordinationService|coordination service|heartbeat",
                           re.IGNORECASE)
_TASK_NAME = re.compile(r"/job:(chief|worker)/(?:replica:\d+/)?task:(\d+)")


class WorkerLost(ConnectionError):
    """Another worker of a multi-worker run stopped responding."""


def split_cpu(num_devices):
    """Splits the CPU into `num_devices` logical devices; must run before TensorFlow initializes its devices."""
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
                 num_cpu_devices=1, heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_S):
    """A tf.distribute.Strategy; auto: TPU when `tpu` is given, else mirrored over several GPUs, else one device.
    `num_gpus` limits the GPUs (0: the CPU; more than are visible: ValueError)."""
    if distribution_strategy not in STRATEGIES:
        raise ValueError(f"Unknown distribution_strategy {distribution_strategy!r}; expected one of {STRATEGIES}.")
    if num_cpu_devices != 1:
        split_cpu(num_cpu_devices)
    # Listing physical devices does not start TensorFlow's runtime (too early for multi_worker_mirrored).
    visible = len(tf.config.list_physical_devices("GPU"))
    if num_gpus is not None and not 0 <= num_gpus <= visible:
        raise ValueError(f"--num_gpus={num_gpus} but {visible} GPU(s) are visible: pass at most that many "
                         f"(0 trains on the CPU).")
    if distribution_strategy == "auto":
        used = visible if num_gpus is None else num_gpus
        distribution_strategy = "tpu" if tpu else ("mirrored" if used > 1 else "one_device")
    if distribution_strategy == "tpu":
        strategy = tf.distribute.TPUStrategy(connect_tpu(tpu, tpu_zone, gcp_project))
    elif distribution_strategy == "multi_worker_mirrored":
        strategy = multi_worker_strategy(heartbeat_timeout_seconds)
    else:
        gpus = tf.config.list_logical_devices("GPU")[:num_gpus]
        if distribution_strategy == "mirrored":
            devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
            strategy = tf.distribute.MirroredStrategy(devices=devices)
        else:
            strategy = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    logging.info("Distribution: %s with %d replica(s)", type(strategy).__name__, strategy.num_replicas_in_sync)
    return strategy


def multi_worker_strategy(heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_S):
    """MultiWorkerMirroredStrategy over TF_CONFIG's cluster; must come before the process's first TensorFlow op.
    A worker silent for `heartbeat_timeout_seconds`, or not started within that time, is named."""
    if heartbeat_timeout_seconds <= 0:
        raise ValueError(f"--heartbeat_timeout_seconds must be > 0, got {heartbeat_timeout_seconds}.")
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # TensorFlow's coordination service with a heartbeat timeout, so that collective ops fail (PEER_ERRORS) rather
    # than wait forever for a lost worker: the calls of TensorFlow's collective_all_reduce_strategy.py.
    cluster_spec = resolver.cluster_spec()
    jobs = [job for job in ("chief", "worker") if job in cluster_spec.jobs]
    if resolver.task_type in jobs and context.context().coordination_service is None:
        context.context().configure_coordination_service(
            service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster_spec),
            heartbeat_timeout_in_ms=int(heartbeat_timeout_seconds * 1000),
            coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster_spec.num_tasks(job))
                              for job in jobs])
    try:
        with naming_absent_workers(resolver, heartbeat_timeout_seconds):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    except RuntimeError as e:
        if "must be configured at program startup" not in str(e):
            raise
        raise RuntimeError("--distribution_strategy=multi_worker_mirrored: TensorFlow ran an op before the strategy "
                           "was created; with a TF_CONFIG cluster of several workers the strategy must come before "
                           "the process's first TensorFlow op.") from e
    service = context.context().coordination_service
    if service is not None:
        logging.info("Workers' heartbeat timeout: %g s (a worker silent for longer is taken as lost)",
                     service.heartbeat_timeout_in_ms / 1000)
    return strategy


@contextlib.contextmanager
def naming_absent_workers(resolver, timeout):
    """While the block starts the strategy, `peers.watch` names and stops this process if another worker does not
    answer within `timeout` seconds (TensorFlow would wait an hour)."""
    cluster = resolver.cluster_spec().as_dict()
    own, num_workers = cluster_position(cluster, resolver.task_type, resolver.task_id)
    others = [f"{index}={address}" for job in ("chief", "worker") for task, address in enumerate(cluster.get(job, []))
              for index in [cluster_position(cluster, job, task)[0]] if index != own]
    if not others:
        yield
        return
    watcher = subprocess.Popen([sys.executable, "-I", peers.__file__, str(timeout), str(num_workers), *others])
    try:
        yield
    finally:
        watcher.kill()
        watcher.wait()


@contextlib.contextmanager
def naming_lost_workers(strategy, output_dir):
    """Turns a collective op's error about another worker into a WorkerLost naming it and how to resume."""
    try:
        yield
    except PEER_ERRORS as e:
        index, num_workers = worker_position(strategy)
        if num_workers == 1:
            raise
        resolver = strategy.cluster_resolver
        task = resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id
        if not from_peer(*task, e.message):
            raise
        lost = lost_worker(*task, e.message)
        raise WorkerLost(
            f"{lost} stopped responding during training (it ended, or its host is down or unreachable; "
            f"TensorFlow's {type(e).__name__}; its own log says why if it failed): worker {index} stops too. "
            f"Restart every worker with the same flags: the run resumes from the latest checkpoint every worker "
            f"has in {output_dir}.") from e


def from_peer(cluster, task_type, task_id, message):
    """Whether TensorFlow's error `message` comes from another worker rather than this worker's own op."""
    index, _ = cluster_position(cluster, task_type, task_id)
    named = {cluster_position(cluster, job, int(task))[0] for job, task in _TASK_NAME.findall(message)}
    return bool(named - {index} or _PEER_MESSAGE.search(message))


def lost_worker(cluster, task_type, task_id, message):
    """'worker <i> of <n> (<address>)' of the other worker `message` names (or the only other one), else
    'another of the <n> workers'."""
    index, num_workers = cluster_position(cluster, task_type, task_id)
    others = [(job, task) for job in ("chief", "worker") for task in range(len(cluster.get(job, [])))
              if cluster_position(cluster, job, task)[0] != index]
    named = [(job, int(task)) for job, task in _TASK_NAME.findall(message)]
    lost = next((task for task in named if task in others), others[0] if len(others) == 1 else None)
    if lost is None:
        return f"another of the {num_workers} workers"
    job, task = lost
    return f"worker {cluster_position(cluster, job, task)[0]} of {num_workers} ({cluster[job][task]})"


def worker_values(strategy, values):
    """{worker index: its `values`} by one all-gather (every worker calls it at the same point)."""
    index, _ = worker_position(strategy)
    row = tf.constant([[index, *values]], tf.int64)
    rows = strategy.gather(strategy.experimental_distribute_values_from_function(lambda _: row), axis=0)
    return {int(gathered[0]): [int(value) for value in gathered[1:]] for gathered in rows.numpy()}


def connect_tpu(tpu=None, tpu_zone=None, gcp_project=None, timeout=TPU_CONNECT_TIMEOUT_S):
    """Connects to and initializes the TPU `tpu` (a name, grpc://host:port or "local"); returns its resolver;
    ValueError at once if it is not found."""
    flag = f"--tpu_name/--master={tpu!r}"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "", zone=tpu_zone,
                                                                      project=gcp_project)
        workers = [address for job in resolver.cluster_spec().jobs
                   for address in resolver.cluster_spec().job_tasks(job)]
    except (ValueError, RuntimeError, OSError) as e:
        if not tpu:
            raise ValueError("--distribution_strategy=tpu (or --use_tpu) needs a TPU: pass --tpu_name (or --master): "
                             "a Cloud TPU's name, its grpc://host:port address, or 'local' on a TPU VM. None was "
                             f"given and the environment names none (TPU_NAME): {e}") from e
        raise ValueError(f"{flag}: could not resolve the Cloud TPU ({type(e).__name__}: {e}). A TPU name is looked up "
                         f"through Google Cloud (the metadata server of a GCE VM; the Cloud TPU API with --tpu_zone "
                         f"and --gcp_project); from elsewhere pass the TPU's grpc://host:port address.") from e
    for address in workers:
        try:
            peers.check_grpc_server(address, timeout)
        except OSError as e:
            raise ValueError(f"{flag}: no TPU worker answers at {address} ({e}; waited up to {timeout:g} s).") from e
    try:
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except tf.errors.OpError as e:
        raise ValueError(f"{flag}: no TPU found there ({e.message.splitlines()[0]}).") from e
    return resolver


def set_precision(policy="float32"):
    if policy not in PRECISIONS:
        raise ValueError(f"Unknown precision policy {policy!r}; expected one of {', '.join(PRECISIONS)}.")
    keras.mixed_precision.set_global_policy(policy)


def worker_position(strategy):
    """(this worker's index, number of workers): `cluster_position`'s; (0, 1) for one-host strategies."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return 0, 1
    return cluster_position(resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id)


def cluster_position(cluster, task_type, task_id):
    """(index, number of workers) of a task of TF_CONFIG's `cluster`: the chief (else worker 0) first."""
    chiefs = len(cluster.get("chief", []))
    num_workers = chiefs + len(cluster.get("worker", []))
    if not task_type or num_workers <= 1:
        return 0, 1
    return task_id + (chiefs if task_type == "worker" else 0), num_workers
