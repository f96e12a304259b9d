"""Whether a cluster's other workers answer at their addresses, without TensorFlow: TPU workers before TensorFlow
connects, and multi-worker workers while TensorFlow starts the strategy (it holds the interpreter then, so `watch`
runs as a process of its own, from `distribute.naming_absent_workers`)."""
import os
import signal
import socket
import sys
import time

_HTTP2_SETTINGS = 4  # the frame type a server answers a connection with
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, _HTTP2_SETTINGS, 0, 0, 0, 0, 0])


def check_grpc_server(address, timeout):
    """OSError unless `address` (host:port) answers the HTTP/2 preface with a SETTINGS frame, as a gRPC server does,
    within `timeout` seconds."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(_HTTP2_PREFACE)
        header = connection.recv(9)
    if len(header) < 4 or header[3] != _HTTP2_SETTINGS:
        raise OSError(f"it does not answer as a gRPC server: {header!r} instead of an HTTP/2 SETTINGS frame")


def watch(timeout, num_workers, absent):
    """In a worker's child: waits for each of `absent` ({index: address}) to answer; one silent for `timeout`
    seconds is named on stderr and the parent SIGKILLed (TensorFlow's wait handles no signal)."""
    parent, deadline = os.getppid(), time.monotonic() + timeout
    while absent and os.getppid() == parent:
        for index, address in list(absent.items()):
            try:
                check_grpc_server(address, timeout=1.0)
                del absent[index]
            except OSError:
                pass
        if absent and time.monotonic() > deadline:
            names = ", ".join(f"worker {i} of {num_workers} ({address})" for i, address in sorted(absent.items()))
            sys.stderr.write(f"error: {names} did not join within {timeout:g} s (--heartbeat_timeout_seconds): not "
                             f"started, or it failed before its strategy (its own log says why). Start every worker "
                             f"within that time of the others, or raise it.\n")
            sys.stderr.flush()
            os.kill(parent, signal.SIGKILL)
            return
        time.sleep(0.5)


if __name__ == "__main__":  # python peers.py <timeout> <num_workers> <index>=<address>...
    watch(float(sys.argv[1]), int(sys.argv[2]), {int(i): a for i, a in (arg.split("=", 1) for arg in sys.argv[3:])})
