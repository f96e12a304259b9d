"""A SavedModel loaded for serving runs fused kernels: TensorFlow's graph optimizer (Grappler, which TF Serving also
runs on the graph it loads) turns every dense layer's MatMul + BiasAdd + activation into one oneDNN
`_MklNativeFusedMatMul` kernel under bert_tf's default TF_ENABLE_ONEDNN_OPTS=1. Checked on the kernels that really
ran (TensorFlow's profiler), in a fresh process that loads the export as a server would."""
import json
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.export import exporter
from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertClassifier

# Loads the SavedModel argv[1], calls serving_default once to warm up, profiles a second call into argv[2] and
# prints {kernel type: count} of the kernels that ran.
CHILD = """
import collections, glob, json, sys
import bert_tf.script_setup  # the scripts' environment defaults (every bert-tf script imports it via bert_tf.flags)
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
inputs = {name: tf.ones((4, 16), tf.int32) for name in serve.structured_input_signature[1]}
serve(**inputs)
tf.profiler.experimental.start(sys.argv[2])
serve(**inputs)
tf.profiler.experimental.stop()
space = xplane_pb2.XSpace()
with open(glob.glob(sys.argv[2] + "/**/*.xplane.pb", recursive=True)[0], "rb") as f:
    space.ParseFromString(f.read())
kernels = collections.Counter()
for plane in space.planes:
    for line in plane.lines:
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            if ":" in name and not name.startswith("$"):
                kernels[name.rsplit(":", 1)[1]] += 1
print(json.dumps(kernels))
"""


@pytest.mark.cpu_only("oneDNN's fused CPU kernels: with a GPU the loaded export runs GPU kernels")
def test_every_dense_layer_of_a_loaded_export_runs_as_one_fused_kernel(tmp_path, child_env, uncased_vocab_file):
    layers = 2
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=128)
    tf.keras.utils.set_random_seed(0)
    model = BertClassifier(config, num_labels=3)
    path = exporter.export("classifier", str(tmp_path / "export"), model, max_seq_length=16, text_ops="none",
                           vocab_file=uncased_vocab_file)
    result = subprocess.run([sys.executable, "-c", CHILD, path, str(tmp_path / "profile")],
                            env=child_env(unset=("TF_ENABLE_ONEDNN_OPTS",)),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    kernels = json.loads(result.stdout.strip().splitlines()[-1])
    # Per layer Q, K, V, attention output, intermediate (+ GELU), output; then the pooler (+ tanh), the classifier.
    assert kernels.get("_MklNativeFusedMatMul") == 6 * layers + 2, kernels
    unfused = {k: n for k, n in kernels.items() if k in ("MatMul", "_MklMatMul", "BiasAdd", "Tanh", "_FusedMatMul")}
    assert unfused == {}, kernels
