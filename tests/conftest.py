"""Shared pytest fixtures: paths to the small fixtures and goldens kept in tests/fixtures."""
import gc
import os

import pytest

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
SKIPPED_ON_A_GPU_HOST = pytest.StashKey[bool]()  # a cpu_only test's item, where TensorFlow sees a GPU

# Under pytest-xdist (`dev.py test`: a worker per core) the workers and the processes they start share the cores:
# one TensorFlow thread per pool each, unless the environment sets its own. TensorFlow's default, a pool of a thread
# per core in every process, oversubscribed the cores: tests/training, tests/data and the distribution tests took
# 414 s on 2 cores, 257 s with one thread each.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_name, "1")


def visible_gpus():
    """The GPUs TensorFlow sees in this process (listing physical devices does not start TensorFlow's runtime)."""
    import tensorflow as tf
    return tf.config.list_physical_devices("GPU")


def pytest_collection_modifyitems(config, items):
    """Skips the tests marked cpu_only, naming the marker's reason and the GPUs, where TensorFlow sees a GPU: what
    they assert (a oneDNN kernel, an x86 default, replicas on logical CPU devices) does not hold there.

    Runs the test modules holding a slow test first, each module's tests kept together and in order: under
    `--dist loadfile` (`dev.py test`) xdist hands the modules to its workers in this order, each worker taking the
    next when it is done, so that the last ones, which decide how long one worker waits for the other at the end,
    are short."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)
    marked = [item for item in items if item.get_closest_marker("cpu_only")]
    gpus = visible_gpus() if marked else []
    for item in marked if gpus else []:
        reason = item.get_closest_marker("cpu_only").args[0]
        item.add_marker(pytest.mark.skip(reason=f"CPU-specific ({reason}); TensorFlow sees {len(gpus)} GPU(s)"))
        item.stash[SKIPPED_ON_A_GPU_HOST] = True


def pytest_collection_finish(session):
    """Moves what collection made (TensorFlow, Keras, bert_tf and the test modules, imported once a process and kept
    to its end) out of the garbage collector's reach: each full collection then walks only what the tests made
    since. Measured on tests/training/test_trainer.py, test_classifier.py and test_architecture.py in one process:
    the full collections took 14.2 s of 118 s before, 6.0 s after; a test that builds many Python objects right
    after others built TensorFlow models (test_architecture's AST walks) ran 11.6 s instead of 0.4 s."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test module's last test (its module fixtures torn down), collects its garbage and freezes what
    survives (the module itself, caches, the session's fixtures): a later module's full collections walk only what
    it made. Measured on the whole suite (2 workers) before: the workers' garbage collections took 61 s, 57 of them
    in 143 full collections (0.4 s each on average)."""
    yield
    if nextitem is None or nextitem.module is not item.module:
        gc.collect()
        gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (CI=true) a skipped test fails: the test command installs every extra the tests need (Model Garden,
    TF Hub, Apache Beam, the data packages), so a skip there means a broken install, not an optional one. A cpu_only
    test skipped on a GPU host stays a skip."""
    outcome = yield
    report = outcome.get_result()
    if (os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail")
            and not item.stash.get(SKIPPED_ON_A_GPU_HOST, False)):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where every extra is installed: {reason}"


@pytest.fixture(scope="session")
def data_dir():
    return DATA_DIR


@pytest.fixture(scope="session")
def uncased_vocab_file():
    """The bert-base-uncased vocabulary (30,522 tokens), as shipped with the MiniLM model."""
    return os.path.join(DATA_DIR, "uncased_vocab.txt")


@pytest.fixture(scope="session")
def child_env():
    """child_env(unset=(), **changes) -> an environment for a child Python process: this one's, without the
    variables in `unset`, with `changes`, and this checkout first on PYTHONPATH (so that the child imports this
    checkout's bert_tf, whatever the venv has installed)."""
    repo = os.path.dirname(os.path.dirname(DATA_DIR))

    def make(unset=(), **changes):
        env = {k: v for k, v in os.environ.items() if k not in unset}
        env.update(changes)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
        return env
    return make


# Runs a script's absl main once per argv in one process (TensorFlow is imported once); prints each error or None.
_MAIN_DRIVER = """
import importlib.util, json, sys
from absl import flags, logging
logging.use_absl_handler()
spec = importlib.util.spec_from_file_location("script", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
errors = []
for argv in json.loads(sys.argv[2]):
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["script"] + argv)
    logging.set_verbosity(logging.INFO)  # the runs' logs on stderr, as under app.run
    try:
        module.main(None)
        errors.append(None)
    except Exception as e:
        errors.append(type(e).__name__ + ": " + str(e))
print("ERRORS " + json.dumps(errors))
"""


@pytest.fixture(scope="session")
def run_main():
    """run_main(script, *argvs) -> for each argv (a list of flags), "ExceptionType: message" of the error the
    script's main raised, or None: one subprocess for several runs of a run_scripts/ script, in order. With
    `with_logs=True`: (those errors, the process's stderr: the runs' absl logs)."""
    import json
    import sys

    import forkserver

    def run(script, *argvs, with_logs=False):
        result = forkserver.run([sys.executable, "-c", _MAIN_DRIVER, script, json.dumps(argvs)],
                                capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(DATA_DIR)),
                                timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        errors = json.loads(result.stdout.split("ERRORS ", 1)[1])
        return (errors, result.stderr) if with_logs else errors
    return run


@pytest.fixture
def tiny_config():
    """L=2, H=32, A=4: small enough that a forward pass takes milliseconds."""
    from bert_tf.model.config import BertConfig
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=24, type_vocab_size=2)


@pytest.fixture
def tiny_batch():
    """input_ids, input_mask, segment_ids [3, 9] int32, with padding in two rows."""
    import numpy as np
    rng = np.random.RandomState(5)
    input_ids = rng.randint(1, 99, size=(3, 9)).astype(np.int32)
    input_mask = np.ones((3, 9), np.int32)
    input_mask[1, 6:] = 0
    input_mask[2, 3:] = 0
    input_ids[input_mask == 0] = 0
    segment_ids = np.zeros((3, 9), np.int32)
    segment_ids[0, 5:] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


@pytest.fixture(scope="session")
def minilm_release(tmp_path_factory):
    """The real MiniLM (L=6, H=384, uncased 30,522-token vocab) converted once per session by our converter into
    an original-format release directory (bert_model.ckpt, bert_config.json saying "gelu_exact", vocab.txt).
    Shared by every test that needs real pre-trained weights; tests must not write into it."""
    from bert_tf import checkpoints, resources
    return checkpoints.convert_hf_to_original(resources.minilm_dir(), str(tmp_path_factory.mktemp("minilm")))


@pytest.fixture(scope="session")
def golden_checkpoint(tmp_path_factory, minilm_release):
    """The checkpoint the goldens in tests/fixtures were made with: the real MiniLM under the original variable names,
    `bert_config.json` saying "gelu" (tanh, as the original computes it), plus fixed task heads drawn like the
    golden tool draws them (NumPy RandomState(17), normal(0, 0.2): output_weights [2, H], output_bias [2],
    cls/squad/output_weights [2, H], cls/squad/output_bias [2]). Returns the release directory."""
    import json
    import shutil

    import numpy as np
    import tensorflow as tf

    out = str(tmp_path_factory.mktemp("golden_ckpt"))
    reader = tf.train.load_checkpoint(os.path.join(minilm_release, "bert_model.ckpt"))
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    rng = np.random.RandomState(17)
    hidden = tensors["bert/pooler/dense/bias"].shape[0]
    tensors["output_weights"] = rng.normal(0, 0.2, (2, hidden)).astype(np.float32)
    tensors["output_bias"] = rng.normal(0, 0.2, (2,)).astype(np.float32)
    tensors["cls/squad/output_weights"] = rng.normal(0, 0.2, (2, hidden)).astype(np.float32)
    tensors["cls/squad/output_bias"] = rng.normal(0, 0.2, (2,)).astype(np.float32)
    names = sorted(tensors)
    prefix = os.path.join(out, "bert_model.ckpt")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    with open(os.path.join(DATA_DIR, "minilm_golden_bert_config.json")) as f:
        config = json.load(f)
    with open(os.path.join(out, "bert_config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    shutil.copyfile(os.path.join(minilm_release, "vocab.txt"), os.path.join(out, "vocab.txt"))
    return out

