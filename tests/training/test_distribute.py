"""bert_tf.training.distribute without the hardware: TPUStrategy on a machine without a TPU fails at once with an
error naming the TPU flags and what was not found (never a hang), and the workers' positions in a cluster
(the two-process MultiWorkerMirroredStrategy run is in test_multi_worker.py)."""
import json
import os
import socket
import sys
import threading
import time

import forkserver
import pytest
import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util

from bert_tf.tasks import runner
from bert_tf.training import distribute, peers


def _unused_port():
    """A localhost port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_tpu_environment(monkeypatch):
    """No TPU named by the environment, and the GCE metadata server (where a Cloud TPU name is looked up) at a
    localhost port that refuses connections, whatever machine the tests run on."""
    for name in ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{_unused_port()}")
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("no_proxy", "*")


def _run_config(**settings):
    return runner.RunConfig(bert_config_file="unused", vocab_file=None, output_dir="unused", **settings)


def test_tpu_without_a_name(no_tpu_environment):
    """--use_tpu or --distribution_strategy=tpu without --tpu_name/--master: what to pass, before any TPU call."""
    message = r"--distribution_strategy=tpu \(or --use_tpu\) needs a TPU: pass --tpu_name \(or --master\)"
    for settings in ({"use_tpu": True}, {"distribution_strategy": "tpu"}):
        with pytest.raises(ValueError, match=message):
            _run_config(**settings).strategy()


def test_tpu_name_that_cannot_be_resolved(no_tpu_environment):
    """A Cloud TPU name is looked up through Google Cloud: unreachable here, so the error says so and names the
    flags (the metadata server refusing the connection is in the message)."""
    with pytest.raises(ValueError, match=r"--tpu_name/--master='my-tpu': could not resolve the Cloud TPU "
                                         r"\(URLError: .*refused.*grpc://host:port"):
        _run_config(use_tpu=True, tpu_name="my-tpu").strategy()


def test_tpu_address_where_nothing_answers(no_tpu_environment):
    """A grpc:// address (--master, the original's flag) with nothing listening fails at once; one whose server
    accepts the connection but never answers (TensorFlow would wait for it forever) fails after the timeout."""
    port = _unused_port()
    with pytest.raises(ValueError, match=rf"--tpu_name/--master='grpc://127.0.0.1:{port}': no TPU worker answers "
                                         rf"at 127.0.0.1:{port} \(.*refused"):
        _run_config(distribution_strategy="tpu", master=f"grpc://127.0.0.1:{port}").strategy()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(ValueError, match=rf"no TPU worker answers at {address} \(timed out; waited up to 0.5 s"):
            distribute.connect_tpu(f"grpc://{address}", timeout=0.5)
        assert time.monotonic() - start < 5


def test_a_grpc_server_passes_the_check():
    """A real TensorFlow gRPC server (what a TPU worker runs) answers the HTTP/2 preface, so TensorFlow gets to
    connect to it; a server answering something else does not pass."""
    server = tf.distribute.Server.create_local_server(start=True)
    peers.check_grpc_server(server.target[len("grpc://"):], timeout=5)

    def answer_http1(listener):
        connection, _ = listener.accept()
        with connection:
            connection.recv(100)
            connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        thread = threading.Thread(target=answer_http1, args=(listener,))
        thread.start()
        with pytest.raises(OSError, match="does not answer as a gRPC server: b'HTTP/1.1 '"):
            peers.check_grpc_server("127.0.0.1:%d" % listener.getsockname()[1], timeout=5)
        thread.join()


CLUSTERS = [
    {"worker": ["a:1", "b:1"]},
    {"chief": ["c:1"], "worker": ["a:1", "b:1"]},
    {"chief": ["c:1"]},
    {"worker": ["a:1"]},
]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_cluster_position_numbers_workers_as_tensorflow(cluster):
    """Each task's (index, count) is TensorFlow's own numbering of MultiWorkerMirroredStrategy's workers
    (multi_worker_util.id_in_cluster and worker_count); a one-worker cluster is (0, 1)."""
    for task_type, addresses in cluster.items():
        for task_id in range(len(addresses)):
            expected = (multi_worker_util.id_in_cluster(cluster, task_type, task_id),
                        multi_worker_util.worker_count(cluster, task_type))
            assert distribute.cluster_position(cluster, task_type, task_id) == expected
    assert distribute.cluster_position(cluster, None, None) == (0, 1)


def test_one_host_strategies_are_one_worker():
    for strategy in (tf.distribute.OneDeviceStrategy("/cpu:0"), tf.distribute.MirroredStrategy(["/cpu:0"])):
        assert distribute.worker_position(strategy) == (0, 1)


# What TensorFlow 2.20's collective ops said on two local workers when the other one was SIGKILLed or SIGSTOPped.
HEARTBEATS_STOPPED = ("Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks are "
                      "unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe tasks have crashed.")
LEADER_SILENT = "Collective ops is aborted by: Deadline Exceeded\nRPC: /tensorflow.CoordinationService/Heartbeat"


@pytest.mark.parametrize("cluster, task, message, lost", [
    ({"worker": ["a:1", "b:1"]}, ("worker", 0), HEARTBEATS_STOPPED, "worker 1 of 2 (b:1)"),
    ({"worker": ["a:1", "b:1"]}, ("worker", 1), LEADER_SILENT, "worker 0 of 2 (a:1)"),  # the only other one
    ({"worker": ["a:1", "b:1", "c:1"]}, ("worker", 1), LEADER_SILENT, "another of the 3 workers"),
    ({"worker": ["a:1", "b:1", "c:1"]}, ("worker", 1), "from /job:worker/replica:0/task:1 and /job:worker/task:2",
     "worker 2 of 3 (c:1)"),  # not itself
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, ("worker", 1), "remote target /job:chief/replica:0/task:0",
     "worker 0 of 3 (c:1)"),
])
def test_the_lost_worker_is_named_by_its_index_and_address(cluster, task, message, lost):
    assert distribute.lost_worker(cluster, *task, message) == lost


# What TensorFlow 2.20 said on worker 1 of two local workers when worker 0 ended during an update.
PEER_SOCKET_CLOSED = (
    "Graph execution error:\n\nDetected at node while/CollectiveReduceV2 defined at (most recent call last):\n  File "
    "\"bert_tf/training/trainer.py\", line 286, in body\n\nCollective ops is aborted by: Socket closed\nAdditional "
    "GRPC error information from remote target /job:worker/replica:0/task:0 while calling "
    "/tensorflow.WorkerService/RecvBuf:"
    "\n:UNKNOWN:Error received from peer  {grpc_message:\"Socket closed\", grpc_status:14}\nThe error could be from a "
    "previous operation. Restart your program to reset.\n\t [[{{node while/CollectiveReduceV2}}]] "
    "[Op:__inference_train_loop_2556]")
# What TensorFlow 2.20's GCS client raised (AbortedError) reading a gs:// file once the storage did not answer; and
# the same on worker 1 of a cluster, whose own device it names.
GCS_READ = ("{{function_node __wrapped__IteratorGetNext_output_types_1_device_/job:localhost/replica:0/task:0/device:"
            "CPU:0}} All 2 retry attempts failed. The last failure: Error executing an HTTP request: libcurl code 7 "
            "meaning 'Could not connect to server', error details: Failed to connect to 127.0.0.1 port 55547 after 0 "
            "ms: Could not connect to server\n\t when reading gs://bert-tf/x.tfrecord [Op:IteratorGetNext] name: ")
GCS_READ_ON_WORKER_1 = GCS_READ.replace("/job:localhost/replica:0/task:0/", "/job:worker/replica:0/task:1/")


@pytest.mark.parametrize("message, peer", [
    (HEARTBEATS_STOPPED, True), (LEADER_SILENT, True), (PEER_SOCKET_CLOSED, True),
    (GCS_READ, False), (GCS_READ_ON_WORKER_1, False)])
def test_only_errors_from_another_worker_are_a_lost_worker(message, peer):
    """A collective op aborted by another worker, or a heartbeat's deadline, is another worker's error; this worker's
    own read of gs:// failing (the same error classes) is not, though it names this worker's own device."""
    assert distribute.from_peer({"worker": ["a:1", "b:1"]}, "worker", 1, message) is peer


def test_a_worker_that_never_joins_is_named_within_the_heartbeat_timeout():
    """The chief of a two-worker cluster whose worker 1 never starts stops, once the heartbeat timeout has passed,
    with a line naming worker 1 (TensorFlow itself waits an hour for it, holding the interpreter)."""
    chief, absent = (f"localhost:{_unused_port()}" for _ in range(2))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1",
           "TF_CONFIG": json.dumps({"cluster": {"worker": [chief, absent]}, "task": {"type": "worker", "index": 0}})}
    start = time.monotonic()
    result = forkserver.run([sys.executable, "-c", "from bert_tf.training import distribute; "
                             "distribute.multi_worker_strategy(heartbeat_timeout_seconds=2)"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == -9, result.stderr[-2000:]  # killed: TensorFlow's wait takes no signal it handles
    assert f"error: worker 1 of 2 ({absent}) did not join within 2 s (--heartbeat_timeout_seconds)" in result.stderr
    assert time.monotonic() - start < 60
