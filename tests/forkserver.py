"""Python child processes for the tests, forked from a server that has imported TensorFlow already.

The script tests run each script in a process of its own (a run script end to end, a worker of a cluster, a run
killed and resumed): importing TensorFlow took 4.3 s of CPU time in each of the ~110 of them on an AMD EPYC, a third
of the suite's CPU time. `run` and `popen` take subprocess.run's and subprocess.Popen's arguments for a command
`[sys.executable, SCRIPT | -c CODE | -m MODULE, *ARGS]` and start it as a fork of one server per test process. The
server imported what a run script imports first and nothing else: `bert_tf.script_setup` (the scripts' environment
defaults, which TensorFlow reads when it is imported), then TensorFlow and Keras; it has run no TensorFlow op, so no
runtime, thread pool or device exists in it. The child takes its environment, working directory, sys.path, sys.argv
and standard streams, runs the command as `python` does (`runpy`), and ends through the interpreter's own exit (exit
handlers, stream flushes; an uncaught exception's traceback and exit status 1).

What differs from a fresh process, by construction: TensorFlow, Keras and `bert_tf.script_setup` are imported
before the command starts (a run script imports them first anyway), and the child's environment holds the scripts'
defaults (`script_setup.ENVIRONMENT_DEFAULTS`) where it does not set them, as a run script's does once it started.
A command the server cannot stand for runs as a plain subprocess: another program or interpreter option, or an
environment that differs from the server's in a variable that TensorFlow or Python read when they start
(`fork_safe_environment`). Tests that are about a fresh process (what importing a module imports, the environment
defaults, start-up messages) use subprocess itself.

    python forkserver.py FD    # the server, on the SOCK_SEQPACKET socket FD (started by `server()`)
"""
import contextlib
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import types

DEVNULL, PIPE, STDOUT = subprocess.DEVNULL, subprocess.PIPE, subprocess.STDOUT
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Read while TensorFlow or Python start: a child whose value differs from the server's runs as a plain subprocess.
STARTUP_PREFIXES = ("TF_", "XLA_", "KERAS_", "PYTHON", "CUDA_", "OMP_", "MKL_", "KMP_", "LD_", "TPU_", "GRPC_")
# ... except these, read later (when TensorFlow's runtime starts, a cluster is resolved, a device is listed), and
# PYTHONPATH, which the child applies to its sys.path.
READ_LATER = frozenset({"TF_CONFIG", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "CUDA_VISIBLE_DEVICES",
                        "PYTHONPATH"})


# --- the server -----------------------------------------------------------------------------------------------

def serve(control):
    """Says on `control` (a SOCK_SEQPACKET socket) its environment and the scripts' defaults it applied, then forks a
    child for each request that arrives there, until it closes; sends each request's connection the child's pid,
    then its exit status."""
    import tensorflow  # noqa: F401 (the point: imported once, here)

    from bert_tf import script_setup  # imported first, by __main__ below

    control.sendall(json.dumps({"env": dict(os.environ), "defaults": script_setup.ENVIRONMENT_DEFAULTS}).encode())

    gc.collect()
    gc.freeze()  # what the imports made: a child's garbage collections skip it, as they skip nothing in a fresh process
    own = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
    base_path = [p for p in sys.path[1:] if p not in own]  # without this file's directory and PYTHONPATH
    children = {}  # pid -> the request's connection
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    while True:
        if selector.select(timeout=0.05):
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
            if not message:
                return  # the test process ended
            connection = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                selector.close()
                control.close()
                for other in children.values():
                    other.close()
                connection.close()
                run_child(json.loads(message), fds[1:], base_path)  # does not return
            for fd in fds[1:]:
                os.close(fd)
            with contextlib.suppress(OSError):
                connection.sendall(f"{pid}\n".encode())
            children[pid] = connection
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            with children.pop(pid) as connection, contextlib.suppress(OSError):  # OSError: the test process ended
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


def run_child(request, fds, base_path):
    """In the forked child: takes the request's streams, environment, directory, path and argv, and runs the command
    as `python` would; ends the process through the interpreter's exit."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    if request["cwd"]:
        os.chdir(request["cwd"])
    option, rest = request["args"][0], request["args"][1:]
    python_path = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    first = "" if option in ("-c", "-m") else os.path.dirname(os.path.abspath(option))
    sys.path[:] = [os.getcwd() if option == "-m" else first, *python_path, *base_path]
    if option == "-c":
        sys.argv = ["-c", *rest[1:]]
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(rest[0], "<string>", "exec"), main.__dict__)
    elif option == "-m":
        sys.argv = ["-m", *rest[1:]]
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [option, *rest]
        runpy.run_path(option, run_name="__main__")
    sys.exit(0)


# --- the client -----------------------------------------------------------------------------------------------

_server = {}  # this process's fork server: `server()`


def server():
    """This process's fork server, started on first use with this process's environment (this checkout first on
    PYTHONPATH): {"control": this end of its control socket, "process": its Popen, "env": its environment, the
    scripts' defaults applied, "defaults": those defaults}. This process imports nothing of bert_tf for it."""
    if not _server:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
        process = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(theirs.fileno())],
                                   pass_fds=[theirs.fileno()], stdin=DEVNULL, stdout=DEVNULL, env=env)
        theirs.close()
        hello = ours.recv(1 << 20)
        if not hello:
            raise ChildProcessError(f"the fork server ended while starting (exit status {process.wait()}; its "
                                    f"traceback is on this process's stderr)")
        _server.update(json.loads(hello), control=ours, process=process)
    return _server


def child_environment(env):
    """`env` (os.environ when None) with the scripts' environment defaults where it does not set them, as a run
    script's environment is once it has started."""
    env = dict(os.environ if env is None else env)
    for name, value in server()["defaults"].items():
        env.setdefault(name, value)
    return env


def fork_safe_environment(env):
    """Whether a child with `env` (defaults applied) can be forked from the server: equal to the server's in every
    variable read when TensorFlow or Python start."""
    server_env = server()["env"]
    names = (set(env) | set(server_env)) - READ_LATER
    return all(env.get(name) == server_env.get(name) for name in names if name.startswith(STARTUP_PREFIXES))


def forkable(args):
    """Whether `args` is `[sys.executable, SCRIPT | -c CODE | -m MODULE, ...]`."""
    if len(args) < 2 or args[0] != sys.executable:
        return False
    return args[1] in ("-c", "-m") and len(args) > 2 or not args[1].startswith("-")


def _stream(spec, default_fd, opened, ours):
    """The fd a child's stream goes to for subprocess's `spec` (None, DEVNULL, PIPE, an fd or a file object); a
    pipe's read end is appended to `ours`, what was opened here to `opened` (closed once the child has it)."""
    if spec is None:
        return default_fd
    if spec == DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
    elif spec == PIPE:
        read, fd = os.pipe()
        ours.append(read)
    elif isinstance(spec, int):
        return spec
    else:
        return spec.fileno()
    opened.append(fd)
    return fd


class Popen:
    """subprocess.Popen's interface (pid, returncode, poll, wait, communicate, send_signal, kill, terminate, stdout,
    stderr) for a child forked from the server; stdin is the null device."""

    def __init__(self, args, stdout=None, stderr=None, env=None, cwd=None, text=False):
        self.args, self.returncode, self.stdout, self.stderr = args, None, None, None
        opened, pipes = [], []
        out = _stream(stdout, 1, opened, pipes)
        if out != 1 and stdout == PIPE:
            self.stdout = os.fdopen(pipes[-1], "r" if text else "rb")
        err = out if stderr == STDOUT else _stream(stderr, 2, opened, pipes)
        if stderr == PIPE:
            self.stderr = os.fdopen(pipes[-1], "r" if text else "rb")
        null = os.open(os.devnull, os.O_RDONLY)
        opened.append(null)
        self._connection, theirs = socket.socketpair()
        request = json.dumps({"args": list(args[1:]), "env": env, "cwd": None if cwd is None else str(cwd)})
        try:
            socket.send_fds(server()["control"], [request.encode()], [theirs.fileno(), null, out, err])
        finally:
            theirs.close()
            for fd in opened:
                os.close(fd)
        self._received = b""
        self.pid = self._line(None)

    def _line(self, timeout):
        """The next number the server sends (the pid, then the exit status); None when none came within `timeout`
        seconds (None: waits)."""
        self._connection.settimeout(timeout)
        while b"\n" not in self._received:
            try:
                chunk = self._connection.recv(64)
            except (TimeoutError, BlockingIOError):
                return None
            if not chunk:
                raise ChildProcessError(f"the fork server ended before {self.args[:2]} did")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return int(line)

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self._line(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._connection.close()
        return self.returncode

    def poll(self):
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def communicate(self, timeout=None):
        """Reads the piped streams to their ends, waits; returns (stdout, stderr), None for one not piped."""
        results = {}
        readers = [threading.Thread(target=lambda name=name, f=f: results.__setitem__(name, f.read()), daemon=True)
                   for name, f in (("stdout", self.stdout), ("stderr", self.stderr)) if f is not None]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join()
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        return results.get("stdout"), results.get("stderr")

    def send_signal(self, signum):
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self):
        import signal
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        import signal
        self.send_signal(signal.SIGTERM)


def popen(args, stdout=None, stderr=None, env=None, cwd=None, text=False):
    """subprocess.Popen(args, stdout=, stderr=, env=, cwd=, text=) for a Python command, its stdin the null device:
    forked from the server where it can stand for it (module docstring), else a plain subprocess."""
    if forkable(args):
        child_env = child_environment(env)
        if fork_safe_environment(child_env):
            return Popen(args, stdout=stdout, stderr=stderr, env=child_env, cwd=cwd, text=text)
    return subprocess.Popen(args, stdout=stdout, stderr=stderr, env=env, cwd=cwd, text=text,
                            stdin=DEVNULL)


def kill_once_exists(args, path, log, env=None, cwd=None):
    """Runs `args` (`popen`, its stderr in the file `log`) and SIGKILLs it once `path` exists (a test of a run
    killed at a point it has reached); AssertionError with the log's end if it ended by itself first. Returns its
    pid."""
    with open(log, "w") as stderr:
        process = popen(args, stdout=DEVNULL, stderr=stderr, env=env, cwd=cwd)
        while not os.path.exists(path) and process.poll() is None:
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        returncode = process.wait()
    assert returncode == -signal.SIGKILL, f"the run ended by itself ({returncode}):\n" + open(log).read()[-3000:]
    return process.pid


def run(args, capture_output=False, text=False, env=None, cwd=None, timeout=None, check=False):
    """subprocess.run's counterpart of `popen`: a CompletedProcess (stdout and stderr captured with
    `capture_output`); kills the child past `timeout` (subprocess.TimeoutExpired)."""
    streams = dict(stdout=PIPE, stderr=PIPE) if capture_output else {}
    process = popen(args, env=env, cwd=cwd, text=text, **streams)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args, stdout, stderr)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


if __name__ == "__main__":
    import bert_tf.script_setup  # noqa: F401 (applies the scripts' environment defaults before TensorFlow)

    serve(socket.socket(fileno=int(sys.argv[1])))
