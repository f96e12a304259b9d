"""The run scripts' start-up and exit defaults (bert_tf/script_setup.py, imported by bert_tf/flags.py before
TensorFlow): TensorFlow's oneDNN graph rewrites on and its C++ start-up messages (CUDA stubs, cuInit, oneDNN notices)
hidden, unless the user sets TF_ENABLE_ONEDNN_OPTS / TF_CPP_MIN_LOG_LEVEL; every script's --help says so; the
objects alive at exit frozen; Keras' optional extras loaded on first use. The library alone sets none of them."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TensorFlow's C++ log lines: "2026-11-22 22:34:25.946667: I external/.../cudart_stub.cc:31] ..." or absl's
# "I0000 00:00:1795386899.757354   30289 mlir_graph_optimization_pass.cc:437] ...".
CPP_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d [\d:.]+: [IWEF] |[IWEF]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\])", re.M)
DEFAULTED = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")


@pytest.fixture
def run(child_env):
    """run(args, **env_changes): python `args` in the repository with the defaulted variables unset, then
    `env_changes` applied."""
    def run_python(args, **env_changes):
        return subprocess.run([sys.executable, *args], cwd=REPO, env=child_env(DEFAULTED, **env_changes),
                              capture_output=True, text=True, timeout=300)
    return run_python


def _help_of_a_script(run, **env_changes):
    result = run(["run_scripts/predict_masked_lm.py", "--helpshort"], **env_changes)
    assert "--input_file" in result.stdout, result.stderr[-2000:]  # it got to its flags: TensorFlow was imported
    return result


@pytest.mark.slow
def test_scripts_hide_tensorflow_cpp_messages_unless_asked(run):
    assert CPP_LOG_LINE.findall(_help_of_a_script(run).stderr) == []
    assert CPP_LOG_LINE.findall(_help_of_a_script(run, TF_CPP_MIN_LOG_LEVEL="0").stderr)  # the user's setting wins


def test_help_names_the_environment_defaults(run):
    stdout = " ".join(_help_of_a_script(run).stdout.split())  # as one line, whatever the wrapping
    assert "TF_ENABLE_ONEDNN_OPTS defaults to 1" in stdout and "TF_ENABLE_ONEDNN_OPTS=0" in stdout
    assert "TF_CPP_MIN_LOG_LEVEL defaults to 3" in stdout


@pytest.mark.parametrize("settings, expected", [({}, "1 3 True"), ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "0 3 False"),
                                                ({"TF_ENABLE_ONEDNN_OPTS": "1"}, "1 3 True"),
                                                ({"TF_CPP_MIN_LOG_LEVEL": "1"}, "1 1 True")])
def test_script_setup_sets_the_defaults_and_keeps_the_users(run, settings, expected):
    """A fresh process importing bert_tf.script_setup first (as a script does through bert_tf.flags) has the
    defaults, and keeps a value the user set; then TensorFlow's own check (IsMklEnabled): on by default on every CPU
    (TensorFlow alone leaves it off on CPUs without AVX512_VNNI/BF16, AVX_VNNI or AMX), off when the user sets 0."""
    code = ("import os, bert_tf.script_setup, tensorflow\n"
            "from tensorflow.python.util import _pywrap_util_port as port\n"
            "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], os.environ['TF_CPP_MIN_LOG_LEVEL'], port.IsMklEnabled())\n")
    result = run(["-c", code], **settings)
    assert result.stdout.strip() == expected, result.stderr[-2000:]


def test_the_objects_alive_at_exit_are_frozen_after_the_other_exit_handlers(run):
    """The last garbage collections of the interpreter skip them (bert_tf/script_setup.py): an exit handler
    registered before bert_tf.script_setup is imported runs after its handler and sees them frozen."""
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "import bert_tf.script_setup\n"
            "print('frozen before exit:', gc.get_freeze_count() > 0)\n")
    result = run(["-c", code])
    assert result.stdout.splitlines() == ["frozen before exit: False", "frozen at exit: True"], result.stderr


def test_keras_optional_extras_load_on_first_use(run):
    """Importing TensorFlow after bert_tf.script_setup leaves scikit-learn and matplotlib's pyplot unloaded (Keras'
    wrappers and plotting helpers are deferred); both Keras APIs still work when used."""
    code = ("import importlib.util, sys, bert_tf.script_setup, tensorflow as tf, keras\n"
            "loaded = lambda: [name for name in ('sklearn', 'matplotlib.pyplot') if name in sys.modules]\n"
            "print('after import:', loaded())\n"
            "wrapper = tf.keras.wrappers.SKLearnClassifier\n"
            "import sklearn.base\n"
            "print(issubclass(wrapper, sklearn.base.BaseEstimator), loaded())\n"
            "from keras.src.visualization import plot_image_gallery as gallery\n"
            "has_matplotlib = importlib.util.find_spec('matplotlib') is not None\n"
            "print(callable(keras.visualization.plot_image_gallery), (gallery.plt is not None) == has_matplotlib)\n")
    result = run(["-c", code])
    assert result.stdout.splitlines() == ["after import: []", "True ['sklearn']", "True True"], result.stderr


def test_the_library_alone_sets_none_of_the_defaults(run):
    """`import bert_tf` and a library package that imports TensorFlow, as in a user's notebook: no environment
    variable set (TensorFlow's C++ errors, e.g. a CUDA library that fails to load, stay visible), no import hook, no
    gc.freeze at exit (an exit handler registered first, so run last, sees nothing frozen)."""
    code = ("import atexit, gc, os, sys\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "import bert_tf, bert_tf.checkpoints\n"
            f"print('set:', [name for name in {DEFAULTED!r} if name in os.environ])\n"
            "print('hooks:', [type(f).__name__ for f in sys.meta_path if type(f).__name__ == 'DeferredImports'])\n"
            "print('script_setup:', 'bert_tf.script_setup' in sys.modules)\n")
    result = run(["-c", code])
    assert result.stdout.splitlines() == ["set: []", "hooks: []", "script_setup: False", "frozen at exit: False"], (
        result.stdout + result.stderr[-2000:])


def test_a_skip_fails_under_ci(tmp_path):
    """tests/conftest.py's hook: with CI=true a skipped test is a failure (a broken install of an extra); without
    it, a skip."""
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        "spec = importlib.util.spec_from_file_location('bert_tf_conftest', "
        f"{os.path.join(tests_dir, 'conftest.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "pytest_runtest_makereport = module.pytest_runtest_makereport\n")
    (tmp_path / "test_extra.py").write_text(
        "import pytest\n\ndef test_needs_an_extra():\n    pytest.importorskip('no_such_extra_module')\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    plain = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout
    ci = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env={**env, "CI": "true"})
    assert ci.returncode == 1 and "skipped under CI=true" in ci.stdout, ci.stdout
