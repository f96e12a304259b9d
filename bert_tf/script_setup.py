"""The scripts' start-up and exit defaults, applied on import before TensorFlow, by `bert_tf.flags` and each
benchmark's `__main__`; the library never imports it.

- `ENVIRONMENT_DEFAULTS` where the environment does not set them: TF_ENABLE_ONEDNN_OPTS=1 (oneDNN's fused kernels)
  and TF_CPP_MIN_LOG_LEVEL (`cpp_log_level`).
- At exit, after the other exit handlers, `gc.freeze`, so the last collections skip the live objects.
- Keras' optional extras (`DEFERRED_MODULES`) load on first attribute access.
"""
import atexit
import gc
import importlib.machinery
import importlib.util
import os
import sys

from bert_tf.training import machine  # TensorFlow-free


def cpp_log_level(accelerator_present):
    """TF_CPP_MIN_LOG_LEVEL's default: "1" with an NVIDIA driver or a TPU (C++ warnings shown), else "3" (all hidden:
    `bert_tf.training.devices` says there is no driver)."""
    return "1" if accelerator_present else "3"


ENVIRONMENT_DEFAULTS = {"TF_ENABLE_ONEDNN_OPTS": "1",
                        "TF_CPP_MIN_LOG_LEVEL": cpp_log_level(machine.accelerator_present())}
DEFERRED_MODULES = frozenset({"keras.wrappers", "keras.visualization", "keras.src.visualization"})


def find_spec(fullname, path, target=None):
    """The import hook (this module, in sys.meta_path): finds DEFERRED_MODULES as the import system would, loaded on
    their first attribute access; None for the others."""
    if fullname not in DEFERRED_MODULES:
        return None
    spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
    if spec is not None and spec.loader is not None:
        spec.loader = importlib.util.LazyLoader(spec.loader)
    return spec


os.environ.update({name: value for name, value in ENVIRONMENT_DEFAULTS.items() if name not in os.environ})
atexit.register(gc.freeze)  # registered before TensorFlow's and Keras' exit handlers, so it runs after them
if sys.modules[__name__] not in sys.meta_path:
    sys.meta_path.insert(0, sys.modules[__name__])
