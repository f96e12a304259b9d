"""The formats "litert" (`model.tflite`, for LiteRT's interpreter) and "onnx" (`model.onnx`, for
onnxruntime) of `exporter.export`, for runtimes without TensorFlow: `write` converts the
SavedModel's tensor signature (any batch and length, string labels included) into the directory it
is given, with vocab.txt (and a labelled head's labels.txt) beside it. No text signatures
(TensorFlow Text's ops have no ONNX form). `quantization="dynamic_range"`: int8 matrix weights,
activations quantized at run time.
"""
import functools
import os
from unittest import mock

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.export import saved_model

FORMATS = ("litert", "onnx")
QUANTIZATIONS = ("none", "dynamic_range")
FILES = {"litert": "model.tflite", "onnx": "model.onnx"}
ONNX_OPSET = 17


def write(fmt, out, model, spec, vocab_file, labels, labels_file, *, quantization="none"):
    """Writes `model` as format `fmt` into `out` (the arguments: `exporter`'s), converting in a local directory first;
    -> its settings for the metadata."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"Unknown quantization {quantization!r}; expected one of {', '.join(QUANTIZATIONS)}.")
    specs = saved_model.tensor_specs(model)
    function = saved_model.tensor_function(model, spec, labels)
    concrete = function.get_concrete_function(**specs)
    with fileio.local_directory() as local_dir:
        local = os.path.join(local_dir, FILES[fmt])
        if fmt == "litert":
            write_litert(concrete, local, quantization)
        else:
            write_onnx(function, specs, local, quantization)
        fileio.copy_file(local, os.path.join(out, FILES[fmt]))
    fileio.copy_file(vocab_file, os.path.join(out, "vocab.txt"))
    if labels is not None:
        fileio.copy_file(labels_file, os.path.join(out, "labels.txt"))
    return {"file": FILES[fmt], "quantization": quantization, "inputs": list(specs),
            "outputs": sorted(concrete.structured_outputs)}


def write_litert(concrete, path, quantization):
    """Converts `concrete` to a LiteRT flatbuffer at `path` (signature serving_default), with the tf.Variables it reads
    frozen in (the converter misses a Keras 3 model's)."""
    holder = tf.Module()
    holder.model_variables = saved_model.function_variables([concrete])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], holder)
    if quantization == "dynamic_range":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    fileio.write_bytes_atomically(path, converter.convert())


def write_onnx(function, specs, path, quantization):
    """Converts `function` (keyword inputs `specs`) to an ONNX model at the local `path` (tf2onnx, ONNX_OPSET);
    `quantization` dynamic_range: onnxruntime's per-channel int8 quantization (the float model at `path`.float)."""
    try:
        import tf2onnx
    except ImportError as e:
        raise ImportError("--format=onnx needs tf2onnx and onnxruntime: pip install -e '.[deploy]' in "
                          "bert-tf's clone (tf2onnx, onnx, onnxruntime)") from e
    _register_erfc()
    float_path = path + ".float" if quantization == "dynamic_range" else path
    names, signature = list(specs), list(specs.values())
    positional = tf.function(lambda *args: function(**dict(zip(names, args))), input_signature=signature,
                             autograph=False)  # tf2onnx takes positional inputs
    convert = functools.partial(tf2onnx.convert.from_function, positional, input_signature=signature,
                                opset=ONNX_OPSET, output_path=float_path)
    try:
        # TF2ONNX_CATCH_ERRORS=false (restored after): tf2onnx optimizes in place instead of copying the graph before
        # each pass, the same model faster; a failing pass then raises, and the model is converted again without it.
        with mock.patch.dict(os.environ, {"TF2ONNX_CATCH_ERRORS": "false"}):
            convert()
    except Exception:  # noqa: BLE001 (a pass tf2onnx would have skipped: converted again the way that skips it)
        logging.warning("tf2onnx failed optimizing the graph in place; converting again with its roll-back copies",
                        exc_info=True)
        convert()
    if quantization == "dynamic_range":
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(float_path, path, per_channel=True, weight_type=QuantType.QInt8)


@functools.cache  # registered once per process
def _register_erfc():
    """Registers a tf2onnx conversion of TensorFlow's Erfc (exact GELU; tf2onnx has none): 1 - Erf(x), Erf being ONNX's
    since opset 9."""
    import numpy as np
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:  # noqa: F841  (registered by the decorator)
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            x = node.input[0]
            erf = ctx.make_node("Erf", [x], op_name_scope=node.name)
            one = ctx.make_const(utils.make_name(node.name + "_one"),
                                 np.array(1, utils.map_onnx_to_numpy_type(ctx.get_dtype(x))))
            node.type = "Sub"
            ctx.replace_inputs(node, [one.output[0], erf.output[0]])
