"""The run scripts' start-up and exit defaults (bert_tf/script_setup.py, imported by bert_tf/flags.py before
TensorFlow): TensorFlow's oneDNN graph rewrites on; its C++ INFO lines hidden, and on a machine without an NVIDIA
driver or a TPU (bert_tf.training.machine.accelerator_present) its warnings and errors too (the CUDA stubs' cuInit),
unless the user sets TF_ENABLE_ONEDNN_OPTS / TF_CPP_MIN_LOG_LEVEL; every script's --help says so; the objects alive
at exit frozen; Keras' optional extras loaded on first use. The library alone sets none of them. Also the test
suite's own hooks (tests/conftest.py): a skip fails under CI, but a cpu_only test's skip on a GPU host."""
import os
import re
import subprocess
import sys

import pytest

from bert_tf.training import machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
# TensorFlow's C++ log lines, their level I, W, E or F: "2026-11-22 22:34:25.946667: I external/.../cudart_stub.cc:31]
# ..." or absl's "I0000 00:00:1795386899.757354   30289 mlir_graph_optimization_pass.cc:437] ...".
CPP_LOG_LINE = re.compile(r"^(?:\d{4}-\d\d-\d\d [\d:.]+: ([IWEF]) |([IWEF])\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\])", re.M)
DEFAULTED = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")


def cpp_log_levels(stderr):
    """The levels (I, W, E, F) of TensorFlow's C++ log lines in `stderr`."""
    return {first or second for first, second in CPP_LOG_LINE.findall(stderr)}


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def default_help(run):
    """A script's --helpshort with the defaults (one process for the tests below)."""
    return _help_of_a_script(run)


@pytest.mark.slow
def test_scripts_hide_no_tensorflow_device_error_unless_the_machine_has_no_device(run, default_help):
    """By default a script shows none of TensorFlow's C++ INFO lines, and on a machine without an NVIDIA driver or
    a TPU no C++ line at all (there the CUDA stubs' failed cuInit is the only one); where there is a driver, its
    warnings and errors (a CUDA library that does not load) are shown. The user's TF_CPP_MIN_LOG_LEVEL=0 shows all."""
    levels = cpp_log_levels(default_help.stderr)
    assert "I" not in levels
    if not machine.accelerator_present():
        assert levels == set()
    assert "I" in cpp_log_levels(_help_of_a_script(run, TF_CPP_MIN_LOG_LEVEL="0").stderr)  # the user's setting wins


def test_help_names_the_environment_defaults(default_help):
    stdout = " ".join(default_help.stdout.split())  # as one line, whatever the wrapping
    assert "TF_ENABLE_ONEDNN_OPTS defaults to 1" in stdout and "TF_ENABLE_ONEDNN_OPTS=0" in stdout
    assert re.search(r"TF_CPP_MIN_LOG_LEVEL defaults to [13] ", stdout), stdout
    assert "TF_CPP_MIN_LOG_LEVEL is 1 on a machine with an NVIDIA driver or a TPU" in stdout


def test_the_log_level_default_shows_device_errors_where_a_device_could_be_used(run):
    """bert_tf.script_setup.cpp_log_level: 1 (warnings and errors shown) with an NVIDIA driver or a TPU, 3 without;
    a fresh script process gets the value for this machine's devices."""
    code = ("import os, bert_tf.script_setup as setup\n"
            "from bert_tf.training import machine\n"
            "print(setup.cpp_log_level(True), setup.cpp_log_level(False), os.environ['TF_CPP_MIN_LOG_LEVEL'] == "
            "setup.cpp_log_level(machine.accelerator_present()))\n")
    result = run(["-c", code])
    assert result.stdout.strip() == "1 3 True", result.stderr[-2000:]


@pytest.mark.parametrize("settings, expected", [({}, "1 default"), ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "0 default"),
                                                ({"TF_ENABLE_ONEDNN_OPTS": "1"}, "1 default"),
                                                ({"TF_CPP_MIN_LOG_LEVEL": "0"}, "1 0"),
                                                ({"TF_CPP_MIN_LOG_LEVEL": "2"}, "1 2")])
def test_script_setup_sets_the_defaults_and_keeps_the_users(run, settings, expected):
    """A fresh process importing bert_tf.script_setup first (as a script does through bert_tf.flags) has the
    defaults (TF_CPP_MIN_LOG_LEVEL: this machine's, `cpp_log_level`), and keeps a value the user set."""
    code = ("import os, bert_tf.script_setup as setup\n"
            "from bert_tf.training import machine\n"
            "level = os.environ['TF_CPP_MIN_LOG_LEVEL']\n"
            "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], "
            "'default' if level == setup.cpp_log_level(machine.accelerator_present()) else level)\n")
    result = run(["-c", code], **settings)
    assert result.stdout.strip() == expected, result.stderr[-2000:]


ONEDNN = ("from tensorflow.python.util import _pywrap_util_port as port\n"
          "print('oneDNN:', port.IsMklEnabled())\n")  # TensorFlow's own check


@pytest.fixture(scope="module")
def tensorflow_after_setup(run):
    """A fresh process importing bert_tf.script_setup, then TensorFlow and Keras, with the defaults: which of Keras'
    optional extras each step loads, then whether oneDNN is on (one process for the tests below)."""
    code = ("import importlib.util, sys, bert_tf.script_setup, tensorflow as tf, keras\n"
            "loaded = lambda: [name for name in ('sklearn', 'matplotlib.pyplot') if name in sys.modules]\n"
            "print('after import:', loaded())\n"
            "wrapper = tf.keras.wrappers.SKLearnClassifier\n"
            "import sklearn.base\n"
            "print(issubclass(wrapper, sklearn.base.BaseEstimator), loaded())\n"
            "from keras.src.visualization import plot_image_gallery as gallery\n"
            "has_matplotlib = importlib.util.find_spec('matplotlib') is not None\n"
            "print(callable(keras.visualization.plot_image_gallery), (gallery.plt is not None) == has_matplotlib)\n"
            + ONEDNN)
    result = run(["-c", code])
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


@pytest.mark.cpu_only("TensorFlow's oneDNN on an x86 CPU; a GPU host may be an Arm one")
@pytest.mark.parametrize("settings, expected", [({}, "True"), ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "False")])
def test_onednn_is_on_by_default_and_off_when_the_user_says(run, request, settings, expected):
    """TensorFlow's own check (IsMklEnabled) in a fresh process importing bert_tf.script_setup first: on by default
    on every x86 CPU (TensorFlow alone leaves it off on CPUs without AVX512_VNNI/BF16, AVX_VNNI or AMX), off when the
    user sets TF_ENABLE_ONEDNN_OPTS=0."""
    if settings:
        result = run(["-c", "import bert_tf.script_setup, tensorflow\n" + ONEDNN], **settings)
        lines, why = result.stdout.splitlines(), result.stderr[-2000:]
    else:
        lines = why = request.getfixturevalue("tensorflow_after_setup")
    assert lines[-1:] == [f"oneDNN: {expected}"], why


def test_the_objects_alive_at_exit_are_frozen_after_the_other_exit_handlers(run):
    """The last garbage collections of the interpreter skip them (bert_tf/script_setup.py): an exit handler
    registered before bert_tf.script_setup is imported runs after its handler and sees them frozen."""
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "import bert_tf.script_setup\n"
            "print('frozen before exit:', gc.get_freeze_count() > 0)\n")
    result = run(["-c", code])
    assert result.stdout.splitlines() == ["frozen before exit: False", "frozen at exit: True"], result.stderr


def test_keras_optional_extras_load_on_first_use(tensorflow_after_setup):
    """Importing TensorFlow after bert_tf.script_setup leaves scikit-learn and matplotlib's pyplot unloaded (Keras'
    wrappers and plotting helpers are deferred); both Keras APIs still work when used."""
    assert tensorflow_after_setup[:3] == ["after import: []", "True ['sklearn']", "True True"], tensorflow_after_setup


def test_the_library_alone_sets_none_of_the_defaults(run):
    """`import bert_tf` and a library package that imports TensorFlow, as in a user's notebook: no environment
    variable set (TensorFlow's C++ errors, e.g. a CUDA library that fails to load, stay visible), no import hook, no
    gc.freeze at exit (an exit handler registered first, so run last, sees nothing frozen)."""
    code = ("import atexit, gc, os, sys\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "import bert_tf, bert_tf.checkpoints\n"
            f"print('set:', [name for name in {DEFAULTED!r} if name in os.environ])\n"
            "print('hooks:', [f for f in sys.meta_path if 'bert_tf.script_setup' in repr(f)])\n"
            "print('script_setup:', 'bert_tf.script_setup' in sys.modules)\n")
    result = run(["-c", code])
    assert result.stdout.splitlines() == ["set: []", "hooks: []", "script_setup: False", "frozen at exit: False"], (
        result.stdout + result.stderr[-2000:])


HOOKED_TESTS = {
    "test_skip.py": "import pytest\n\ndef test_needs_an_extra():\n    pytest.importorskip('no_such_extra_module')\n",
    "test_cpu.py": "import pytest\n\n@pytest.mark.cpu_only('a oneDNN kernel')\ndef test_on_the_cpu():\n    pass\n"}


class _Outcomes:
    """A pytest plugin that records each test's outcome ("passed", "skipped" or "failed": its first phase that did
    not pass, else its call) and that phase's report text."""

    def __init__(self):
        self.outcomes, self.texts = {}, {}

    def pytest_runtest_logreport(self, report):
        name = report.nodeid.rsplit("::", 1)[1]
        if self.outcomes.get(name, "passed") == "passed" and (report.when == "call" or not report.passed):
            self.outcomes[name], self.texts[name] = report.outcome, report.longreprtext


@pytest.fixture(scope="module")
def hooked(tmp_path_factory):
    """pytest with tests/conftest.py's hooks on HOOKED_TESTS, in this process (the hooks read CI when a test
    reports): {False: its _Outcomes without CI, True: with CI=true}."""
    tmp_path = tmp_path_factory.mktemp("hooks")
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        "spec = importlib.util.spec_from_file_location('bert_tf_conftest', "
        f"{os.path.join(TESTS_DIR, 'conftest.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "pytest_collection_modifyitems = module.pytest_collection_modifyitems\n"
        "pytest_runtest_makereport = module.pytest_runtest_makereport\n")
    for name, code in HOOKED_TESTS.items():
        (tmp_path / name).write_text(code)
    runs, modules, path = {}, dict(sys.modules), list(sys.path)
    for ci in (False, True):
        runs[ci] = _Outcomes()
        with pytest.MonkeyPatch.context() as patch:
            if ci:
                patch.setenv("CI", "true")
            else:
                patch.delenv("CI", raising=False)
            pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-W",
                         "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(tmp_path), str(tmp_path)],
                        plugins=[runs[ci]])
    for name in set(sys.modules) - set(modules):  # its test modules and conftest, which replaced this session's
        del sys.modules[name]
    sys.modules.update(modules)
    sys.path[:] = path
    return runs


def test_a_skip_fails_under_ci(hooked):
    """tests/conftest.py's hook: with CI=true a skipped test is a failure (a broken install of an extra); without
    it, a skip."""
    assert hooked[False].outcomes["test_needs_an_extra"] == "skipped", hooked[False].texts
    assert hooked[True].outcomes["test_needs_an_extra"] == "failed", hooked[True].texts
    assert "skipped under CI=true" in hooked[True].texts["test_needs_an_extra"], hooked[True].texts


def test_cpu_only_tests_skip_with_their_reason_where_a_gpu_is_visible(hooked):
    """A test marked cpu_only runs where TensorFlow sees no GPU (this machine, unless it has one) and is skipped,
    naming its reason, where it sees one, also under CI=true."""
    import tensorflow as tf

    run = hooked[True]
    if tf.config.list_physical_devices("GPU"):
        assert run.outcomes["test_on_the_cpu"] == "skipped", run.texts
        assert "CPU-specific (a oneDNN kernel); TensorFlow sees" in run.texts["test_on_the_cpu"], run.texts
    else:
        assert run.outcomes["test_on_the_cpu"] == "passed", run.texts
