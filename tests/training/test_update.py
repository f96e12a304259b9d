"""The update step under XLA (bert_tf.training.update): which programs --use_xla compiles for each strategy and
device kind; the whole update as one compiled program (--use_xla's on one GPU; forced here on the CPU, where
--use_xla compiles the gradients only) and, on two logical CPU replicas, the gradients and the optimizer's update
each compiled on their own with the all-reduce outside: the same numbers as without XLA and as one device (a
skipped float16 overflow step under --use_xla: tests/training/test_precision.py)."""
import json
import os
import re
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import toy_task

from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute, losses, update
from bert_tf.training.config import RunConfig

CONFIG = toy_task.config(num_hidden_layers=1)  # one layer: XLA compiles each update in about half the time


def loud_loss(labels, outputs):
    """Gradients far beyond global norm 1: clipping decides every update."""
    return 20.0 * toy_task.loss_fn(labels, outputs)


def build_update(use_xla, programs=None, accumulation=1, loss_fn=toy_task.loss_fn, config=CONFIG,
                 strategy_name="one_device", mixed_precision="float32"):
    """(strategy, Update) of a fresh toy classifier, as the Trainer builds them."""
    strategy = distribute.get_strategy(strategy_name)
    with strategy.scope():
        model = BertClassifier(config, 2)
    settings = RunConfig(use_xla=use_xla, learning_rate=1e-3, mixed_precision=mixed_precision)
    optimizer = update.build_optimizer(strategy, model, settings, 10, 1)
    loss = losses.as_batch_loss(loss_fn)
    step = update.Update(strategy, model, loss, optimizer, accumulation, use_xla=use_xla, programs=programs)
    return strategy, step


def train(use_xla, programs, config=CONFIG, strategy_name="one_device", mixed_precision="float32",
          on_trace=None):
    """(the weights, the last gradient norm) after 3 clipped updates of 2 micro-batches on global batches of 16
    (split over the replicas). `on_trace(the traced update: a ConcreteFunction)` runs before the first update."""
    distribute.set_precision(mixed_precision)
    try:
        tf.keras.utils.set_random_seed(1)
        strategy, step = build_update(use_xla, programs, 2, loud_loss, config, strategy_name, mixed_precision)
        run = tf.function(lambda batch: strategy.run(step.replica_step, args=(batch,)), autograph=False)
        batches = iter(strategy.experimental_distribute_dataset(toy_task.dataset_fn(16, seed=3)))
        batch = next(batches)
        if on_trace is not None:
            on_trace(run.get_concrete_function(batch))
        for _ in range(3):
            _, norm = run(batch)
            batch = next(batches)
        return [v.numpy() for v in step.model.weights], float(strategy.experimental_local_results(norm)[0])
    finally:
        distribute.set_precision("float32")


def max_diff(weights, other):
    return max(float(np.abs(a - b).max()) for a, b in zip(weights, other))


@pytest.fixture(scope="module")
def plain_weights():
    """The weights of `train` on one device, without XLA or dropout: the reference of the tests below."""
    return train(False, None)[0]


def test_the_whole_update_under_xla_equals_the_update_without(plain_weights):
    """Clipped updates of 2 micro-batches with dropout: the compiled update's weights are the uncompiled one's to
    float32 rounding (XLA draws the same masks)."""
    dropout = toy_task.config(dropout_prob=0.3, num_hidden_layers=1)
    dropped_weights, _ = train(False, None, dropout)
    assert max_diff(dropped_weights, plain_weights) > 1e-3  # the masks matter
    compiled_weights, norm = train(True, "whole", dropout)
    assert norm > 2  # clipped
    assert max_diff(compiled_weights, dropped_weights) < 1e-5


def test_the_compiled_program_holds_the_norm_clipping_and_the_optimizer():
    """The HLO of one update holds the gradients, the global norm (L2Loss) and the optimizer's update
    (ResourceApplyAdam for each variable, the fused AdamWeightDecay). --use_xla compiles it on one GPU only: on this
    CPU, without XLA, or with the gradients' program alone there is no compiled update."""
    strategy, step = build_update(True, "whole")
    batch = next(iter(toy_task.dataset_fn(16)))
    hlo = strategy.run(lambda b: step.compiled_step.experimental_get_compiler_ir(b)(stage="hlo"), args=(batch,))
    op_types = set(re.findall(r'op_type="(\w+)"', hlo))
    assert {"ResourceApplyAdam", "L2Loss", "MatMul", "SparseSoftmaxCrossEntropyWithLogits"} <= op_types
    default = build_update(True)[1]
    assert default.programs == "gradients" and default.compiled_step is None
    assert build_update(False, "whole")[1].compiled_step is None
    assert build_update(True, "gradients")[1].compiled_step is None


@pytest.mark.parametrize("description, programs", [
    (("one_device", "CPU", 1), "gradients"),
    (("one_device", "GPU", 1), "whole"),
    (("mirrored", "GPU", 1), "whole"),  # one GPU: nothing is all-reduced
    (("mirrored", "GPU", 2), "replicas"),
    (("mirrored", "CPU", 2), "gradients"),  # the optimizer's update compiled was slower on the CPU
    (("multi_worker_mirrored", "GPU", 4), "replicas"),
    (("multi_worker_mirrored", "CPU", 2), "gradients"),
    (("tpu", "TPU", 8), "gradients"),  # as before: TPUStrategy compiles the replica's whole step itself
])
def test_what_xla_compiles_for_each_strategy_and_device(description, programs):
    """The whole update in one program only where nothing is all-reduced (one replica, on a GPU); with several
    replicas the gradients and (on GPUs) the optimizer's update, each on its own."""
    assert update.xla_programs(*description) == programs


def test_the_strategies_described():
    """What the choice reads of the strategies this process can build (two replicas: `test_replicas_compile_...`)."""
    assert update.describe_strategy(tf.distribute.OneDeviceStrategy("/cpu:0")) == ("one_device", "CPU", 1)
    assert update.describe_strategy(tf.distribute.MirroredStrategy(["/cpu:0"])) == ("mirrored", "CPU", 1)
    assert update.describe_strategy(tf.distribute.MultiWorkerMirroredStrategy()) == ("multi_worker_mirrored", "CPU", 1)


def test_programs_that_cannot_compile_are_refused():
    """Programs are named as `xla_programs` names them; the optimizer's update compiles for a BertOptimizer only."""
    strategy = distribute.get_strategy("one_device")
    with pytest.raises(ValueError, match="Unknown XLA programs 'all': expected one of whole, gradients, replicas"):
        update.Update(strategy, None, None, None, use_xla=True, programs="all")
    with strategy.scope():
        model = BertClassifier(CONFIG, 2)
        optimizer = keras.optimizers.Adam()
    with pytest.raises(ValueError, match="compiles for a BertOptimizer only, not Adam"):
        update.Update(strategy, model, None, optimizer, use_xla=True, programs="replicas")


def test_the_optimizers_update_compiled_under_loss_scaling():
    """The gradients and the optimizer's update each compiled on their own (several GPU replicas' programs), on one
    device under mixed_float16: Keras's LossScaleOptimizer checks the gradients and applies them through a cond,
    around the compiled update: the numbers of the gradients compiled alone (float32: on two replicas,
    `test_replicas_compile_...`)."""
    compiled_weights, _ = train(True, "replicas", mixed_precision="mixed_float16")
    gradients_weights, _ = train(True, "gradients", mixed_precision="mixed_float16")
    assert max_diff(compiled_weights, gradients_weights) < 1e-5


REPLICATED = r"""
import json, sys, numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[1])
import test_update as t
from bert_tf.training import distribute, update
with np.load(sys.argv[2]) as saved:  # plain_weights, trained by the test process
    one = [saved[f"arr_{i}"] for i in range(len(saved.files))]
weights, norm = t.train(True, "replicas", strategy_name="mirrored", on_trace=lambda traced: print(
    json.dumps(t.compiled_functions(traced.graph.as_graph_def())), flush=True))
strategy = distribute.get_strategy("mirrored")
try:
    update.Update(strategy, None, None, None, use_xla=True, programs="whole")
    refused = None
except ValueError as e:
    refused = str(e)
print(json.dumps({"description": update.describe_strategy(strategy), "diff": t.max_diff(one, weights), "norm": norm,
                  "refused": refused}))
"""


def compiled_functions(graph_def):
    """{"compiled": the op types of each XLA-compiled function (`_XlaMustCompile`) of `graph_def` with the functions
    it calls, "outside": those of the rest} (lists)."""
    library = {f.signature.name: f for f in graph_def.library.function}

    def op_types(nodes, seen):
        types = set()
        for node in nodes:
            called = {node.op} | {value.func.name for value in node.attr.values() if value.func.name}
            for name in called & set(library) - seen:
                seen.add(name)
                types |= op_types(library[name].node_def, seen)
            types.add(node.op)
        return types

    compiled = [name for name, f in library.items() if f.attr["_XlaMustCompile"].b]
    outside = op_types(graph_def.node, set(compiled))
    return {"compiled": [sorted(op_types(library[name].node_def, set())) for name in compiled],
            "outside": sorted(outside)}


@pytest.mark.slow
@pytest.mark.cpu_only("replicas on logical CPU devices")
def test_replicas_compile_their_gradients_and_optimizers_update_with_the_all_reduce_outside(plain_weights, tmp_path):
    """Two logical CPU replicas (MirroredStrategy) with the gradients and the optimizer's update compiled on their
    own, as --use_xla runs several GPU replicas: clipped updates of 2 micro-batches equal one device's on the same
    global batches (dropout off; mixed_float16: `test_the_optimizers_update_compiled_under_loss_scaling`). Traced,
    each replica has its gradients' program and each device its optimizer's update (ResourceApplyAdam), and no
    compiled program holds an all-reduce (TensorFlow's collective ops, which gather the embeddings' IndexedSlices and
    sum the rest: outside). The whole update is refused with two replicas."""
    import forkserver  # here: REPLICATED imports this module with tests/training alone on its path

    np.savez(tmp_path / "plain.npz", *plain_weights)
    result = forkserver.run([sys.executable, "-c", REPLICATED, os.path.dirname(__file__), str(tmp_path / "plain.npz")],
                            capture_output=True,
                            text=True, timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"})
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert reports, result.stderr[-3000:]
    traced = reports[0]  # read before the first update ran
    gradients = [ops for ops in traced["compiled"] if "SparseSoftmaxCrossEntropyWithLogits" in ops]
    optimizer = [ops for ops in traced["compiled"] if "ResourceApplyAdam" in ops]
    assert len(gradients) == 2 and len(optimizer) == 2 and len(traced["compiled"]) == 4
    assert not [op for ops in traced["compiled"] for op in ops if op.startswith(("Collective", "Nccl"))]
    assert {"CollectiveReduceV2", "CollectiveGatherV2"} <= set(traced["outside"])
    assert result.returncode == 0, result.stderr[-3000:]
    facts = reports[1]
    assert facts["description"] == ["mirrored", "CPU", 2]
    assert facts["norm"] > 2 and facts["diff"] < 1e-5, facts
    assert "with several, the all-reduce would run inside it" in (facts["refused"] or "not refused")
