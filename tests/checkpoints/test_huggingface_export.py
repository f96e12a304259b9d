"""Hugging Face out (convert_checkpoint(to="huggingface"), convert_checkpoint.py --to=huggingface), checked without
torch: the written directory against the real Hugging Face BERT directory the repo ships (MiniLM's: tensor names,
shapes, dtypes, config keys), its outputs computed from the written model.safetensors by tests/numpy_bert.py against
bert-tf's on real texts, every head's round trip original -> Hugging Face -> original bit for bit, and bad input.
transformers' own from_pretrained: tests/checkpoints/test_huggingface_compare.py (marker `compare`)."""
import json
import os

import hf_tasks
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from bert_tf import checkpoints, fileio, resources
from bert_tf.checkpoints import huggingface, original
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig


def _variables(release):
    reader = tf.train.load_checkpoint(os.path.join(release, "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    """task -> (its original release: random weights, label_list.txt; the Hugging Face directory written from it)."""
    root = tmp_path_factory.mktemp("hf_tasks")
    config = hf_tasks.tiny_config()
    out = {}
    for i, task in enumerate(hf_tasks.TASKS):
        release = str(root / task)
        hf_tasks.write_release(task, release, config, seed=i)
        out[task] = (release, checkpoints.convert_checkpoint(release, str(root / f"{task}_hf"), to="huggingface"))
    return out


@pytest.mark.parametrize("task", list(hf_tasks.TASKS))
def test_every_head_round_trips_bit_for_bit(tiny_dirs, task, tmp_path):
    """original -> Hugging Face (the class of the task's heads, its labels) -> original: the same variables, bit
    for bit, and the same bert_config (gelu -> gelu_new -> gelu)."""
    release, hf_dir = tiny_dirs[task]
    with open(os.path.join(hf_dir, "config.json")) as f:
        written = json.load(f)
    assert written["architectures"] == [huggingface.ARCHITECTURES[task]] and written["hidden_act"] == "gelu_new"
    labels = hf_tasks.TASKS[task]
    if labels:
        assert written["id2label"] == {str(i): label for i, label in enumerate(labels)}
        assert written["label2id"] == {label: i for i, label in enumerate(labels)}
    assert written.get("problem_type") == ("regression" if task == "regression" else None)
    back = checkpoints.convert_hf_to_original(hf_dir, str(tmp_path / "back"))
    before, after = _variables(release), _variables(back)
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        assert after[name].dtype == value.dtype and after[name].tobytes() == value.tobytes(), name
    assert BertConfig.from_json_file(os.path.join(back, "bert_config.json")) == BertConfig.from_json_file(
        os.path.join(release, "bert_config.json"))


def test_a_directory_on_a_url_round_trips(tiny_dirs):
    """Written to and read from a URL (TensorFlow's ram:// file system, as gs://) through fileio: the classifier's
    Hugging Face directory and the original release made back from it hold the release's variables bit for bit."""
    release = tiny_dirs["classifier"][0]
    hf_dir = checkpoints.convert_checkpoint(release, "ram://hf_export_test/hf", to="huggingface")
    assert json.loads(fileio.read_text(hf_dir + "/config.json"))["architectures"] == [
        "BertForSequenceClassification"]
    back = checkpoints.convert_hf_to_original(hf_dir, "ram://hf_export_test/back")
    reader = original.checkpoint_reader(back + "/bert_model.ckpt")
    before = _variables(release)
    assert sorted(reader.get_variable_to_shape_map()) == sorted(before)
    for name, value in before.items():
        assert reader.get_tensor(name).tobytes() == value.tobytes(), name

@pytest.mark.parametrize("task", ["pretraining", "classifier", "ner", "squad", "swag"])
def test_written_weights_compute_bert_tf_outputs_in_numpy(tiny_dirs, task):
    """Each head's outputs from the written model.safetensors, read by transformers' module names and computed by
    tests/numpy_bert.py, equal bert-tf's on real texts within 1e-5."""
    release, hf_dir = tiny_dirs[task]
    weights = hf_tasks.original_names(load_file(os.path.join(hf_dir, "model.safetensors")))
    ours = hf_tasks.bert_tf_outputs(task, release)
    theirs = hf_tasks.numpy_outputs(task, weights, hf_tasks.tiny_config())
    assert sorted(theirs) == sorted(ours)
    for name, value in ours.items():
        np.testing.assert_allclose(value, theirs[name], atol=1e-5, rtol=0, err_msg=name)


@pytest.fixture(scope="module")
def minilm_hf(minilm_release, tmp_path_factory):
    return checkpoints.convert_checkpoint(minilm_release, str(tmp_path_factory.mktemp("minilm_hf")),
                                          to="huggingface")


def test_written_directory_is_laid_out_as_the_real_hugging_face_bert(minilm_hf):
    """The real MiniLM -> original -> Hugging Face: the same tensors (names, shapes, dtypes, values bit for bit) as
    the directory transformers wrote (but its position_ids buffer, which transformers >= 4.31 writes no more), the
    config keys a BERT's config.json has with the same values (hidden_act "gelu": MiniLM's exact GELU), and the
    tokenizer files (do_lower_case true, BertTokenizer, the special tokens)."""
    shipped = resources.minilm_dir()
    theirs = load_file(os.path.join(shipped, "model.safetensors"))
    ours = load_file(os.path.join(minilm_hf, "model.safetensors"))
    assert sorted(ours) == sorted(name for name in theirs if name != "embeddings.position_ids")
    for name, value in ours.items():
        assert (value.shape, value.dtype) == (theirs[name].shape, theirs[name].dtype), name
        assert value.tobytes() == theirs[name].tobytes(), name
    with open(os.path.join(shipped, "config.json")) as f:
        shipped_config = json.load(f)
    with open(os.path.join(minilm_hf, "config.json")) as f:
        written = json.load(f)
    bert_keys = set(shipped_config) - {"_name_or_path", "gradient_checkpointing", "transformers_version", "use_cache"}
    assert {key: written.get(key) for key in bert_keys} == {key: shipped_config[key] for key in bert_keys}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(shipped, name)) as f:
            expected = {k: v for k, v in json.load(f).items() if k != "name_or_path"}
        with open(os.path.join(minilm_hf, name)) as f:
            assert json.load(f) == expected, name
    with open(os.path.join(shipped, "vocab.txt"), "rb") as a, open(os.path.join(minilm_hf, "vocab.txt"), "rb") as b:
        assert a.read() == b.read()


def test_heads_come_from_any_checkpoint_format(tmp_path):
    """One of our object-based checkpoints (a training run's layout: the encoder under `bert`, the head under its
    attribute) is written with its head, and its run's label_list.txt."""
    config = hf_tasks.tiny_config()
    model = task_models.build_task_model("ner", config, 4)
    run = tmp_path / "run"
    tf.train.Checkpoint(**checkpoints.model_parts(model)).write(str(run / "ckpt-1"))
    (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    (run / "label_list.txt").write_text("O\nB-X\nI-X\nB-Y\n")
    out = checkpoints.convert_checkpoint(str(run), str(tmp_path / "hf"), to="huggingface", vocab_file=hf_tasks.VOCAB,
                                         bert_config_file=_config_file(tmp_path, config))
    with open(os.path.join(out, "config.json")) as f:
        written = json.load(f)
    assert written["architectures"] == ["BertForTokenClassification"]
    assert list(written["id2label"].values()) == ["O", "B-X", "I-X", "B-Y"]
    np.testing.assert_array_equal(load_file(os.path.join(out, "model.safetensors"))["classifier.weight"],
                                  model.tagger.projection.output_weights.numpy())


def _config_file(tmp_path, config):
    path = str(tmp_path / "bert_config.json")
    config.to_json_file(path)
    return path


def test_bad_input_is_refused_naming_the_file_before_anything_is_written(tiny_dirs, tmp_path):
    release, hf_dir = tiny_dirs["classifier"]
    out = tmp_path / "out"
    short_vocab = tmp_path / "vocab.txt"
    short_vocab.write_text("[PAD]\n[UNK]\n")
    with pytest.raises(ValueError, match=f"{short_vocab} has 2 tokens but the model has vocab_size=30522"):
        checkpoints.convert_checkpoint(release, str(out), to="huggingface", vocab_file=str(short_vocab))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(FileExistsError, match=f"output_dir {a_file} is a file"):
        checkpoints.convert_checkpoint(release, str(a_file), to="huggingface")
    with pytest.raises(ValueError, match="The squad task needs the span head, but the checkpoint holds classifier"):
        checkpoints.convert_checkpoint(release, str(out), to="huggingface", task="squad")
    assert not out.exists()
    # Import: another model_type, another class, no weights file.
    other = tmp_path / "roberta"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "roberta", "vocab_size": 5}))
    with pytest.raises(ValueError, match=f"{other / 'config.json'}: model_type is 'roberta', not 'bert'"):
        checkpoints.convert_hf_to_original(str(other), str(tmp_path / "back"))
    lm = tmp_path / "lm_head"
    lm.mkdir()
    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    (lm / "config.json").write_text(json.dumps({**config, "architectures": ["BertLMHeadModel"]}))
    with pytest.raises(ValueError, match="architectures names 'BertLMHeadModel'; bert-tf reads BertForMaskedLM"):
        checkpoints.convert_hf_to_original(str(lm), str(tmp_path / "back"))
    (lm / "config.json").write_text(json.dumps(config))
    with pytest.raises(FileNotFoundError, match=f"safetensors file not found: {lm / 'model.safetensors'}"):
        checkpoints.convert_hf_to_original(str(lm), str(tmp_path / "back"))
    assert not (tmp_path / "back").exists()


def test_a_checkpoint_with_several_heads_needs_its_task(golden_checkpoint, tmp_path):
    """The golden checkpoint holds a classifier's and a SQuAD head: no one class has both; task= picks one."""
    with pytest.raises(ValueError, match="holds classifier, span: no one Hugging Face class .* one of encoder, "
                                         "classifier, regression, multi_label, squad"):
        checkpoints.convert_checkpoint(golden_checkpoint, str(tmp_path / "hf"), to="huggingface")
    out = checkpoints.convert_checkpoint(golden_checkpoint, str(tmp_path / "hf"), to="huggingface", task="squad")
    assert sorted(k for k in load_file(os.path.join(out, "model.safetensors")) if not k.startswith("bert.")) == [
        "qa_outputs.bias", "qa_outputs.weight"]


def test_the_script_writes_a_hugging_face_directory(tiny_dirs, tmp_path, run_main):
    release = tiny_dirs["squad"][0]
    out = tmp_path / "hf"
    assert run_main("run_scripts/convert_checkpoint.py",
                    [f"--init_checkpoint={release}", "--to=huggingface", f"--output_dir={out}"],
                    [f"--init_checkpoint={release}", "--to=huggingface", "--task=ner", f"--output_dir={out}_x"]) == [
        None, "ValueError: The ner task needs the tagger head, but the checkpoint holds span."]
    with open(out / "config.json") as f:
        assert json.load(f)["architectures"] == ["BertForQuestionAnswering"]
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "special_tokens_map.json",
                                       "tokenizer_config.json", "vocab.txt"]
