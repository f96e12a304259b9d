"""LiteRT and ONNX exports (bert_tf/export/portable.py, export_saved_model.py --format=litert|onnx): every kind of
task's tensor signature, run in a process that imports neither bert_tf nor TensorFlow's Keras model (LiteRT's
interpreter, onnxruntime), equals the Keras model; int8 weights keep the model's logits; the golden MRPC classifier
gives the original's probabilities."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import task_inputs
import tensorflow as tf

from bert_tf.export import exporter, portable
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.text import packing, tokenization

# Runs model files on JSON inputs in a fresh process: no bert_tf, no Keras model; prints the outputs as JSON.
RUNNER = r"""
import json, sys
import numpy as np
decode = lambda v: v.decode() if isinstance(v, bytes) else v
results = []
for path, fmt, inputs in json.load(open(sys.argv[1])):
    feed = {name: np.array(value, np.int32) for name, value in inputs.items()}
    if fmt == "onnx":
        import onnxruntime
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        outputs = dict(zip(names, session.run(None, feed)))
    else:
        from ai_edge_litert.interpreter import Interpreter
        interpreter = Interpreter(path)
        assert list(interpreter.get_signature_list()) == ["serving_default"]
        outputs = interpreter.get_signature_runner("serving_default")(**feed)
    results.append({name: np.vectorize(decode)(v).tolist() if v.dtype == object else v.tolist()
                    for name, v in outputs.items()})
assert not any(name.startswith("bert_tf") or name.startswith("keras") for name in sys.modules)
print(json.dumps(results))
"""


def run_fresh(tmp_path, jobs):
    """The outputs of each job (the path of a model file, its format, its inputs: name -> int32 array), from one
    fresh process."""
    jobs_file = tmp_path / "runner_jobs.json"
    jobs_file.write_text(json.dumps([(str(path), fmt, {k: np.asarray(v).tolist() for k, v in inputs.items()})
                                     for path, fmt, inputs in jobs]))
    result = subprocess.run([sys.executable, "-c", RUNNER, str(jobs_file)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return [{name: np.array(value) for name, value in outputs.items()}
            for outputs in json.loads(result.stdout.splitlines()[-1])]


def pack(tokenizer, texts_a, texts_b, seq_length):
    rows = []
    for a, b in zip(texts_a, texts_b):
        tokens, segment_ids = packing.pack_tokens(tokenizer.tokenize(a), tokenizer.tokenize(b) if b else None,
                                                  seq_length)
        rows.append(packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens), segment_ids, seq_length))
    return {name: np.array([row[k] for row in rows], np.int32)
            for k, name in enumerate(("input_ids", "input_mask", "segment_ids"))}


def export(model, task, fmt, export_dir, vocab, **arguments):
    """`exporter.export` of the built `model` as `fmt`; returns the version directory."""
    return exporter.export(task, str(export_dir), model, format=fmt, vocab_file=vocab, **arguments)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=24, type_vocab_size=2, hidden_act="gelu_exact")
    vocab = tmp_path_factory.mktemp("tiny") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]) + "\n")
    return config, str(vocab)


# Every kind of task: string labels per example and per token, SWAG's choices [B, 4, S], masked positions, pooling.
CASES = (("classifier", "neg,pos,mixed"), ("ner", "O,B,I"), ("swag", None), ("pretraining", None),
         ("embedding", None))


def features(batch_size, rng):
    """int32 input_ids (5..39), input_mask (row 1 with 2 padded positions), segment_ids [batch_size, 7]."""
    ids = rng.randint(5, 40, (batch_size, 7)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


@pytest.mark.slow
def test_every_kind_of_task_runs_without_tensorflow(tiny, tmp_path):
    """Each kind of task (CASES), built once and exported in each format, its inputs and outputs those of its spec:
    the outputs of the file's tensor signature, by name, equal to the Keras model's (1e-5), at any batch and length,
    the labels named; the directory holds the vocab, the labels and the metadata. dynamic_range stores int8 weights
    (H=128: a file under 40% of the float32 weights' bytes, which a float export's file holds) and keeps the
    logits: within a quarter of their spread over 16 texts (measured 7-9%), where a constant output misses by more
    than their spread."""
    config, vocab = tiny
    rng = np.random.RandomState(0)
    inputs = features(3, rng)
    jobs, cases = [], []
    for task, labels in CASES:
        spec = task_models.REGISTRY[task]
        tf.keras.utils.set_random_seed(1)
        model = spec.build(config, 3 if labels else None)
        feed = task_inputs.for_model(model, inputs, positions=np.array([[1, 2]] * 3, np.int32))
        expected = {k: np.asarray(v) for k, v in model({k: tf.constant(v) for k, v in feed.items()}).items()}
        for fmt in portable.FORMATS:
            path = export(model, task, fmt, tmp_path / fmt / task, vocab, label_list=labels)
            jobs.append((os.path.join(path, portable.FILES[fmt]), fmt, feed))
            cases.append((fmt, task, labels, spec, task_models.output_names(model), expected))
    wider = BertConfig.from_dict({**config.to_dict(), "hidden_size": 128, "intermediate_size": 512})
    model = task_models.build_task_model("classifier", wider, 3)
    # matrices of std 0.1 (5x the initial 0.02): every layer moves the logits, which spread over the texts
    model.set_weights([rng.normal(0, 0.1, w.shape).astype(w.dtype) if w.ndim > 1 else w for w in model.get_weights()])
    inputs = features(16, rng)
    logits = model({k: tf.constant(v) for k, v in inputs.items()})["logits"].numpy()
    quantized_files = [os.path.join(export(model, "classifier", fmt, tmp_path / fmt / "int8", vocab,
                                           quantization="dynamic_range"), portable.FILES[fmt])
                       for fmt in portable.FORMATS]
    results = run_fresh(tmp_path, [*jobs, *((path, fmt, inputs) for path, fmt in
                                            zip(quantized_files, portable.FORMATS))])
    for (fmt, task, labels, spec, outputs, expected), got in zip(cases, results):
        assert set(got) == set(outputs) | ({spec.label_output} if labels else set()), (fmt, task, sorted(got))
        for name in outputs:
            np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=f"{fmt} {task} {name}")
        directory = tmp_path / fmt / task / "1"
        if labels:
            np.testing.assert_array_equal(got[spec.label_output],
                                          np.array(labels.split(","))[expected["logits"].argmax(-1)])
            assert (directory / "labels.txt").read_text() == labels.replace(",", "\n") + "\n"
        meta = json.loads((directory / "assets.extra" / "export_metadata.json").read_text())
        assert meta["task"] == task and meta["format"] == fmt and meta["file"] == portable.FILES[fmt]
        assert (directory / "vocab.txt").read_text() == open(vocab).read()
    for fmt, path, quantized in zip(portable.FORMATS, quantized_files, results[len(jobs):]):
        assert os.path.getsize(path) < 0.4 * sum(w.nbytes for w in model.get_weights()), fmt
        error = np.abs(quantized["logits"] - logits).max()
        assert error <= 0.25 * logits.std(), (fmt, error, logits.std())


def test_a_failing_tf2onnx_pass_is_skipped_as_tf2onnx_skips_it(tiny, tmp_path, monkeypatch, caplog):
    """tf2onnx optimizes the ONNX graph in place (portable.write_onnx's TF2ONNX_CATCH_ERRORS); where one of its passes
    fails, the model is converted again tf2onnx's own way, which skips that pass: the export succeeds with a warning,
    equal to the Keras model, and TF2ONNX_CATCH_ERRORS is as it was."""
    from tf2onnx import optimizer
    from tf2onnx.optimizer.optimizer_base import GraphOptimizerBase

    class Failing(GraphOptimizerBase):
        def _optimize(self, graph):
            raise RuntimeError("a pass that fails")

    monkeypatch.setitem(optimizer._get_optimizers(), "failing", Failing)
    monkeypatch.delenv("TF2ONNX_CATCH_ERRORS", raising=False)
    config, vocab = tiny
    model = task_models.build_task_model("classifier", config, 2)
    path = export(model, "classifier", "onnx", tmp_path / "onnx", vocab, label_list="a,b")
    assert "converting again with its roll-back copies" in caplog.text
    assert "TF2ONNX_CATCH_ERRORS" not in os.environ
    import onnxruntime
    inputs = features(3, np.random.RandomState(0))
    session = onnxruntime.InferenceSession(os.path.join(path, "model.onnx"), providers=["CPUExecutionProvider"])
    logits = session.run(["logits"], inputs)[0]
    np.testing.assert_allclose(logits, model({k: tf.constant(v) for k, v in inputs.items()})["logits"], atol=1e-5)


@pytest.mark.slow
def test_golden_mrpc_without_tensorflow(tmp_path, golden_checkpoint, data_dir, run_main):
    """The golden MRPC classifier exported by the script as LiteRT and ONNX: a fresh process reproduces the
    original's probabilities (1e-4; measured 2e-6). Flags that do not apply fail before anything loads."""
    with open(os.path.join(data_dir, "mrpc_test.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    tokenizer = tokenization.FullTokenizer(f"{golden_checkpoint}/vocab.txt", do_lower_case=True)
    features = pack(tokenizer, [r[3] for r in rows], [r[4] for r in rows], 128)
    golden = np.loadtxt(os.path.join(data_dir, "mrpc_test_results.tsv"))
    model_flags = [f"--init_checkpoint={golden_checkpoint}/bert_model.ckpt", "--task=classifier", "--label_list=0,1",
                   f"--vocab_file={golden_checkpoint}/vocab.txt",
                   f"--bert_config_file={golden_checkpoint}/bert_config.json"]
    exports = ([f"--format={fmt}", f"--export_dir={tmp_path / fmt}", *model_flags] for fmt in portable.FORMATS)
    errors = run_main("run_scripts/export_saved_model.py", *exports,
                      ["--quantization=dynamic_range", f"--export_dir={tmp_path / 'x'}", *model_flags],
                      ["--format=onnx", "--text_ops=core", f"--export_dir={tmp_path / 'x'}", *model_flags],
                      ["--format=litert", "--task=preprocessing", f"--vocab_file={golden_checkpoint}/vocab.txt",
                       f"--export_dir={tmp_path / 'x'}"],
                      ["--format=onnx", "--num_labels=3", f"--export_dir={tmp_path / 'x'}", *model_flags])
    assert errors[:2] == [None, None]
    assert errors[2].startswith("ValueError: --quantization does not apply to --format=serving --task=classifier "
                                "(its options: --text_ops, ")
    assert errors[3] == ("ValueError: --text_ops does not apply to --format=onnx --task=classifier (its options: "
                         "--quantization).")
    assert errors[4].startswith("ValueError: --format=litert has no preprocessing model: TensorFlow Text's")
    assert errors[5] == "ValueError: --num_labels=3 but the label list has 2 labels."
    assert not (tmp_path / "x").exists()
    runs = run_fresh(tmp_path, [(tmp_path / fmt / "1" / portable.FILES[fmt], fmt, features)
                                for fmt in portable.FORMATS])
    for fmt, got in zip(portable.FORMATS, runs):
        np.testing.assert_allclose(got["probabilities"], golden, atol=1e-4, err_msg=fmt)
        np.testing.assert_array_equal(got["predicted_label"], np.array(["0", "1"])[golden.argmax(-1)])
