"""tests/forkserver.py: its children behave as `python` started afresh would, in what the script tests read."""
import json
import os
import signal
import subprocess
import sys

import forkserver
import pytest

REPORT = r"""
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "name": __name__,
                  "tensorflow_imported": "tensorflow" in sys.modules, "variable": os.environ.get("FORKSERVER_TEST"),
                  "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS")}))
print("to stderr", file=sys.stderr)
"""


def report(tmp_path, **env_changes):
    result = forkserver.run([sys.executable, "-c", REPORT, "a", "b c"], capture_output=True, text=True,
                            cwd=tmp_path, env={**os.environ, **env_changes}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == "to stderr"
    return json.loads(result.stdout)


def test_a_child_has_its_arguments_directory_and_environment(tmp_path):
    """... and this process's environment is left as it was (the scripts' defaults are the child's alone)."""
    before = dict(os.environ)
    seen = report(tmp_path, FORKSERVER_TEST="set")
    assert dict(os.environ) == before
    assert seen == {"argv": ["-c", "a", "b c"], "cwd": str(tmp_path), "path0": "", "name": "__main__",
                    "tensorflow_imported": True, "variable": "set", "onednn": "1"}


def test_a_variable_read_when_tensorflow_starts_gets_a_fresh_process(tmp_path):
    """TF_ENABLE_ONEDNN_OPTS=0 differs from the server's: a plain subprocess, without TensorFlow imported."""
    seen = report(tmp_path, TF_ENABLE_ONEDNN_OPTS="0")
    assert seen["onednn"] == "0" and not seen["tensorflow_imported"]


def test_a_script_sees_its_own_directory_first_and_runs_as_main(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys, helper\nprint(helper.VALUE, __name__, sys.argv)\n")
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    result = forkserver.run([sys.executable, str(script), "--flag"], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == f"7 __main__ {[str(script), '--flag']}", result.stderr[-2000:]


@pytest.mark.parametrize("code, status, message", [
    ("raise ValueError('bad value')", 1, "ValueError: bad value"),
    ("import sys; sys.exit('stopped')", 1, "stopped"),
    ("import sys; sys.exit(3)", 3, None),
    ("import atexit; atexit.register(lambda: print('exit handler'))", 0, None),
])
def test_exit_status_traceback_and_exit_handlers_are_pythons(code, status, message):
    forked = forkserver.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert forked.returncode == fresh.returncode == status
    assert forked.stdout == fresh.stdout
    assert forked.stderr.strip().splitlines()[-1:] == fresh.stderr.strip().splitlines()[-1:]
    if message:
        assert forked.stderr.strip().endswith(message)


def test_a_killed_child_reports_the_signal_and_a_slow_one_times_out(tmp_path):
    child = forkserver.popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL)
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL and child.poll() == -signal.SIGKILL
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)


def test_output_to_a_file_and_stderr_to_stdout(tmp_path):
    with open(tmp_path / "out.txt", "w") as out:
        code = "import sys; print('one'); sys.stdout.flush(); print('two', file=sys.stderr)"
        child = forkserver.popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
        assert child.wait(timeout=300) == 0
    assert (tmp_path / "out.txt").read_text().split() == ["one", "two"]
