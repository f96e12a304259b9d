"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Importing bert_tf (as every run script does before TensorFlow) sets two TensorFlow environment defaults where the
environment does not set them; a value the user sets is never changed (`ENVIRONMENT_DEFAULTS`):

- TF_ENABLE_ONEDNN_OPTS=1: TensorFlow's oneDNN graph rewrites (MatMul + BiasAdd + activation fused into one
  kernel, oneDNN matmuls, ...). TensorFlow turns them on by itself only on CPUs with AVX512_VNNI, AVX512_BF16,
  AVX_VNNI or AMX; elsewhere (e.g. AMD EPYC with AVX2 and FMA only) they are off, and there the MiniLM encoder
  ran at 35 seq/s instead of 44-46. `TF_ENABLE_ONEDNN_OPTS=0` turns them off (float32 results differ by rounding
  only).
- TF_CPP_MIN_LOG_LEVEL=3: hides TensorFlow's C++ start-up messages (CUDA stub lines, a `cuInit` error on a machine
  without a GPU, oneDNN notices). `TF_CPP_MIN_LOG_LEVEL=0` shows them.

Both are read when TensorFlow is imported: they have no effect on a process that imported TensorFlow first.

At exit, after every other exit handler, the objects still alive are frozen (`gc.freeze`): the interpreter's last
garbage collections then skip them. A process that traced a model holds millions of them (graphs, Keras objects),
and those collections took 2 to 40 s after run_classifier.py had written its results (MiniLM, 2 loaded cores).
Nothing is lost: the operating system frees the memory, and Python never promised `__del__` at exit.

Keras' optional extras load on first use (`DEFERRED_MODULES`): `import keras` (which `import tensorflow` runs)
imports its scikit-learn wrappers and its plotting helpers, and with them scikit-learn, SciPy and matplotlib's
pyplot where they are installed: about 1.5 s of every script's start-up (2 CPUs), for modules no script uses. Those
Keras modules are now created empty and run on their first attribute access (`importlib.util.LazyLoader`), so
`keras.wrappers.SKLearnClassifier` and `keras.visualization.plot_image_gallery` work as before.
"""
import atexit
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

ENVIRONMENT_DEFAULTS = {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}

os.environ.update({name: value for name, value in ENVIRONMENT_DEFAULTS.items() if name not in os.environ})
atexit.register(gc.freeze)  # registered first, so run last

DEFERRED_MODULES = frozenset({"keras.wrappers", "keras.visualization", "keras.src.visualization"})


class DeferredImports(importlib.abc.MetaPathFinder):
    """Finds the modules in `names` as the import system would, and loads them on their first attribute access."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


if not any(isinstance(finder, DeferredImports) for finder in sys.meta_path):
    sys.meta_path.insert(0, DeferredImports(DEFERRED_MODULES))
