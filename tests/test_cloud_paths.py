"""The original workflow with every path on a file system only tf.io.gfile reaches, as the original's Cloud TPU runs
write to gs://: gs:// itself, through TensorFlow's own GCS client against a local emulator (tests/gcs_emulator.py),
and the Python API on TensorFlow's in-memory ram:// (per process: the steps run in one process, the inputs copied in
and the outputs out). create_pretraining_data, run_pretraining with --save_original_checkpoint, run_classifier with
--export_dir and --save_original_checkpoint, export_saved_model --format=litert, extract_features,
run_squad predict: every input, record, checkpoint, run_settings.json, label list, result, prediction, TensorBoard
event file, export and release is read and written on gs://, and nothing appears in the working directory."""
import json
import os
import sys

import forkserver
import pytest
import script_steps
import tensorflow as tf
from gcs_emulator import gcs_emulator_fixture  # noqa: F401 (the gcs_emulator fixture)

from bert_tf import fileio
from bert_tf.model.config import BertConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ, PREDICTIONS = 32, 5
DOC = "the man went to the store and bought a gallon of milk"


def _squad(questions):
    """A SQuAD v1.1 file of one paragraph (DOC) and `questions` [(id, question, answer)]."""
    qas = [{"id": qid, "question": q, "answers": [{"text": a, "answer_start": DOC.index(a)}]}
           for qid, q, a in questions]
    return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": DOC, "qas": qas}]}]})


def write_inputs(mirror, vocab_file, data_dir):
    """The workflow's inputs in the local directory `mirror`: the uncased vocab, a tiny config, the original's
    sample text, a tsv classification task, SQuAD files and extract_features' lines."""
    files = {
        "vocab.txt": open(vocab_file, encoding="utf-8").read(),
        "sample_text.txt": open(os.path.join(data_dir, "sample_text.txt"), encoding="utf-8").read(),
        "extract_input.txt": open(os.path.join(data_dir, "extract_input.txt"), encoding="utf-8").read(),
        "bert_config.json": BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=24, max_position_embeddings=64).to_json_string(),
        "squad/train.json": _squad([("t0", "what did he buy ?", "milk"), ("t1", "who went ?", "the man")]),
        "squad/dev.json": _squad([("d0", "what did he buy ?", "milk")]),
    }
    reviews = [("a good movie .", "pos"), ("a bad film .", "neg"), ("good and happy", "pos"), ("sad and bad", "neg")]
    for split in ("train", "dev", "test"):
        files[f"classifier_data/{split}.tsv"] = "text_a\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in reviews)
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(mirror, name)), exist_ok=True)
        with open(os.path.join(mirror, name), "w", encoding="utf-8") as f:
            f.write(text)


MODEL = ["--vocab_file={base}/vocab.txt", "--bert_config_file={base}/bert_config.json"]
RELEASE = "--init_checkpoint={base}/pretraining/original/bert_model.ckpt"
CLASSIFIER_TRAIN = [*MODEL, RELEASE, "--task_name=tsv", "--data_dir={base}/classifier_data",
                    "--output_dir={base}/classifier", "--do_train", "--max_seq_length=16", "--train_batch_size=2",
                    "--num_train_epochs=1"]
STEPS = [
    ("create_pretraining_data.py", [[
        "--input_file={base}/sample_text.txt", "--output_file={base}/pretraining.tfrecord",
        "--vocab_file={base}/vocab.txt", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
        "--dupe_factor=1"]]),
    ("run_pretraining.py", [[
        *MODEL, "--input_file={base}/pretraining.tfrecord", "--output_dir={base}/pretraining", "--do_train",
        "--do_eval", "--num_train_steps=2", "--num_warmup_steps=0", "--train_batch_size=4", "--eval_batch_size=4",
        "--max_eval_steps=2", "--save_checkpoints_steps=1", "--iterations_per_loop=1", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PREDICTIONS}", "--save_original_checkpoint"]]),
    ("run_classifier.py", [[
        *CLASSIFIER_TRAIN, "--do_eval", "--do_predict", "--export_dir={base}/classifier_export",
        "--save_original_checkpoint"]]),
    ("export_saved_model.py", [[  # ONNX too converts in a local directory, then copies (portable.write)
        *MODEL, "--format=litert", "--task=classifier", "--init_checkpoint={base}/classifier",
        "--export_dir={base}/litert", "--max_seq_length=16"]]),  # its labels: the run's record
    ("extract_features.py", [[
        *MODEL, RELEASE, "--input_file={base}/extract_input.txt", "--output_file={base}/features.jsonl",
        "--layers=-1", "--max_seq_length=16", "--batch_size=2"]]),
    ("run_squad.py", [[
        *MODEL, RELEASE, "--do_train", "--do_predict", "--train_file={base}/squad/train.json",
        "--predict_file={base}/squad/dev.json", "--output_dir={base}/squad", "--max_seq_length=24",
        "--doc_stride=8", "--max_query_length=8", "--train_batch_size=2", "--num_train_epochs=1"]]),
]


def run_steps(base, copy_in, copy_out, steps, cwd, env):
    """Runs `steps` (of STEPS) one after the other in a fresh process (tests/script_steps.py) with the working
    directory `cwd`, `copy_in` copied to `base` first and `base` to `copy_out` last ("-": no copy): every run
    succeeds, and no step writes into `cwd`. Returns the runs' logs."""
    done, logs = script_steps.run([(os.path.join(REPO, "run_scripts", script), argvs) for script, argvs in steps],
                                  cwd, env, base, copy_in, copy_out)
    for (script, argvs), step in zip(steps, done):
        assert step["errors"] == [None] * len(argvs), f"{script}: {step['errors']}\n{logs[-3000:]}"
        assert step["cwd"] == [], f"{script} wrote into the working directory: {step['cwd']}"
    return logs


def check_outputs(store):
    """What the workflow wrote, read through fileio at `store` (a local mirror or the URL itself)."""
    files = set(fileio.walk_files(store))
    release = {"bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json", "vocab.txt",
               "checkpoint"}
    expected = {"pretraining.tfrecord", "pretraining/eval_results.txt", "pretraining/run_settings.json",
                "pretraining/ckpt-2.index", "pretraining/checkpoint", "classifier/eval_results.txt",
                "classifier/test_results.tsv", "classifier/model_metadata.json", "classifier/train.tf_record",
                "litert/1/model.tflite", "litert/1/labels.txt", "features.jsonl",
                "squad/predictions.json", "squad/nbest_predictions.json",
                *(f"{run}/original/{name}" for run in ("pretraining", "classifier") for name in release)}
    assert expected <= files, sorted(expected - files)
    assert [f for f in files if f.startswith("pretraining/train/events.out.tfevents")]  # TensorBoard summaries
    versions = fileio.listdir(os.path.join(store, "classifier_export"))
    assert len(versions) == 1 and f"classifier_export/{versions[0]}/saved_model.pb" in files
    assert f"classifier_export/{versions[0]}/assets/labels.txt" in files
    assert not [f for f in files if fileio.TEMP_MARK in f]  # every write committed, no temporary left
    lines = fileio.read_text(os.path.join(store, "features.jsonl")).splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["features"][0]["token"] == "[CLS]"
    assert set(json.loads(fileio.read_text(os.path.join(store, "squad/predictions.json")))) == {"d0"}
    return versions[0]


def check_served(store, version):
    """The classifier's export (in the local `store`) serves raw text with its labels."""
    import tensorflow_text  # noqa: F401 (the ops of its text signatures)
    served = tf.saved_model.load(os.path.join(store, "classifier_export", version))
    out = served.signatures["serving_text"](text_a=tf.constant(["a good movie ."]))
    assert out["predicted_label"].numpy()[0].decode() in ("neg", "pos")


@pytest.mark.slow
def test_the_workflow_on_gcs_through_tensorflows_client(tmp_path, uncased_vocab_file, data_dir, child_env,
                                                       gcs_emulator):
    """The same steps on gs:// (fake-gcs-server behind a TLS proxy: TensorFlow's GCS client, its resumable uploads
    and per-object renames), in two processes: the first copies the inputs in and runs the training steps, the
    second reads their outputs from gs://, reruns run_classifier.py's training into its finished output_dir (it
    rewrites train.tf_record, a new object: the run resumes, it is not refused as a run on other data), runs the
    other steps; what they wrote is then read back through the emulator's own API."""
    mirror, cwd = str(tmp_path / "store"), tmp_path / "cwd"
    cwd.mkdir()
    write_inputs(mirror, uncased_vocab_file, data_dir)
    env = child_env(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **gcs_emulator.env)
    run_steps(f"{gcs_emulator.url}/workflow", mirror, "-", STEPS[:3], str(cwd), env)  # up to run_classifier.py
    rerun = ("run_classifier.py", [[*CLASSIFIER_TRAIN, "--verbosity=0"]])  # its INFO log says what it did
    logs = run_steps(f"{gcs_emulator.url}/workflow", "-", "-", [rerun, *STEPS[3:]], str(cwd), env)
    assert "Training already finished (step 2 of 2)" in logs
    assert os.listdir(cwd) == []
    names = gcs_emulator.object_names()
    assert not [name for name in names if fileio.TEMP_MARK in name]
    out = str(tmp_path / "out")  # the objects as the emulator holds them (TensorFlow's reads: the second process)
    for name in (name for name in names if not name.endswith("/")):  # not TensorFlow's directory markers
        fileio.write_bytes_atomically(os.path.join(out, name), gcs_emulator.download(name))
    check_served(f"{out}/workflow", check_outputs(f"{out}/workflow"))


# The library's other entry points on ram://, in one process (the Python API; each script above is a thin wrapper
# of one of them): fill-mask, semantic search, NER and SWAG (train, eval, predict; the runner's export on a URL is
# run_classifier's above), the TF Hub encoder and preprocessing exports, the Model Garden conversion, corpus
# preparation and vocabulary learning.
API_CHILD = r"""
import json, os, shutil, sys
sys.path.insert(0, sys.argv[2])
from export.test_tfhub import VOCAB
from tasks.test_ner import CONLL_SAMPLE
from tasks.test_swag import SWAG_HEADER, SWAG_ROWS
import tensorflow as tf
from bert_tf import checkpoints, fileio
from bert_tf.data import corpus, vocab
from bert_tf.export import exporter
from bert_tf.inference import embeddings, fill_mask
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import ner, runner, swag

base, mirror = "ram://api", sys.argv[1]
write = lambda name, text: fileio.write_text_atomically(f"{base}/{name}", text)
write("vocab.txt", "".join(t + "\n" for t in VOCAB))  # other words are [UNK]
config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=24, max_position_embeddings=32)
config.to_json_file(f"{base}/release/bert_config.json")
fileio.copy_file(f"{base}/vocab.txt", f"{base}/release/vocab.txt")
checkpoints.save_original_checkpoint(task_models.build_task_model("pretraining", config),
                                     f"{base}/release/bert_model.ckpt")
release = dict(init_checkpoint=f"{base}/release/bert_model.ckpt", vocab_file=f"{base}/vocab.txt")
write("masks.txt", "the [MASK] walks .\nthe man [MASK] .\n")
fill_mask.run(f"{base}/masks.txt", f"{base}/fill_mask.jsonl", max_seq_length=16, top_k=2, **release)
write("sentences.txt", "the man smiles .\nthe drum line .\n")
embeddings.run(f"{base}/sentences.txt", f"{base}/search.jsonl", queries=["the man"], top_k=1, max_seq_length=16,
               **release)
write("conll/train.txt", CONLL_SAMPLE)
write("conll/test.txt", CONLL_SAMPLE)
write("swag/train.csv", SWAG_HEADER + "".join(SWAG_ROWS))
write("swag/val.csv", SWAG_HEADER + "".join(SWAG_ROWS))
run = dict(bert_config_file=None, max_seq_length=24, do_train=True, train_batch_size=2,
           num_train_epochs=1, **release)
runner.run(ner.NerTask(data_dir=f"{base}/conll"), runner.RunConfig(
    output_dir=f"{base}/ner", do_predict=True, **run))
runner.run(swag.SwagTask(data_dir=f"{base}/swag"), runner.RunConfig(output_dir=f"{base}/swag_out", do_eval=True,
                                                                   **run))
for task in ("masked_lm", "preprocessing"):
    exporter.export(task, f"{base}/hub_{task}", format="tfhub", max_seq_length=16,
                    **(release if task == "masked_lm" else {"vocab_file": release["vocab_file"]}))
checkpoints.convert_checkpoint(release["init_checkpoint"], f"{base}/model_garden", to="model_garden")
fileio.copy_file(os.path.join(sys.argv[3], "sample_text.txt"), f"{base}/sample_text.txt")
corpus.prepare_corpus(f"{base}/sample_text.txt", f"{base}/corpus.txt")
vocab.build_vocab(f"{base}/corpus.txt", f"{base}/built_vocab.txt", vocab_size=120, num_unused=2)
fileio.copy_tree(base, mirror)
print("DONE")
"""


@pytest.mark.slow
def test_the_python_api_with_every_path_on_ram(tmp_path, data_dir, child_env):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    result = forkserver.run([sys.executable, "-c", API_CHILD, str(tmp_path / "store"), os.path.join(REPO, "tests"),
                             data_dir], cwd=cwd, env=child_env(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-3000:]
    assert os.listdir(cwd) == []
    store = str(tmp_path / "store")
    files = set(fileio.walk_files(store))
    expected = {"fill_mask.jsonl", "search.jsonl", "ner/test_results.txt", "ner/model_metadata.json",
                "swag/val.csv", "swag_out/eval_results.txt", "hub_masked_lm/1/saved_model.pb",
                "hub_masked_lm/1/bert_config.json", "hub_preprocessing/1/saved_model.pb", "corpus.txt",
                "built_vocab.txt", "release/bert_model.ckpt.index"}
    assert expected <= files, sorted(expected - files)
    assert [f for f in files if f.startswith("model_garden/")], sorted(files)
    assert not [f for f in files if fileio.TEMP_MARK in f]
    assert len(fileio.read_text(os.path.join(store, "fill_mask.jsonl")).splitlines()) == 2
    assert json.loads(fileio.read_text(os.path.join(store, "search.jsonl")))["query"] == "the man"
