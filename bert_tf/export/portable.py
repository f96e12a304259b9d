"""Exports for runtimes without TensorFlow: LiteRT (TFLite) and ONNX, converted from the SavedModel's tensor signature.

`export_portable(model, task, fmt, export_dir, ...)` writes `export_dir/<version>/` (first under a temporary name,
renamed when complete, as the SavedModel export):

| format   | file          | runs with                                    | inputs, outputs                            |
|----------|---------------|----------------------------------------------|--------------------------------------------|
| `litert` | `model.tflite`| LiteRT's interpreter (`ai_edge_litert`, or   | signature `serving_default`: the           |
|          |               | `tf.lite.Interpreter`), any batch and length | SavedModel's (`saved_model.tensor_specs`;  |
| `onnx`   | `model.onnx`  | onnxruntime; batch and length dynamic        | outputs by name, string labels included)   |

with `vocab.txt` (and `labels.txt` for classifier and NER) beside it and `assets.extra/export_metadata.json`. The
text signatures stay TensorFlow's: TensorFlow Text's tokenizer ops have no ONNX form, and LiteRT runs them only
with TensorFlow Text's custom ops registered; tokenize with the original FullTokenizer (the same ids) and feed the
tensor signature.

`quantization="dynamic_range"`: the weights of the matrix multiplications stored as int8 and the activations
quantized at run time (LiteRT's `Optimize.DEFAULT` without a calibration set; onnxruntime's `quantize_dynamic`,
per channel). About a quarter of the float model's size; accuracy: BENCHMARKS.md, "LiteRT and ONNX".

ONNX: tf2onnx (opset 17) converts TensorFlow's graph, with one op it lacks written here: `Erfc` (the exact GELU of
`gelu_exact` models such as MiniLM) as 1 - Erf.
"""
import functools
import os

import tensorflow as tf
from absl import logging

from bert_tf.export import saved_model

FORMATS = ("litert", "onnx")
QUANTIZATIONS = ("none", "dynamic_range")
FILES = {"litert": "model.tflite", "onnx": "model.onnx"}
ONNX_OPSET = 17


def check_options(fmt, quantization):
    """Raises ValueError for an unknown format or quantization."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"Unknown quantization {quantization!r}; expected one of {', '.join(QUANTIZATIONS)}.")


def export_portable(model, task, fmt, export_dir, vocab_file, do_lower_case=True, max_seq_length=128, version=1,
                    overwrite=False, label_list=None, quantization="none"):
    """Writes `model` (a Keras task model of `task`, weights loaded) as `fmt` ("litert" or "onnx") to
    `export_dir/<version>/` (module docstring). Returns that directory."""
    check_options(fmt, quantization)
    saved_model.version_dir(export_dir, version, overwrite)  # fail before the conversion
    labels = saved_model.task_labels(model, task, label_list)
    specs = saved_model.tensor_specs(task)
    function = saved_model.tensor_function(model, task, labels)
    concrete = function.get_concrete_function(**specs)

    def write(src_dir, vocab_copy, out_dir):
        os.makedirs(out_dir)
        path = os.path.join(out_dir, FILES[fmt])
        if fmt == "litert":
            write_litert(concrete, path, quantization)
        else:
            write_onnx(function, specs, path, quantization)
        os.replace(vocab_copy, os.path.join(out_dir, "vocab.txt"))
        if labels is not None:
            saved_model.write_labels(out_dir, labels)
        saved_model.write_metadata(out_dir, {
            "task": task, "format": fmt, "file": FILES[fmt], "quantization": quantization,
            "do_lower_case": bool(do_lower_case), "max_seq_length": int(max_seq_length),
            "inputs": list(specs), "outputs": sorted(concrete.structured_outputs),
            "labels": labels, "bert_config": (model if task == "encoder" else model.bert).config.to_dict()})

    final_dir = saved_model.write_version(export_dir, version, overwrite, vocab_file, write)
    logging.info("Exported the %s model as %s (%s) to %s", task, fmt, quantization, final_dir)
    return final_dir


def write_litert(concrete, path, quantization):
    """Converts `concrete` (the tensor function) to a LiteRT flatbuffer at `path`, its signature named
    serving_default, the variables it reads frozen into it (tracked as tf.Variables: the converter does not find
    those of a Keras 3 model, and would write a model without weights)."""
    holder = tf.Module()
    holder.model_variables = saved_model.function_variables([concrete])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], holder)
    if quantization == "dynamic_range":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    with open(path, "wb") as f:
        f.write(converter.convert())


def write_onnx(function, specs, path, quantization):
    """Converts `function` (the tensor function, keyword inputs `specs`) to an ONNX model at `path` (tf2onnx, opset
    ONNX_OPSET; the inputs named as the specs); `quantization` dynamic_range: onnxruntime's dynamic int8
    quantization of it, per channel."""
    try:
        import tf2onnx
    except ImportError as e:
        raise ImportError("--format=onnx needs tf2onnx and onnxruntime: pip install 'bert-tf[deploy]' "
                          "(tf2onnx, onnx, onnxruntime)") from e
    _register_erfc()
    float_path = path + ".float" if quantization == "dynamic_range" else path
    names, signature = list(specs), list(specs.values())
    positional = tf.function(lambda *args: function(**dict(zip(names, args))), input_signature=signature,
                             autograph=False)  # tf2onnx takes positional inputs
    tf2onnx.convert.from_function(positional, input_signature=signature, opset=ONNX_OPSET, output_path=float_path)
    if quantization == "dynamic_range":
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(float_path, path, per_channel=True, weight_type=QuantType.QInt8)
        os.remove(float_path)


@functools.cache  # registered once per process
def _register_erfc():
    """Registers tf2onnx's conversion of TensorFlow's Erfc (tf2onnx 1.17 has none and writes a node onnxruntime
    refuses): Erfc(x) = 1 - Erf(x), ONNX's Erf being there from opset 9."""
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


def export_from_checkpoint(task, fmt, bert_config_file, vocab_file, init_checkpoint, export_dir, do_lower_case=None,
                           max_seq_length=128, num_labels=None, label_list=None, version=1, overwrite=False,
                           quantization="none", **options):
    """Loads the task model of `init_checkpoint` (`saved_model.load_task_model`, with the task's `options`) and
    exports it as `fmt` (`export_portable`). Bad options fail before the model loads."""
    check_options(fmt, quantization)
    labels, num_labels = saved_model.given_labels(num_labels, label_list)
    saved_model.version_dir(export_dir, version, overwrite)
    loaded = saved_model.load_task_model(task, init_checkpoint, bert_config_file, vocab_file, do_lower_case,
                                         max_seq_length, num_labels, **options)
    return export_portable(loaded.model, task, fmt, export_dir, loaded.files.vocab_file, loaded.files.do_lower_case,
                           max_seq_length, version, overwrite, labels, quantization)
