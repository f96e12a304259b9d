"""Run scripts start quiet: importing bert_tf before TensorFlow hides TensorFlow's C++ start-up messages (CUDA
stubs, cuInit, oneDNN notices) unless the user sets TF_CPP_MIN_LOG_LEVEL."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TensorFlow's C++ log lines: "2026-11-22 22:34:25.946667: I external/.../cudart_stub.cc:31] ..." or absl's
# "I0000 00:00:1795386899.757354   30289 mlir_graph_optimization_pass.cc:437] ...".
CPP_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d [\d:.]+: [IWEF] |[IWEF]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\])", re.M)


def _stderr_of_a_script_start(**env_changes):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_changes)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "run_scripts/predict_masked_lm.py", "--helpshort"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert "--input_file" in result.stdout, result.stderr[-2000:]  # it got to its flags: TensorFlow was imported
    return result.stderr


@pytest.mark.slow
def test_scripts_hide_tensorflow_cpp_messages_unless_asked():
    assert CPP_LOG_LINE.findall(_stderr_of_a_script_start()) == []
    assert CPP_LOG_LINE.findall(_stderr_of_a_script_start(TF_CPP_MIN_LOG_LEVEL="0"))  # the user's setting wins


def test_the_objects_alive_at_exit_are_frozen_after_the_other_exit_handlers():
    """The last garbage collections of the interpreter skip them (bert_tf/__init__.py): an exit handler registered
    before bert_tf is imported runs after bert_tf's and sees them frozen."""
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "import bert_tf\n"
            "print('frozen before exit:', gc.get_freeze_count() > 0)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.splitlines() == ["frozen before exit: False", "frozen at exit: True"], result.stderr
