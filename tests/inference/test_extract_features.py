import gzip
import json
import os
import re
import sys

import forkserver
import numpy as np
import pytest
import tiny_training

from bert_tf.inference import extract_features as ef
from bert_tf.model import encoder
from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertClassifier
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "run_scripts", "extract_features.py")


def _run_script(*args):
    return forkserver.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=REPO)


def test_matches_the_original_golden_output(minilm_release, data_dir, tmp_path):
    """The real MiniLM converted by our converter (conftest's minilm_release); the golden output was made with the
    original code and a bert_config.json saying "gelu" (the original's tanh form)."""
    with open(os.path.join(minilm_release, "bert_config.json")) as f:
        assert json.load(f)["hidden_act"] == "gelu_exact"  # what Hugging Face's "gelu" computes
    output = str(tmp_path / "out.jsonl")
    result = _run_script(
        f"--input_file={os.path.join(data_dir, 'extract_input.txt')}", f"--output_file={output}",
        f"--vocab_file={minilm_release}/vocab.txt", f"--init_checkpoint={minilm_release}/bert_model.ckpt",
        f"--bert_config_file={os.path.join(data_dir, 'minilm_golden_bert_config.json')}",
        "--layers=-1,-2,-3,-4", "--max_seq_length=128", "--do_lower_case=True", "--batch_size=2")
    assert result.returncode == 0, result.stderr[-3000:]
    with gzip.open(os.path.join(data_dir, "extract_features_minilm.jsonl.gz"), "rt") as f:
        golden = [json.loads(line) for line in f]
    with open(output) as f:
        ours = [json.loads(line) for line in f]
    assert len(ours) == len(golden) == 5
    worst = 0.0
    for g, o in zip(golden, ours):
        assert list(o) == ["linex_index", "features"] and o["linex_index"] == g["linex_index"]
        assert [f["token"] for f in o["features"]] == [f["token"] for f in g["features"]]
        for gf, of in zip(g["features"], o["features"]):
            assert [layer["index"] for layer in of["layers"]] == [-1, -2, -3, -4]
            for gl, ol in zip(gf["layers"], of["layers"]):
                worst = max(worst, float(np.abs(np.array(gl["values"]) - np.array(ol["values"])).max()))
    assert worst <= 2e-5, worst  # measured 4.0e-6 (CPU, TF 2.20): 5x margin


def test_help_lists_the_original_flags():
    result = _run_script("--helpfull")
    for flag in ("input_file", "output_file", "layers", "bert_config_file", "init_checkpoint", "vocab_file",
                 "do_lower_case", "max_seq_length", "batch_size", "use_tpu", "use_one_hot_embeddings"):
        assert f"--{flag}" in result.stdout or f"--[no]{flag}" in result.stdout, flag


def test_read_examples_splits_pairs_like_the_original(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"  one sentence \na ||| b\nx|||y\n\nbad \xff byte\n")
    examples = ef.read_examples(str(path))
    assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
        (0, "one sentence", None), (1, "a", "b"), (2, "x|||y", None), (3, "", None), (4, "bad  byte", None)]


def test_features_follow_the_original_packing(uncased_vocab_file):
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    examples = [ef.InputExample(0, "hello world " * 10, "goodbye moon"), ef.InputExample(1, "hello", None)]
    long_pair, single = ef.convert_examples_to_features(examples, 10, tokenizer)
    # 20 + 2 tokens into 10 - 3: the longer side loses tokens until the pair fits.
    assert long_pair.tokens == ["[CLS]", "hello", "world", "hello", "world", "hello", "[SEP]", "goodbye", "moon",
                                "[SEP]"]
    assert long_pair.input_type_ids == [0] * 7 + [1] * 3
    assert long_pair.input_mask == [1] * 10
    assert single.tokens == ["[CLS]", "hello", "[SEP]"] and single.input_ids[3:] == [0] * 7


def test_bad_input_errors(tmp_path, tiny_config):
    with pytest.raises(FileNotFoundError, match="Input file not found: .*missing.txt"):
        ef.read_examples(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="Layer index -3 is out of range for a model with 2 layers"):
        ef.parse_layers("-1,-3", tiny_config.num_hidden_layers)
    with pytest.raises(ValueError, match="comma-separated integers"):
        ef.parse_layers("-1;-2", 2)
    model = encoder.BertModel(tiny_config)
    (tmp_path / "in.txt").write_text("hello\n")
    with pytest.raises(ValueError, match="Cannot use sequence length 64 because the BERT model was only trained"):
        ef.extract_features(model, None, str(tmp_path / "in.txt"), str(tmp_path / "o.jsonl"), layers="-1",
                            max_seq_length=64)


def test_script_reports_vocab_mismatch(tmp_path, data_dir, uncased_vocab_file, tiny_config):
    config = tmp_path / "bert_config.json"
    config.write_text(tiny_config.to_json_string())
    result = _run_script(f"--input_file={os.path.join(data_dir, 'extract_input.txt')}",
                         f"--output_file={tmp_path / 'o.jsonl'}", f"--vocab_file={uncased_vocab_file}",
                         f"--bert_config_file={config}", "--max_seq_length=16")
    assert result.returncode != 0
    assert "has 30522 tokens but bert_config.json says vocab_size=99" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()


TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "dog", "##s", "run", "."]


@pytest.fixture
def tiny_files(tmp_path):
    """A tiny vocab.txt, bert_config.json (L=1, H=32) and input file."""
    (tmp_path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=16, type_vocab_size=2)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    (tmp_path / "in.txt").write_text("hello world\nthe dogs run . ||| hello\n")
    return tmp_path, config


def test_script_takes_a_bert_tf_checkpoint(tiny_files):
    """A fine-tuning output_dir written by the Trainer: the features come from its fine-tuned encoder; --doc_stride
    reaches the library (the pair is windowed; tests/inference/test_windows.py checks the windows)."""
    d, config = tiny_files
    trainer = tiny_training.train_one_step(lambda: BertClassifier(config, 2), d / "run")
    result = _run_script(f"--input_file={d}/in.txt", f"--output_file={d}/out.jsonl", f"--vocab_file={d}/vocab.txt",
                         f"--bert_config_file={d}/bert_config.json", f"--init_checkpoint={d}/run", "--layers=-1",
                         "--max_seq_length=6", "--doc_stride=1")
    assert result.returncode == 0, result.stderr[-3000:]
    tokenizer = tokenization.FullTokenizer(str(d / "vocab.txt"))
    assert ef.extract_features(trainer.model.bert, tokenizer, str(d / "in.txt"), str(d / "ref.jsonl"), "-1", 6,
                               doc_stride=1) == 2
    ours, ref = ([json.loads(line) for line in open(d / name)] for name in ("out.jsonl", "ref.jsonl"))
    assert [f["token"] for f in ours[1]["features"]] == ["[CLS]", "the", "dog", "##s", "run", ".", "[SEP]", "hello",
                                                         "[SEP]"]
    assert [[f["token"] for f in o["features"]] for o in ours] == [[f["token"] for f in r["features"]] for r in ref]
    got = [v for o in ours for f in o["features"] for v in f["layers"][0]["values"]]
    want = [v for r in ref for f in r["features"] for v in f["layers"][0]["values"]]
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_empty_input_file_is_a_clear_error(tiny_files):
    """The original exits 0 without writing anything; bert-tf names the empty file and writes nothing."""
    d, config = tiny_files
    (d / "empty.txt").write_text("")
    tokenizer = tokenization.FullTokenizer(str(d / "vocab.txt"))
    with pytest.raises(ValueError, match=re.escape(f"Input file {d}/empty.txt is empty")):
        ef.extract_features(encoder.BertModel(config), tokenizer, str(d / "empty.txt"),
                            str(d / "out" / "o.jsonl"), "-1", 12)
    assert not (d / "out").exists()
