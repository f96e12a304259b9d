"""TF Hub exports (bert_tf.export.tfhub; export_saved_model.py --format=tfhub, --task=preprocessing).

The encoder reloads with its outputs equal to the Keras model's, trains through its trainable variables, and -- where
Model Garden (tf-models-official) and tensorflow_hub are installed -- equals Model Garden's own export of the same
original checkpoint under `hub.KerasLayer` in a fresh tf_keras process, with the same signatures, names, dtypes and
attributes. The preprocessing model packs real text exactly as FullTokenizer + the original packing, and has the
API of Model Garden's preprocessing export.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import original_packing
import pytest
import tensorflow as tf
from saved_model_library import traced_functions, without_grappler  # noqa: F401 (a module fixture)

from bert_tf import checkpoints, resources
from bert_tf.data import corpus
from bert_tf.export import exporter, tfhub
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.text import tokenization

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "run_scripts", "export_saved_model.py")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "jump", "##s", "##ed", "over",
         "lazy", "dog", ",", ".", "!", "un", "##want", "##ing", "a", "b", "c", "hello", "world", "##o", "h", "e",
         "l", "o", "##l", "is", "it", "?", "cafe"]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "unwanted, cafe!", "hello", "", "hello world " * 9,
         "Is it? " * 3, "jumped Hellooo"]
SEQ_LENGTH = 16

# A user's process (TF_USE_LEGACY_KERAS=1). It examines our exports with tensorflow, tensorflow_hub, tensorflow_text
# and tf_keras only (nothing of bert_tf or Model Garden imported), then makes Model Garden's own exports
# (official.nlp.tools: the original checkpoint converted by its converter, export_tfhub_lib.export_model and
# export_preprocessing) and examines them alike; writes what each shows: outputs (npz) and structure (json). Grappler
# is off in it: both exports run unrewritten graphs, and its rewrites of each restored function cost most of the CPU.
HUB_USER = r"""
import inspect, json, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # registers the preprocessing models' ops
import tf_keras
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

def spec(t):
    return [t.dtype.name, t.shape.as_list()]

def specs(outputs):
    return {k: [spec(t) for t in v] if isinstance(v, list) else spec(v) for k, v in outputs.items()}

# Input names and specs; output specs in the order of their names (the two exports name outputs alike only up to
# that order: Model Garden's Keras export names them after an internal layer, bert_encoder_1, bert_encoder_1_1...).
def signature_report(signature):
    return {"inputs": {k: spec(v) for k, v in signature.structured_input_signature[1].items()},
            "outputs": [spec(v) for _, v in sorted(signature.structured_outputs.items())]}

def put(arrays, prefix, outputs):
    for key, value in outputs.items():
        for i, t in enumerate(value if isinstance(value, list) else [value]):
            arrays[f"{prefix}/{key}/{i}"] = t.numpy()

# Examines the exports of a job: writes their arrays and report.
def examine(job):
    arrays, report = {}, {}
    inputs = {k: tf.constant(v, tf.int32) for k, v in job["inputs"].items()}
    obj = hub.load(job["encoder"])  # hub.KerasLayer(handle) loads as hub.load: once for both
    layer = hub.KerasLayer(obj, trainable=True)
    outputs = layer(inputs, training=False)
    put(arrays, "keras_layer", outputs)
    with tf.GradientTape() as tape:
        trained = layer(inputs, training=True)
        loss = tf.reduce_sum(trained["pooled_output"] ** 2) + tf.reduce_sum(trained["sequence_output"] ** 2)
    grads = tape.gradient(loss, layer.trainable_weights)
    signature = obj.signatures["serving_default"]
    served = signature(**inputs)
    put(arrays, "serving_default", {str(i): served[k] for i, k in enumerate(sorted(served))})
    report["encoder"] = {
        "outputs": specs(outputs),
        "dropout_changes_outputs": bool(np.abs(trained["pooled_output"] - outputs["pooled_output"]).max() > 0),
        "trainable_sizes": sorted(int(np.prod(w.shape)) for w in layer.trainable_weights),
        "gradients": sum(g is not None and bool(np.any(tf.convert_to_tensor(g).numpy() != 0)) for g in grads),
        "call_arguments": inspect.getfullargspec(obj.__call__).args[:2],
        "serving_default": signature_report(signature),
        "vocab_file": os.path.basename(obj.vocab_file.asset_path.numpy().decode()),
        "do_lower_case": [bool(obj.do_lower_case.numpy()), obj.do_lower_case.dtype.name, obj.do_lower_case.trainable],
        "regularization_losses": len(obj.regularization_losses),
        "variables": [len(obj.variables) - len(obj.trainable_variables) > 0,
                      any(v is obj.do_lower_case for v in obj.variables)],
    }
    if hasattr(obj, "mlm"):
        mlm = obj.mlm(dict(inputs, masked_lm_positions=tf.constant(job["positions"], tf.int32)), training=False)
        put(arrays, "mlm", mlm)
        report["mlm"] = {"outputs": specs(mlm), "trainable": len(obj.mlm.trainable_variables)}

    if job["preprocessor"]:
        texts = tf.constant(job["texts"])
        obj = hub.load(job["preprocessor"])
        packed = hub.KerasLayer(obj)(texts)
        put(arrays, "call", packed)
        tokens = hub.KerasLayer(obj.tokenize)(texts)
        reverse = tf.gather(tokens, tf.range(tokens.nrows() - 1, -1, -1))
        pair = hub.KerasLayer(obj.bert_pack_inputs, arguments=dict(seq_length=job["pair_length"]))([tokens, reverse])
        flat_pair = obj.bert_pack_inputs([tokens.merge_dims(1, 2), reverse.merge_dims(1, 2)],
                                         seq_length=tf.constant(job["pair_length"]))
        report["preprocessing"] = {
            "call": specs(packed),
            "serving_default": signature_report(obj.signatures["serving_default"]),
            "reusable": [len(o.variables) + len(o.trainable_variables) + len(o.regularization_losses)
                         for o in (obj, obj.tokenize)],
            "tokenize": [type(tokens).__name__, tokens.dtype.name, tokens.shape.rank, tokens.ragged_rank],
            "pair": specs(pair),
            "flat_pair_equal": all(bool(np.array_equal(flat_pair[k], pair[k])) for k in pair),
            "special_tokens": {k: [v.dtype.name, int(v)] for k, v in obj.tokenize.get_special_tokens_dict().items()},
            "default_length": specs(obj.bert_pack_inputs([tokens])),
        }
    np.savez(job["arrays"], **arrays)
    with open(job["report"], "w") as f:
        json.dump(report, f)

def export_model_garden(job):
    from official.legacy.bert import configs
    from official.nlp.tools import export_tfhub_lib, tf2_bert_encoder_checkpoint_converter as converter
    config = configs.BertConfig.from_json_file(job["bert_config_file"])
    converted_dir = os.path.join(job["work_dir"], "converted")
    converter.convert_checkpoint(config, os.path.join(converted_dir, "ckpt"), job["init_checkpoint"],
                                 converted_model="pretrainer")
    export_tfhub_lib.export_model(job["encoder"], bert_config=config, with_mlm=True,
                                  model_checkpoint_path=tf.train.latest_checkpoint(converted_dir),
                                  vocab_file=job["vocab_file"], do_lower_case=False)
    export_tfhub_lib.export_preprocessing(job["preprocessor"], vocab_file=job["preprocessing_vocab_file"],
                                          do_lower_case=True, tokenize_with_offsets=False, default_seq_length=128)

ours, theirs = json.loads(sys.argv[1])
examine(ours)
assert not any(m == "bert_tf" or m.startswith("bert_tf.") for m in sys.modules), "bert_tf was imported"
assert not any(m == "official" or m.startswith("official.") for m in sys.modules), "official was imported"
export_model_garden(theirs)
examine(theirs)
"""


def packed_inputs(vocab_file, texts, seq_length):
    """FullTokenizer + the original packing of single segments, under the TF Hub input names."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    rows = [original_packing.pack_ids(tokenizer.tokenize(t), None, seq_length, tokenizer.vocab) for t in texts]
    return {name: np.array([r[i] for r in rows], np.int32) for i, name in enumerate(tfhub.HUB_INPUTS)}


def hub_export(task, vocab_file, export_dir, bert_config_file=None, init_checkpoint=None, **arguments):
    """`exporter.export` with --format=tfhub of `init_checkpoint` (no model for the preprocessing model)."""
    return exporter.export(task, str(export_dir), format="tfhub", init_checkpoint=init_checkpoint,
                           bert_config_file=bert_config_file, vocab_file=vocab_file, **arguments)


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    """An original-format release of a tiny BERT (L=2, H=32, dropout 0.1) with the masked-LM head, every weight
    drawn at random (biases and LayerNorm included, so that none is trivially 0 or 1)."""
    d = tmp_path_factory.mktemp("tiny_release")
    (d / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=24, type_vocab_size=2)
    config.to_json_file(str(d / "bert_config.json"))
    model = task_models.build_task_model("masked_lm", config)
    rng = np.random.RandomState(7)
    for w in model.trainable_weights:
        w.assign(rng.normal(0, 0.3, w.shape).astype(np.float32))
    checkpoints.save_original_checkpoint(model, str(d / "bert_model.ckpt"))
    return {"dir": d, "vocab": str(d / "vocab.txt"), "config": str(d / "bert_config.json"),
            "ckpt": str(d / "bert_model.ckpt"), "model": model}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory, tiny_release, uncased_vocab_file, run_main):
    """The script's runs on tiny_release (one process): (their errors, the directory they ran in). Its exports, which
    tests must not change: e/1 the preprocessing model of the uncased vocabulary at 128, e/2 tiny_release's encoder
    with its `mlm` (--do_lower_case=false) at SEQ_LENGTH."""
    tmp_path = tmp_path_factory.mktemp("cli")
    common = [f"--vocab_file={tiny_release['vocab']}", f"--bert_config_file={tiny_release['config']}",
              f"--init_checkpoint={tiny_release['ckpt']}", f"--export_dir={tmp_path / 'e'}",
              f"--max_seq_length={SEQ_LENGTH}"]
    return run_main(
        SCRIPT,
        ["--format=tfhub", "--task=classifier"] + common,
        ["--format=tfhub", "--task=encoder", f"--vocab_file={tmp_path / 'missing.txt'}"] + common[1:],
        ["--format=tfhub", "--task=encoder", f"--bert_config_file={tmp_path / 'nope.json'}"] + common[:1] + common[2:],
        ["--format=tfhub", "--task=encoder"] + common[:2] + common[3:],
        ["--format=tfhub", "--task=encoder", "--label_list=a,b"] + common,
        ["--task=preprocessing", f"--vocab_file={uncased_vocab_file}", f"--export_dir={tmp_path / 'e'}",
         "--max_seq_length=128"],
        ["--task=preprocessing", "--format=tfhub", "--version=1"] + common,
        ["--format=tfhub", "--task=masked_lm", "--version=2", "--do_lower_case=false"] + common,
        ["--task=preprocessing", "--text_ops=core", "--use_xla", "--version=3"] + common), tmp_path


@pytest.fixture(scope="module")
def hub_masked_lm(cli_runs):
    """cli_runs' e/2: tiny_release exported with --format=tfhub --task=masked_lm --do_lower_case=false."""
    errors, ran_in = cli_runs
    assert errors[7] is None, errors[7]
    return str(ran_in / "e" / "2")


@pytest.fixture(scope="module")
def hub_preprocessing(cli_runs):
    """cli_runs' e/1: the preprocessing model of the uncased vocabulary at max_seq_length 128."""
    errors, ran_in = cli_runs
    assert errors[5] is None, errors[5]
    return str(ran_in / "e" / "1")


# --- without Model Garden ----------------------------------------------------------------------------------

def test_encoder_reloads_equal_to_keras_and_trains(tiny_release, hub_masked_lm):
    """The reloaded encoder (and `mlm`) equal the Keras model (1e-5); dropout under training=True; gradients
    reach every trainable variable; the attributes Model Garden's export carries."""
    loaded = tf.saved_model.load(hub_masked_lm)
    inputs = packed_inputs(tiny_release["vocab"], TEXTS, SEQ_LENGTH)
    positions = np.array([[1, 2, 3]] * len(TEXTS), np.int32)
    model = tiny_release["model"]
    ref = model.bert({ours: inputs[hub] for hub, ours in tfhub.HUB_INPUTS.items()}, training=False)
    ref_mlm = model({**{ours: inputs[hub] for hub, ours in tfhub.HUB_INPUTS.items()},
                     "masked_lm_positions": positions}, training=False)["masked_lm_logits"]

    out = loaded(inputs, training=False)
    assert sorted(out) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
    for name in ("sequence_output", "pooled_output"):
        assert np.abs(out[name].numpy() - ref[name].numpy()).max() <= 1e-5, name
    np.testing.assert_array_equal(out["default"], out["pooled_output"])
    assert len(out["encoder_outputs"]) == 2
    for got, want in zip(out["encoder_outputs"], ref["encoder_outputs"]):
        assert np.abs(got.numpy() - want.numpy()).max() <= 1e-5
    mlm = loaded.mlm({**inputs, "masked_lm_positions": positions})
    assert sorted(mlm) == ["encoder_outputs", "mlm_logits", "pooled_output", "sequence_output"]
    assert mlm["mlm_logits"].shape == (len(TEXTS), 3, len(VOCAB))
    assert np.abs(mlm["mlm_logits"].numpy() - ref_mlm.numpy()).max() <= 1e-5
    signature = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    assert sorted(signature) == ["default", "encoder_outputs", "encoder_outputs_1", "pooled_output",
                                 "sequence_output"]
    np.testing.assert_array_equal(signature["encoder_outputs_1"], out["encoder_outputs"][1])

    assert len(loaded.trainable_variables) == len(model.bert.trainable_weights)
    assert len(loaded.mlm.trainable_variables) == len(model.trainable_weights)
    assert list(loaded.regularization_losses) == []
    assert not loaded.do_lower_case.numpy() and not loaded.do_lower_case.trainable  # --do_lower_case=false
    with open(loaded.vocab_file.asset_path.numpy().decode()) as f:
        assert f.read().split() == VOCAB
    with tf.GradientTape() as tape:
        trained = loaded(inputs, training=True)
        loss = tf.reduce_sum(trained["pooled_output"] ** 2) + tf.reduce_sum(trained["sequence_output"] ** 2)
    grads = tape.gradient(loss, loaded.trainable_variables)
    assert all(g is not None and np.any(tf.convert_to_tensor(g).numpy() != 0) for g in grads)
    assert np.abs(trained["pooled_output"].numpy() - out["pooled_output"].numpy()).max() > 1e-3  # dropout


def test_export_loads_back_as_init_checkpoint(tmp_path, tiny_release, hub_masked_lm):
    """bert-tf's own TF Hub export is an init_checkpoint like Model Garden's: its config (written beside
    saved_model.pb), vocab asset and casing are the run's, and every weight of the encoder and masked-LM head
    restores (nothing missing or unused)."""
    files = checkpoints.model_files(hub_masked_lm)
    assert files.config.to_dict() == BertConfig.from_json_file(tiny_release["config"]).to_dict()
    assert files.do_lower_case is False
    with open(files.vocab_file) as f:
        assert f.read().split() == VOCAB
    model = task_models.build_task_model("masked_lm", files.config)  # fresh random weights
    report = checkpoints.restore(model, hub_masked_lm, required_heads=("masked_lm",))
    assert not report.missing and not report.unused
    for got, want in zip(model.trainable_weights, tiny_release["model"].trainable_weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=got.path)
    path = str(shutil.copytree(hub_masked_lm, tmp_path / "hub"))  # a copy lacks the config: the export stays whole
    os.remove(os.path.join(path, "bert_config.json"))
    with pytest.raises(ValueError, match=r"bert-tf TF Hub export without its bert_config\.json .*--bert_config_file"):
        checkpoints.model_files(path)


def wiki_lines(count):
    """`count` lines spread over the tokenizer benchmark's corpus (gensim's Wikipedia dump sample, raw wikitext)."""
    path = resources.gensim_test_file(resources.WIKI_DUMP)
    lines = [line for page in corpus.iter_wiki_pages(path) for line in page.text.split("\n") if line.strip()]
    return lines[::max(1, len(lines) // count)][:count]


def test_preprocessing_packs_like_the_original(hub_preprocessing, uncased_vocab_file):
    """Real text: the root call, `tokenize` (words, then pieces) and `bert_pack_inputs` (pairs, truncation,
    seq_length) equal FullTokenizer + the original packing, id for id."""
    lines = wiki_lines(400) + ["Café naïve ŒUVRE Straße ΣΊΣΥΦΟΣ", "中文字符 ﬁ … ½", "a" * 250 + " b"]
    path = hub_preprocessing
    traced = traced_functions(path)  # each once (the root's and tokenize's __call__), not again under save's context
    assert (traced["tokenize"], traced["__call__"]) == (1, 2), traced
    loaded = tf.saved_model.load(path)
    full = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True)
    tokens = [full.tokenize(line) for line in lines]
    packed = {k: v.numpy() for k, v in loaded(tf.constant(lines)).items()}
    assert sorted(packed) == ["input_mask", "input_type_ids", "input_word_ids"]
    rows = [original_packing.pack_ids(t, None, 128, full.vocab) for t in tokens]
    for i, name in enumerate(tfhub.HUB_INPUTS):
        np.testing.assert_array_equal(packed[name], np.array([r[i] for r in rows]), err_msg=name)

    words = loaded.tokenize(tf.constant(lines))
    assert words.ragged_rank == 2 and words.dtype == tf.int32
    expected = [[full.convert_tokens_to_ids(full.wordpiece_tokenizer.tokenize(word))
                 for word in full.basic_tokenizer.tokenize(line)] for line in lines]
    assert words.to_list() == expected

    first, second = words[:-1], words[1:]
    for seq_length in (9, 64):
        pair = loaded.bert_pack_inputs([first, second], seq_length=tf.constant(seq_length))
        rows = [original_packing.pack_ids(a, b, seq_length, full.vocab) for a, b in zip(tokens[:-1], tokens[1:])]
        for i, name in enumerate(tfhub.HUB_INPUTS):
            np.testing.assert_array_equal(pair[name].numpy(), np.array([r[i] for r in rows]),
                                          err_msg=f"{name} {seq_length}")
    special = {k: int(v) for k, v in loaded.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": 30522, "start_of_sequence_id": full.vocab["[CLS]"], "padding_id": 0,
                       "end_of_segment_id": full.vocab["[SEP]"], "mask_id": full.vocab["[MASK]"]}
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least 3 for segment pairs"):
        loaded.bert_pack_inputs([first, second], seq_length=tf.constant(2))


def test_cli_and_bad_input(tmp_path, tiny_release, cli_runs):
    """The script writes both formats; clear errors: a task --format=tfhub does not export, a missing vocabulary,
    config or checkpoint, labels, three segments, an existing version, the TF Serving export's own flags."""
    errors, ran_in = cli_runs
    assert "--format=tfhub exports the encoder" in errors[0] and "not 'classifier'" in errors[0]
    assert errors[1].startswith("FileNotFoundError") and "--vocab_file" in errors[1] and "missing.txt" in errors[1]
    assert errors[2] == f"FileNotFoundError: BERT config file not found: {ran_in / 'nope.json'}"
    assert "needs --init_checkpoint" in errors[3]
    assert "--label_list do not apply" in errors[4]
    with pytest.raises(ValueError, match="max_seq_length >= 3"):  # the CLI refuses it when parsed (test_script_errors)
        hub_export("preprocessing", tiny_release["vocab"], tmp_path / "p", max_seq_length=2)
    assert errors[5] is None
    assert errors[6].startswith("FileExistsError") and "--version" in errors[6]
    assert errors[7] is None
    assert errors[8] == ("ValueError: --text_ops and --use_xla do not apply to --format=serving --task=preprocessing "
                         "(its options: --max_texts_per_request, --max_request_bytes).")
    assert sorted(os.listdir(ran_in / "e")) == ["1", "2"]  # read by the tests above
    ragged = tf.ragged.constant([[5, 6]], tf.int32)
    with pytest.raises(ValueError, match="packs 1 or 2 segments"):
        tfhub.pack_segments([ragged] * 3, 8, cls_id=2, sep_id=3)


# --- against Model Garden ----------------------------------------------------------------------------------

def test_encoder_and_preprocessing_equal_model_garden_exports(tmp_path, tiny_release, hub_masked_lm,
                                                              hub_preprocessing, uncased_vocab_file, child_env):
    """Model Garden's `export_model(with_mlm=True)` and `export_preprocessing` (uncased vocabulary, 128) of the tiny
    release, and ours (cli_runs' exports), under hub.KerasLayer in a tf_keras process: same outputs (1e-5),
    signatures, attributes, trainable weights, callables and output keys/dtypes/shapes; the same ids on text both
    tokenizers split alike."""
    pytest.importorskip("official", reason="Model Garden (tf-models-official, the `ecosystem` extra) is needed")
    pytest.importorskip("tensorflow_hub", reason="tensorflow_hub (the `ecosystem` extra) is needed")
    inputs = packed_inputs(tiny_release["vocab"], TEXTS, SEQ_LENGTH)
    jobs = [{"inputs": {k: v.tolist() for k, v in inputs.items()}, "positions": [[1, 2, 3]] * len(TEXTS),
             "texts": TEXTS, "pair_length": 10, "encoder": encoder, "preprocessor": preprocessor,
             "arrays": str(tmp_path / f"{name}.npz"), "report": str(tmp_path / f"{name}.json")}
            for name, encoder, preprocessor in (
                ("ours", hub_masked_lm, hub_preprocessing),
                ("mg", str(tmp_path / "mg_encoder"), str(tmp_path / "mg_preprocessing")))]
    jobs[1].update(bert_config_file=tiny_release["config"], init_checkpoint=tiny_release["ckpt"],
                   vocab_file=tiny_release["vocab"], preprocessing_vocab_file=uncased_vocab_file,
                   work_dir=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", HUB_USER, json.dumps(jobs)], capture_output=True, text=True,
                            timeout=900, env=child_env(TF_USE_LEGACY_KERAS="1", CUDA_VISIBLE_DEVICES="",
                                                       TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-4000:]
    (mine, my_report), (theirs, their_report) = [
        (dict(np.load(job["arrays"])), json.loads(open(job["report"]).read())) for job in jobs]

    assert my_report == their_report
    assert my_report["encoder"]["gradients"] == len(my_report["encoder"]["trainable_sizes"]) > 0
    assert my_report["encoder"]["dropout_changes_outputs"]
    assert sorted(mine) == sorted(theirs)
    # [B, S, H] outputs are compared on real tokens: at padding both are far from a float64 reference (MiniLM:
    # up to 6e-4 from NumPy float64 at padded positions, both; 4e-6 at real tokens) and no model reads them.
    mask = inputs["input_mask"].astype(bool)
    for key in mine:
        real = mask[..., None] if mine[key].shape[:2] == mask.shape and mine[key].ndim == 3 else True
        assert np.abs(np.where(real, mine[key] - theirs[key], 0)).max() <= 1e-5, key
