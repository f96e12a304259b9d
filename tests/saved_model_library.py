"""What a SavedModel's saved_model.pb holds in its graph library, read from the proto (no TensorFlow runtime)."""
import collections
import os
import re


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
