"""The start-up and exit defaults of the bert-tf scripts, applied when this module is imported, before TensorFlow:
by `bert_tf.flags` (every run script imports it before any other bert_tf module) and by each benchmark's `__main__`
block (its children inherit the environment). The library never imports it: `import bert_tf` or
`from bert_tf import checkpoints` in a notebook leaves the environment, the import system and the exit alone.

- Two TensorFlow environment defaults where the environment does not set them; a value the user sets is never
  changed (`ENVIRONMENT_DEFAULTS`). Both are read when TensorFlow is imported: they have no effect on a process
  that imported TensorFlow first.
  - TF_ENABLE_ONEDNN_OPTS=1: TensorFlow's oneDNN graph rewrites (MatMul + BiasAdd + activation fused into one
    kernel, oneDNN matmuls), which TensorFlow turns on by itself only on CPUs with AVX512_VNNI, AVX512_BF16,
    AVX_VNNI or AMX. `TF_ENABLE_ONEDNN_OPTS=0` turns them off (float32 results differ by rounding only).
    Measured earlier: the MiniLM encoder ran at 35 seq/s without them on an AVX2 AMD EPYC, 44-46 with them.
  - TF_CPP_MIN_LOG_LEVEL (`cpp_log_level`): 1 on a machine with an NVIDIA driver or a TPU's chips
    (`bert_tf.training.machine.accelerator_present`), which hides TensorFlow's C++ INFO lines (oneDNN notices, device
    creation notes) and shows its warnings and errors, among them those of a device that fails (a CUDA library
    that does not load: "Could not load dynamic library", "Cannot dlopen some GPU libraries", after which training
    runs on the CPU). 3 on a machine with neither, which hides them all: there the only such line is the CUDA
    stubs' failed `cuInit`, and the run's own device lines (`bert_tf.training.devices`) say in one line that the
    machine has no NVIDIA driver. `TF_CPP_MIN_LOG_LEVEL=0` shows every message.
- At exit, after every exit handler registered later, the objects still alive are frozen (`gc.freeze`), so that the
  interpreter's last garbage collections skip them. Measured earlier: 2 to 40 s of them after run_classifier.py had
  written its results. Nothing is lost: the operating system frees the memory.
- Keras' optional extras (`DEFERRED_MODULES`: its scikit-learn wrappers and plotting helpers, which import
  scikit-learn, SciPy and matplotlib's pyplot) load on their first attribute access (`DeferredImports`), not when
  `import tensorflow` imports Keras. Measured earlier: about 1.5 s of every script's start-up.

The figures and where they come from: benchmarks/log/script_startup.md.
"""
import atexit
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

from bert_tf.training import machine  # TensorFlow-free


def cpp_log_level(accelerator_present):
    """TF_CPP_MIN_LOG_LEVEL's default: "1" (TensorFlow's C++ warnings and errors shown, its INFO lines hidden) where
    the machine has a device besides the CPU (`accelerator_present`), "3" (every C++ message hidden) where it has
    none."""
    return "1" if accelerator_present else "3"


ENVIRONMENT_DEFAULTS = {"TF_ENABLE_ONEDNN_OPTS": "1",
                        "TF_CPP_MIN_LOG_LEVEL": cpp_log_level(machine.accelerator_present())}
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


os.environ.update({name: value for name, value in ENVIRONMENT_DEFAULTS.items() if name not in os.environ})
atexit.register(gc.freeze)  # registered before TensorFlow's and Keras' exit handlers, so it runs after them
if not any(isinstance(finder, DeferredImports) for finder in sys.meta_path):
    sys.meta_path.insert(0, DeferredImports(DEFERRED_MODULES))
