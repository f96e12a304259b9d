"""SavedModel export (bert_tf.export, run_scripts/export_saved_model.py): signatures checked in child processes
that import nothing of bert_tf (and tensorflow_text only where asked), saved_model_cli, the golden MRPC predictions
through both signatures, the core-ops tokenizer against FullTokenizer, truncation, and bad input."""
import csv
import json
import os
import re
import subprocess
import sys
import types

import forkserver
import numpy as np
import original_packing
import pytest
import task_inputs
import tensorflow as tf
import tiny_training
from saved_model_library import library_functions, traced_functions, without_grappler  # noqa: F401 (a module fixture)

from bert_tf import checkpoints
from bert_tf.export import exporter
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertSpanLabeler
from bert_tf.text import core_ops, tokenization

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "run_scripts", "export_saved_model.py")
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "jump", "##s", "##ed",
              "over", "lazy", "dog", ",", ".", "!", "un", "##want", "##ing", "a", "b", "c", "cafe", "hello",
              "world", "##o", "h", "e", "l", "o", "##l", "##e", "##h", "is", "it", "?"]
TEXTS_A = ["The quick brown fox jumps over the lazy dog.", "unwanted, Café!", "hello", "",
           "hello world " * 12, "the quick " * 10, "Is it? " * 3]
TEXTS_B = ["over the lazy dog", "", "world", "hello", "the dog " * 9, "a", "b c " * 20]
# The text limits of this module's exports with text signatures: TEXTS_A is at both, the other requests within.
TEXT_LIMITS = {"max_texts_per_request": len(TEXTS_A), "max_request_bytes": len("".join(TEXTS_A).encode())}

# Runs in a child of tests/forkserver.py's server (TensorFlow and the scripts' environment defaults imported; a fresh
# interpreter where the environment differs) that imports nothing more of bert_tf, and tensorflow_text only once a
# job asks for it. Each job of the JSON list argv[1]: "tensorflow_text" imports it (registering the TF Text ops the
# tf_text signatures use; the jobs before it ran without them); "without_grappler" turns Grappler's graph rewrites off
# for the jobs after it (as `without_grappler` in this process);
# {"key", "dir", "signature", "inputs"} calls a signature of the loaded export (outputs "key/name" into the npz
# argv[2]); {"key", "cli": argv} runs stock saved_model_cli's main (after a line "=== key" on stderr; its stdout and
# error into the JSON argv[3]).
CHILD = r"""
import contextlib, io, json, sys
preloaded = set(sys.modules)
import numpy as np
import tensorflow as tf
from absl import flags
from tensorflow.python.tools import saved_model_cli

def call(job):
    fn = tf.saved_model.load(job["dir"]).signatures[job["signature"]]
    inputs = {name: tf.constant(value, tf.string if isinstance(np.ravel(value)[0], str) else tf.int32)
              for name, value in job["inputs"].items()}
    return {job["key"] + "/" + name: value.numpy() for name, value in fn(**inputs).items()}

def cli(job):
    print("=== " + job["key"], file=sys.stderr, flush=True)
    flags.FLAGS.unparse_flags()
    sys.argv = ["saved_model_cli", *job["cli"]]
    stdout, error = io.StringIO(), None
    with contextlib.redirect_stdout(stdout):
        try:
            saved_model_cli.main()
        except SystemExit as e:
            error = None if e.code in (None, 0) else f"exit status {e.code}"
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
    return {"stdout": stdout.getvalue(), "error": error}

jobs_file, arrays_file, runs_file = sys.argv[1:]  # (sys.argv becomes saved_model_cli's)
jobs = json.load(open(jobs_file))
arrays, runs = {}, {}
for job in jobs:
    if job == "tensorflow_text":
        assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
        import tensorflow_text
    elif job == "without_grappler":
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    elif "cli" in job:
        runs[job["key"]] = cli(job)
    else:
        arrays.update(call(job))
assert not any(m.split(".")[0] == "bert_tf" for m in set(sys.modules) - preloaded), "bert_tf was imported"
assert "tensorflow_text" in jobs or "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
np.savez(arrays_file, **arrays)
json.dump(runs, open(runs_file, "w"))
"""


def start(args, env=ENV, **kwargs):
    """Starts a Python child process (tests/forkserver.py's `popen`); the returned function waits for it and returns
    (returncode, stdout, stderr)."""
    proc = forkserver.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs)

    def wait():
        stdout, stderr = proc.communicate()
        return proc.returncode, stdout, stderr
    return wait


def start_child(directory, jobs, env=ENV):
    """Runs CHILD on `jobs` in a child process in the background; the returned function waits and returns the
    signatures' outputs {"key/name": array}, the saved_model_cli runs {key: {"stdout", "error"}} and the stderr
    written during each run {key: text}."""
    directory.mkdir(parents=True, exist_ok=True)
    jobs_file, arrays, runs = directory / "jobs.json", directory / "out.npz", directory / "runs.json"
    jobs_file.write_text(json.dumps(jobs))
    wait = start([sys.executable, "-c", CHILD, str(jobs_file), str(arrays), str(runs)], env=env, cwd=str(directory))

    def result():
        returncode, _, stderr = wait()
        assert returncode == 0, stderr[-3000:]
        logs = dict(re.findall(r"^=== (\S+)\n(.*?)(?=^=== |\Z)", stderr, re.M | re.S))
        return dict(np.load(arrays, allow_pickle=True)), json.loads(runs.read_text()), logs
    return result


def python_features(tokenizer, text_a, text_b, max_seq_length):
    """FullTokenizer + the original convert_single_example packing (tests/original_packing.py)."""
    return original_packing.pack_ids(tokenizer.tokenize(text_a), tokenizer.tokenize(text_b) if text_b else None,
                                     max_seq_length, tokenizer.vocab)


def batch_features(tokenizer, texts_a, texts_b, max_seq_length):
    rows = [python_features(tokenizer, a, b, max_seq_length) for a, b in zip(texts_a, texts_b)]
    return {name: np.array([r[i] for r in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny vocabulary and config (H=32, L=2)."""
    d = tmp_path_factory.mktemp("tiny")
    vocab = d / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n")
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=24, type_vocab_size=2)
    return {"dir": d, "vocab": str(vocab), "config": config,
            "tokenizer": tokenization.FullTokenizer(str(vocab), do_lower_case=True)}


PACKING_MAX_LEN, PACKING_MULTIPLE = 20, 8
PACKING_LABELS = {"classifier": ["x", "y", "z"], "ner": ["O", "B", "I"], "squad": None}
# The packed export (pad=False, no XLA) of each tokenizer: the request limits and the traced functions, which are the
# preprocessor's whatever the task, are checked on these.
BY_TEXT_OPS = {"tf_text": "squad", "core": "classifier"}


@pytest.fixture(scope="module")
def packing_exports(tmp_path_factory, tiny):
    """The classifier, ner and squad models (`.models`; every weight drawn from RandomState(0), normal(0, 0.3)) and
    their exports at max_seq_length PACKING_MAX_LEN, each made once, when first asked for:
    `.path(task, pad, use_xla=False, text_ops=None)` -> the version directory, `.load(...)` -> the loaded SavedModel.
    pad=True: fixed length (SQuAD's by its default); pad=False: packed to the longest text, under use_xla compiled
    and rounded up to PACKING_MULTIPLE (the fixed-length export is the same for both use_xla). text_ops None:
    "core" for the classifier and under use_xla, else "tf_text" (the packing rule checked on both tokenizers)."""
    directory = tmp_path_factory.mktemp("packing")
    rng = np.random.RandomState(0)
    models = {}
    for task in PACKING_LABELS:
        models[task] = task_models.build_task_model(task, tiny["config"], 3)
        models[task].set_weights([rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in models[task].get_weights()])
    paths, loaded = {}, {}

    def key_of(task, pad, use_xla, text_ops):
        xla = use_xla and not pad
        return task, pad, xla, text_ops or ("core" if xla or task == "classifier" else "tf_text")

    def path(task, pad, use_xla=False, text_ops=None):
        key = key_of(task, pad, use_xla, text_ops)
        if key not in paths:
            given = None if task == "squad" and pad else pad  # SQuAD's default: max_seq_length
            paths[key] = export(
                models[task], task, directory / "_".join(map(str, key)), tiny["vocab"], max_seq_length=PACKING_MAX_LEN,
                label_list=PACKING_LABELS[task], pad_to_max_seq_length=given, use_xla=key[2], text_ops=key[3],
                seq_length_multiple=PACKING_MULTIPLE if key[2] else None, **TEXT_LIMITS)
        return paths[key]

    def load(task, pad, use_xla=False, text_ops=None):
        key = key_of(task, pad, use_xla, text_ops)
        if key not in loaded:
            loaded[key] = tf.saved_model.load(path(*key))
        return loaded[key]
    return types.SimpleNamespace(models=models, path=path, load=load)


def export(model, task, export_dir, vocab_file, do_lower_case=True, **arguments):
    """`exporter.export` of the built `model` (as the runner exports after training); returns the version
    directory."""
    return exporter.export(task, str(export_dir), model, vocab_file=vocab_file, do_lower_case=do_lower_case,
                           **arguments)


def export_checkpoint(task, bert_config_file, vocab_file, init_checkpoint, export_dir, **arguments):
    """`exporter.export` of `init_checkpoint` (as export_saved_model.py does)."""
    return exporter.export(task, str(export_dir), init_checkpoint=init_checkpoint, bert_config_file=bert_config_file,
                           vocab_file=vocab_file, **arguments)


def keras_outputs(model, features, task):
    inputs = {k: tf.constant(v) for k, v in features.items()}
    return {k: np.asarray(v) for k, v in model(inputs, training=False).items()}


# --- the golden checkpoint ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_golden_mrpc_through_both_signatures(tmp_path, golden_checkpoint, data_dir):
    """Export of the golden classifier; a child process (CHILD) reproduces the original's MRPC probabilities (2e-6)
    through serving_default and serving_text_pair, and the in-graph packing equals the Python pipeline's."""
    export_dir = tmp_path / "mrpc"
    config = BertConfig.from_json_file(f"{golden_checkpoint}/bert_config.json")
    model = task_models.build_task_model("classifier", config, 2)
    checkpoints.restore(model, f"{golden_checkpoint}/bert_model.ckpt", required_heads=("classifier",))
    export(model, "classifier", export_dir, f"{golden_checkpoint}/vocab.txt", version=3, label_list="0,1")
    version_dir = export_dir / "3"
    assert sorted(os.listdir(export_dir)) == ["3"]  # no staging directory left behind
    assert (version_dir / "assets" / "vocab.txt").read_bytes() == open(f"{golden_checkpoint}/vocab.txt",
                                                                        "rb").read()
    assert (version_dir / "assets" / "labels.txt").read_text() == "0\n1\n"

    with open(os.path.join(data_dir, "mrpc_test.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    texts_a = [tokenization.convert_to_unicode(r[3]) for r in rows]
    texts_b = [tokenization.convert_to_unicode(r[4]) for r in rows]
    tokenizer = tokenization.FullTokenizer(f"{golden_checkpoint}/vocab.txt", do_lower_case=True)
    features = batch_features(tokenizer, texts_a, texts_b, 128)
    pending = start_child(tmp_path / "child", ["tensorflow_text", {
        "key": "tensor", "dir": str(version_dir), "signature": "serving_default",
        "inputs": {k: v.tolist() for k, v in features.items()}}, {
        "key": "text", "dir": str(version_dir), "signature": "serving_text_pair",
        "inputs": {"text_a": texts_a, "text_b": texts_b}}])
    ref = keras_outputs(model, features, "classifier")  # meanwhile, the Keras model's outputs
    out, _, _ = pending()

    golden = np.loadtxt(os.path.join(data_dir, "mrpc_test_results.tsv"))
    for key in ("tensor", "text"):
        # Measured max |ours - golden|: 2.0e-7 (CPU, TF 2.20) through both signatures; 10x margin.
        assert np.abs(out[f"{key}/probabilities"] - golden).max() <= 2e-6, key
        assert [p.decode() for p in out[f"{key}/predicted_label"]] == [str(int(p[1] > p[0])) for p in golden]
    for name, value in features.items():
        np.testing.assert_array_equal(out[f"text/{name}"], value)
    assert np.abs(out["text/logits"] - out["tensor/logits"]).max() <= 1e-6

    # The Keras model agrees within 1e-5.
    assert np.abs(out["tensor/logits"] - ref["logits"]).max() <= 1e-5
    assert np.abs(out["tensor/probabilities"] - ref["probabilities"]).max() <= 1e-5


def test_checkpoint_without_the_head_or_with_other_labels(tmp_path, golden_checkpoint):
    with pytest.raises(ValueError, match=r"gave 3\): .*Shape mismatch for output_weights \(check `num_labels`\)"):
        export_checkpoint("classifier", f"{golden_checkpoint}/bert_config.json",
                                      f"{golden_checkpoint}/vocab.txt", golden_checkpoint, str(tmp_path / "e"),
                                      num_labels=3)
    with pytest.raises(ValueError, match=r"no trained tagger head"):
        export_checkpoint("ner", f"{golden_checkpoint}/bert_config.json",
                                      f"{golden_checkpoint}/vocab.txt", golden_checkpoint, str(tmp_path / "e"),
                                      label_list="O,B-PER,I-PER")
    with pytest.raises(ValueError, match=r"no trained masked_lm and next_sentence head"):
        export_checkpoint("pretraining", f"{golden_checkpoint}/bert_config.json",
                                      f"{golden_checkpoint}/vocab.txt", golden_checkpoint, str(tmp_path / "e"))
    assert not os.path.exists(tmp_path / "e" / "1")


# --- tiny models -------------------------------------------------------------------------------------------

def _save_original(model, path):
    from bert_tf import checkpoints
    return checkpoints.save_original_checkpoint(model, path)


# Each task of the registry but the classifier (test_golden_mrpc_through_both_signatures) and multi_label
# (tests/tasks/test_multi_label.py: a run's export), with its labels.
TASK_LABELS = {"encoder": None, "regression": None, "squad": None, "ner": "O,B,I", "swag": None, "pretraining": None,
               "masked_lm": None, "embedding": None}


@pytest.mark.slow
def test_every_task_in_a_child_process(tmp_path, tiny, packing_exports):
    """Each task's signatures (its spec's inputs and outputs), reloaded in CHILD (tensorflow_text imported),
    equal the Keras model (1e-5); text longer than max_seq_length is truncated by the original rule. The ner
    export with text signatures is packing_exports' (tf_text, packed to the longest text); the others are 1-layer."""
    max_len = PACKING_MAX_LEN
    one_layer = BertConfig.from_dict({**tiny["config"].to_dict(), "num_hidden_layers": 1})
    tok = tiny["tokenizer"]
    features = batch_features(tok, TEXTS_A, TEXTS_B, max_len)
    positions = np.array([[1, 2, 5]] * len(TEXTS_A), np.int32)
    single = batch_features(tok, TEXTS_A, [""] * len(TEXTS_A), max_len)
    assert features["input_mask"].sum(1).max() == max_len  # some rows really are truncated
    assert set(TASK_LABELS) == set(task_models.REGISTRY) - {"classifier", "multi_label"}
    # saved_model_cli: show --all works as shipped (before tensorflow_text is imported); run needs the TF Text ops
    # registered (the TF1 loader imports every function of the graph, the text signatures' included).
    jobs, models = ["without_grappler", {"key": "show", "cli": ["show", "--dir", packing_exports.path("ner", pad=False),
                                                               "--all"]}, "tensorflow_text"], {}
    for task, labels in TASK_LABELS.items():
        if task == "ner":  # the text signatures are the same for every task: one export has them
            model, path = packing_exports.models[task], packing_exports.path(task, pad=False)
        else:
            tf.keras.utils.set_random_seed(1)
            model = task_models.build_task_model(task, one_layer, 3 if labels else None)
            path = export(model, task, tmp_path / task, tiny["vocab"], max_seq_length=max_len, label_list=labels,
                          text_ops="none")
        models[task] = model
        inputs = task_inputs.for_model(model, features, positions)
        jobs.append({"key": f"{task}/tensor", "dir": path, "signature": "serving_default",
                     "inputs": {k: v.tolist() for k, v in inputs.items()}})
        if task == "ner":
            jobs += [{"key": f"{task}/pair", "dir": path, "signature": "serving_text_pair",
                      "inputs": {"text_a": TEXTS_A, "text_b": TEXTS_B}},
                     {"key": f"{task}/single", "dir": path, "signature": "serving_text", "inputs": {"text_a": TEXTS_A}},
                     {"key": "run", "cli": ["run", "--dir", path, "--tag_set", "serve", "--signature_def",
                                            "serving_default", "--input_exprs",
                                            "input_ids=[[2,25,26,3]];input_mask=[[1,1,1,1]];segment_ids=[[0,0,0,0]]"]}]
    out, runs, _ = start_child(tmp_path / "child", jobs)()

    for task, model in models.items():
        task_spec = task_models.REGISTRY[task]
        ref = model({k: tf.constant(v) for k, v in task_inputs.for_model(model, features, positions).items()},
                    training=False)
        names = {key.split("/")[-1] for key in out if key.startswith(f"{task}/tensor/")}
        outputs = task_models.output_names(model)
        assert names == set(outputs) | ({task_spec.label_output} if TASK_LABELS[task] else set()), task
        for name in outputs:
            got = out[f"{task}/tensor/{name}"]
            assert got.shape == tuple(ref[name].shape), (task, name)
            assert np.abs(got - np.asarray(ref[name])).max() <= 1e-5, (task, name)
            if task == "ner":
                assert np.abs(out[f"{task}/pair/{name}"] - got).max() <= 1e-5, (task, name)
        if task == "ner":
            for name in ("input_ids", "input_mask", "segment_ids"):
                np.testing.assert_array_equal(out[f"{task}/pair/{name}"], features[name], err_msg=name)
                np.testing.assert_array_equal(out[f"{task}/single/{name}"], single[name], err_msg=name)
    ner_labels = np.array(["O", "B", "I"])[np.argmax(out["ner/tensor/logits"], -1)]
    np.testing.assert_array_equal(out["ner/tensor/predicted_labels"].astype(str), ner_labels)

    assert runs["show"]["error"] is None and runs["run"]["error"] is None, runs
    for text in ("signature_def['serving_text_pair']", "inputs['segment_ids']", "outputs['predicted_labels']"):
        assert text in runs["show"]["stdout"], text
    assert "Result for output key probabilities" in runs["run"]["stdout"], runs["run"]["stdout"]
    assert "predicted_labels" in runs["run"]["stdout"]


@pytest.fixture(scope="module")
def core_process(tmp_path_factory, packing_exports):
    """packing_exports' classifier with text_ops=core, without and with use_xla, in one child process (CHILD,
    Grappler off; XLA's "Compiled cluster" line is logged whatever TF_CPP_MIN_LOG_LEVEL says) that never imports
    tensorflow_text: serving_text_pair on TEXTS_A, TEXTS_B ("pair"), and stock saved_model_cli's run (the TF1 loader,
    as TF Serving's) of serving_text on "Hello world!" ("plain", "xla") and on a request of one text over
    max_texts_per_request ("over")."""
    plain, xla = (packing_exports.path("classifier", False, use_xla, "core") for use_xla in (False, True))

    def cli(key, path, texts):
        return {"key": key, "cli": ["run", "--dir", path, "--tag_set", "serve", "--signature_def", "serving_text",
                                    "--input_exprs", f"text_a={texts}"]}
    return start_child(tmp_path_factory.mktemp("core_process"), [
        "without_grappler", {"key": "pair", "dir": plain, "signature": "serving_text_pair",
         "inputs": {"text_a": TEXTS_A, "text_b": TEXTS_B}},
        cli("plain", plain, ["Hello world!"]), cli("over", plain, ["a"] * (len(TEXTS_A) + 1)),
        cli("xla", xla, ["Hello world!"])])()


@pytest.mark.slow
def test_core_ops_export_needs_no_tensorflow_text(tiny, packing_exports, core_process):
    """text_ops=core: a plain `import tensorflow` process and stock saved_model_cli load and run it, with the
    same ids as the Python pipeline and the Keras model's outputs."""
    max_len, model = PACKING_MAX_LEN, packing_exports.models["classifier"]
    out, runs, _ = core_process
    features = batch_features(tiny["tokenizer"], TEXTS_A, TEXTS_B, max_len)
    for name in features:
        np.testing.assert_array_equal(out[f"pair/{name}"], features[name], err_msg=name)
    ref = keras_outputs(model, features, "classifier")
    assert np.abs(out["pair/probabilities"] - ref["probabilities"]).max() <= 1e-5

    assert runs["plain"]["error"] is None, runs["plain"]
    ids, mask, _ = python_features(tiny["tokenizer"], "Hello world!", "", max_len)
    flat = " ".join(runs["plain"]["stdout"].replace("[", " [ ").replace("]", " ] ").split())
    real = ids[:sum(mask)]  # packed to the request's longest text
    assert len(real) < max_len
    assert "Result for output key input_ids: [ [ " + " ".join(str(i) for i in real) + " ] ]" in flat, flat
    # what TF Serving answers a request over the limit
    assert f"the request has {len(TEXTS_A) + 1} texts; this export takes at most {len(TEXTS_A)} (export option " \
        "max_texts_per_request)" in (runs["over"]["error"] or ""), runs["over"]


def test_text_requests_over_the_export_limits_are_refused(tmp_path, tiny, packing_exports):
    """The text signatures, tf_text and core (BY_TEXT_OPS' exports), refuse a request of one text more than
    max_texts_per_request, or one byte more than max_request_bytes (in text_a or text_b), with an
    InvalidArgumentError naming the export option; a request at both limits is served. export_metadata.json records
    the limits. (The check is the tokenizer's, which every text signature calls: serving_text_pair is tried on the
    tf_text export; test_core_ops_export_needs_no_tensorflow_text refuses a request through the TF1 loader.) A limit
    that is not positive, or given to a format without text signatures, is refused."""
    texts, most_texts, most_bytes = TEXTS_A, TEXT_LIMITS["max_texts_per_request"], TEXT_LIMITS["max_request_bytes"]
    at_limit, one_more_text = tf.constant(texts), tf.constant(texts + [""])
    one_more_byte = tf.constant(texts[:-1] + [texts[-1] + "?"])
    too_many = (f"the request has {most_texts + 1} texts; this export takes at most {most_texts} (export option "
                f"max_texts_per_request)")
    too_long = (f"the texts of the request hold {most_bytes + 1} bytes; this export takes at most {most_bytes} "
                f"bytes of text per request (export option max_request_bytes)")
    tf_text, core = (packing_exports.load(BY_TEXT_OPS[ops], False, text_ops=ops) for ops in ("tf_text", "core"))
    for path in (packing_exports.path(task, False, text_ops=ops) for ops, task in BY_TEXT_OPS.items()):
        with open(os.path.join(path, "assets.extra", "export_metadata.json")) as f:
            meta = json.load(f)
        assert {name: meta[name] for name in TEXT_LIMITS} == TEXT_LIMITS
    pair = tf_text.signatures["serving_text_pair"]
    assert pair(text_a=at_limit, text_b=at_limit)["input_ids"].shape[0] == most_texts
    for message, inputs in ((too_many, {"text_a": one_more_text, "text_b": one_more_text}),
                            (too_long, {"text_a": at_limit, "text_b": one_more_byte})):
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
            pair(**inputs)
    for single in (tf_text.signatures["serving_text"], core.signatures["serving_text"]):
        assert single(text_a=at_limit)["input_ids"].shape[0] == most_texts
        for message, text_a in ((too_many, one_more_text), (too_long, one_more_byte)):
            with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
                single(text_a=text_a)
    model = packing_exports.models["classifier"]
    with pytest.raises(ValueError, match="max_request_bytes must be a positive integer, got 0"):
        export(model, "classifier", tmp_path / "zero", tiny["vocab"], max_request_bytes=0)
    with pytest.raises(TypeError, match="--max_texts_per_request does not apply to --format=onnx --task=classifier"):
        export(model, "classifier", tmp_path / "onnx", tiny["vocab"], format="onnx", max_texts_per_request=2)
    assert not (tmp_path / "zero" / "1").exists() and not (tmp_path / "onnx").exists()


def _must_compile_functions(saved_model_dir):
    """Names of the functions in saved_model.pb that XLA must compile (`jit_compile=True`)."""
    return [fn.signature.name for fn in library_functions(saved_model_dir) if fn.attr["_XlaMustCompile"].b]


def test_the_preprocessor_is_traced_and_written_once(packing_exports):
    """The text signatures' preprocessor functions (encode, encode_pair, the tokenizer's tokenize; text_ops tf_text
    and core: BY_TEXT_OPS' exports) are each written once. (Signatures traced before tf.saved_model.save made save
    trace those functions again in its own context and write both: a third of the export's time, a fifth of
    saved_model.pb.)"""
    for path in (packing_exports.path(task, False, text_ops=ops) for ops, task in BY_TEXT_OPS.items()):
        traced = traced_functions(path)
        assert [traced[name] for name in ("encode", "encode_pair", "tokenize")] == [1, 1, 1], traced


@pytest.mark.slow
def test_use_xla_compiles_the_model_and_keeps_its_outputs(tiny, packing_exports, core_process):
    """use_xla=True: the model's computation is one must-compile (XLA) function inside every signature, the
    tokenizer and the label lookup outside it; the outputs are the Keras model's, also through the TF1 loader of
    saved_model_cli (TF Serving's), which compiles it with XLA; without it nothing is compiled."""
    max_len, model = PACKING_MAX_LEN, packing_exports.models["classifier"]
    plain, path = (packing_exports.path("classifier", False, use_xla, "core") for use_xla in (False, True))
    assert _must_compile_functions(plain) == []
    assert _must_compile_functions(path)
    with open(os.path.join(path, "assets.extra", "export_metadata.json")) as f:
        assert json.load(f)["use_xla"] is True
    loaded = packing_exports.load("classifier", False, use_xla=True)
    features = batch_features(tiny["tokenizer"], TEXTS_A, TEXTS_B, max_len)
    ref = keras_outputs(model, features, "classifier")
    by_ids = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    by_text = loaded.signatures["serving_text_pair"](text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
    for out in (by_ids, by_text):
        assert np.abs(out["probabilities"].numpy() - ref["probabilities"]).max() <= 1e-5
        expected_labels = np.array(["x", "y", "z"])[ref["probabilities"].argmax(-1)]
        np.testing.assert_array_equal(out["predicted_label"].numpy().astype(str), expected_labels)
    np.testing.assert_array_equal(by_text["input_ids"].numpy(), features["input_ids"])

    _, runs, logs = core_process
    assert runs["xla"]["error"] is None, runs["xla"]
    assert "Compiled cluster using XLA" in logs["xla"], logs["xla"][-2000:]
    single = keras_outputs(model, batch_features(tiny["tokenizer"], ["Hello world!"], [""], max_len), "classifier")
    assert "Result for output key predicted_label:\n[b'%s']" % "xyz"[single["probabilities"].argmax()] in \
        runs["xla"]["stdout"], runs["xla"]["stdout"]


def test_core_tokenizer_matches_full_tokenizer(uncased_vocab_file):
    texts = ["Hello, World! It's 3.14 o'clock.", "Café naïve ŒUVRE Straße ΣΊΣΥΦΟΣ", "中文字符和日本語のテキスト",
             "unaffable " * 3, "a" * 250 + " b", "supercalifragilisticexpialidocious", "\u00e9\u0301\u0323x",
             "tab\tnew\nline\u2028sep\u00a0nbsp", "emoji 🙂 ok\x00\ufffd", "", "   ", "ﬁ … ½ ™",
             "x" * 199 + "y", "\u0130stanbul İ DŽ ǅ"]
    for lower in (True, False):
        core = core_ops.CoreWordpieceTokenizer(uncased_vocab_file, do_lower_case=lower)
        full = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=lower)
        got = core.tokenize(tf.constant(texts)).to_list()
        for text, ids in zip(texts, got):
            assert ids == full.convert_tokens_to_ids(full.tokenize(text)), (lower, text)


@pytest.mark.slow
def test_versions_and_bad_arguments(tmp_path, tiny, run_main):
    model = task_models.build_task_model("classifier", tiny["config"], 2)
    base = str(tmp_path / "m")
    assert export(model, "classifier", base, tiny["vocab"], max_seq_length=8, version=2,
                  text_ops="none") == os.path.join(base, "2")
    with pytest.raises(FileExistsError, match="--version"):
        export(model, "classifier", base, tiny["vocab"], max_seq_length=8, version=2, text_ops="none")
    assert sorted(os.listdir(base)) == ["2"]
    with pytest.raises(ValueError, match="3 labels but the model's head has 2"):
        export(model, "classifier", base, tiny["vocab"], version=4, label_list="a,b,c")
    with pytest.raises(ValueError, match="Unknown task"):
        export(model, "sentiment", base, tiny["vocab"], version=5)
    with pytest.raises(ValueError, match=r"The regression export needs a BertClassifier with \{'num_labels': 1, "
                                         r"'regression': True\}, got a BertClassifier with \{'num_labels': 2, "
                                         r"'regression': False\}"):
        export(model, "regression", base, tiny["vocab"], version=5)
    assert sorted(os.listdir(base)) == ["2"]

    # The CLI refuses the existing version before doing any work.
    config_file = tmp_path / "bert_config.json"
    tiny["config"].to_json_file(str(config_file))
    prefix = _save_original(model, str(tmp_path / "ckpt" / "bert_model.ckpt"))
    args = ["--task=classifier", f"--bert_config_file={config_file}", f"--vocab_file={tiny['vocab']}",
            f"--init_checkpoint={prefix}", "--num_labels=2", "--max_seq_length=8", f"--export_dir={base}"]
    errors, logs = run_main(SCRIPT, args + ["--version=2"],
                            ["--task=encoder"] + args[1:] + ["--version=8", "--format=tfhub", "--use_xla"],
                            args + ["--version=7", "--text_ops=none"], with_logs=True)
    assert errors[0].startswith("FileExistsError") and "already exists" in errors[0], errors[0]
    assert errors[1].startswith("ValueError: --use_xla does not apply to --format=tfhub --task=encoder "), errors[1]
    assert errors[2] is None, logs[-2000:]
    assert f"Export written to {os.path.join(base, '7')}\n" in logs, logs[-2000:]
    assert sorted(os.listdir(base)) == ["2", "7"]
    loaded = tf.saved_model.load(os.path.join(base, "7"))
    features = batch_features(tiny["tokenizer"], TEXTS_A[:2], TEXTS_B[:2], 8)
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    ref = keras_outputs(model, features, "classifier")
    assert np.abs(got["logits"].numpy() - ref["logits"]).max() <= 1e-5


def test_bert_tf_checkpoint_and_label_mismatch(tmp_path, tiny):
    """A bert-tf (tf.train.Checkpoint) checkpoint loads with its head; a head of another size is refused."""
    tf.keras.utils.set_random_seed(3)
    trained = task_models.build_task_model("classifier", tiny["config"], 2)
    prefix = tf.train.Checkpoint(bert=trained.bert, classifier=trained.classifier).save(str(tmp_path / "ckpt"))
    config_file = tmp_path / "bert_config.json"
    tiny["config"].to_json_file(str(config_file))
    path = export_checkpoint("classifier", str(config_file), tiny["vocab"], prefix, tmp_path / "e", num_labels=2,
                             max_seq_length=8, text_ops="none")
    features = batch_features(tiny["tokenizer"], TEXTS_A[:2], TEXTS_B[:2], 8)
    got = tf.saved_model.load(path).signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    np.testing.assert_allclose(got["logits"].numpy(), keras_outputs(trained, features, "classifier")["logits"],
                               atol=1e-6)
    with pytest.raises(ValueError, match=r"Cannot load .* into the classifier model \(--num_labels / --label_list "
                                         r"gave 5\)"):
        export_checkpoint("classifier", str(config_file), tiny["vocab"], prefix, tmp_path / "e", num_labels=5,
                          version=2, max_seq_length=8)
    with pytest.raises(ValueError, match="no trained span head"):
        export_checkpoint("squad", str(config_file), tiny["vocab"], prefix, tmp_path / "e", version=2,
                          max_seq_length=8)


def test_a_trainer_squad_checkpoint_exports_from_its_output_dir(tmp_path, tiny):
    """run_squad.py's checkpoints key the span head only under optimizer/...: found through the object graph."""
    trainer = tiny_training.train_one_step(lambda: BertSpanLabeler(tiny["config"]), tmp_path / "squad_out")
    config_file = tmp_path / "bert_config.json"
    tiny["config"].to_json_file(str(config_file))
    path = export_checkpoint("squad", str(config_file), tiny["vocab"], str(tmp_path / "squad_out"),
                                         str(tmp_path / "export"), max_seq_length=8, text_ops="none")
    features = batch_features(tiny["tokenizer"], TEXTS_A[:2], TEXTS_B[:2], 8)
    got = tf.saved_model.load(path).signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    ref = keras_outputs(trainer.model, features, "squad")
    for name in ("start_logits", "end_logits"):
        assert np.abs(got[name].numpy() - ref[name]).max() <= 1e-5, name


# --- requests packed to their longest text -------------------------------------------------------------------

REQUESTS = {  # name -> (text_a, text_b): short, mixed with empty and over-long texts, all empty
    "short": (["hello", "the dog", "is it?"], ["", "world", ""]),
    "mixed": (["", "hello world " * 15, "the quick brown fox"], ["a", "", "the lazy dog " * 8]),
    "empty": (["", "", ""], ["", "", ""]),
}


@pytest.mark.slow
@pytest.mark.parametrize("use_xla", [False, True], ids=["default", "xla"])
def test_text_requests_are_packed_to_their_longest_text(tiny, packing_exports, use_xla):
    """serving_text(_pair) pack each request to its longest text (truncated at max_seq_length as the original;
    under use_xla, whose exports tokenize with core ops, rounded up to seq_length_multiple; without it the
    classifier's export tokenizes with core ops, ner's and squad's with TF Text): the outputs equal the
    fixed-length ones (within 1e-5) on every real position, for short requests, requests mixing empty and over-long
    texts, and all-empty ones. The fixed-length outputs: SQuAD's export by its default (fixed-length unless told to cut,
    pad_to_max_seq_length=False), the Keras model's on the texts packed to max_seq_length for the others (what their
    fixed-length exports serve: `test_every_task_in_a_child_process`). Under use_xla the classifier and ner only
    (squad's per-token outputs are packed as ner's). The tensor signature takes any length; under use_xla its
    per-token outputs come back at the length sent."""
    max_len, multiple = PACKING_MAX_LEN, PACKING_MULTIPLE
    tasks = ("classifier", "ner") if use_xla else ("classifier", "ner", "squad")
    cut_exports = {task: packing_exports.load(task, False, use_xla) for task in tasks}
    for (texts_a, texts_b) in REQUESTS.values():
        packed = batch_features(tiny["tokenizer"], texts_a, texts_b, max_len)
        longest = int(packed["input_mask"].sum(1).max())
        width = min(max_len, -(-longest // multiple) * multiple) if use_xla else longest
        mask = packed["input_mask"][:, :width].astype(bool)
        for task in tasks:
            model = packing_exports.models[task]
            if task == "squad":
                fixed = packing_exports.load("squad", True).signatures["serving_text_pair"](
                    text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))
                assert fixed["input_ids"].shape == (3, max_len)
            else:
                fixed = keras_outputs(model, packed, task)
            cut = cut_exports[task].signatures["serving_text_pair"](text_a=tf.constant(texts_a),
                                                                   text_b=tf.constant(texts_b))
            assert cut["input_ids"].shape == (3, width)
            np.testing.assert_array_equal(cut["input_ids"].numpy(), packed["input_ids"][:, :width])
            for name in task_models.output_names(model):
                expected = np.asarray(fixed[name])
                if name in task_models.sequence_outputs(model):  # [B, S, ...]: the real positions of each row
                    np.testing.assert_allclose(cut[name].numpy()[mask], expected[:, :width][mask], atol=1e-5)
                else:
                    np.testing.assert_allclose(cut[name].numpy(), expected, atol=1e-5)
            single = cut_exports[task].signatures["serving_text"](text_a=tf.constant(texts_a))
            assert single["input_ids"].shape[1] <= max_len
    for task in ("classifier", "ner"):  # a request of no texts: no rows, no error (XLA included)
        nothing = cut_exports[task].signatures["serving_text"](text_a=tf.constant([], tf.string))
        assert nothing["probabilities"].shape[0] == 0
    ids = batch_features(tiny["tokenizer"], ["the quick brown fox"], [""], max_len)
    sent = {name: v[:, :5] for name, v in ids.items()}  # 5 of the 6 tokens: any length is taken
    by_ids = cut_exports["ner"].signatures["serving_default"](**{k: tf.constant(v) for k, v in sent.items()})
    assert by_ids["logits"].shape == (1, 5, 3)
    np.testing.assert_allclose(by_ids["logits"].numpy(), keras_outputs(packing_exports.models["ner"], sent,
                                                                       "ner")["logits"], atol=1e-5)
