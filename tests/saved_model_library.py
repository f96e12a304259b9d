"""What a SavedModel's saved_model.pb holds in its graph library, read from the proto (no TensorFlow runtime), and
`without_grappler`, the export tests' module fixture."""
import collections
import os
import re

import pytest


@pytest.fixture(scope="module", autouse=True)
def without_grappler():
    """Grappler's graph rewrites off in this process while a module's tests run (a module imports this fixture):
    they compare what exported and restored functions compute, not how fast, and the rewrites of each one cost more
    CPU than running it (a loaded text signature's first call spent most of its time optimizing the tokenizer)."""
    import tensorflow as tf

    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    yield
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def library_functions(saved_model_dir):
    """The functions (FunctionDef protos) of saved_model.pb's graph library."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    return list(proto.meta_graphs[0].graph_def.library.function)


def traced_functions(saved_model_dir):
    """How many traces of each Python function saved_model.pb holds: a Counter of the traced functions' names
    without TensorFlow's "__inference_" prefix and "_<number>" suffix (e.g. {"encode": 1, ...})."""
    return collections.Counter(re.fullmatch(r"__inference_(.*)_\d+", fn.signature.name).group(1)
                               for fn in library_functions(saved_model_dir)
                               if fn.signature.name.startswith("__inference_"))
