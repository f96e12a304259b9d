"""Fill-mask prediction (bert_tf/inference/fill_mask.py, run_scripts/predict_masked_lm.py) against a NumPy forward pass
of an original-format checkpoint with the masked-LM head."""
import json
import os
import sys

import forkserver
import numpy as np
import numpy_bert
import pytest

from bert_tf.inference import extract_features, fill_mask
from bert_tf.model.config import BertConfig
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "run_scripts", "predict_masked_lm.py")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "went", "to", "store", "buy", "a", "gallon",
         "of", "milk", ".", "he", "bought", "##s", "dog", "cat", "sat", "on", "mat", ","]
LINES = ["the man went to the [MASK] .",
         "[MASK] bought a gallon of [MASK] ||| the [MASK] sat on the mat",
         "the cat sat on the [MASK] , the dog [MASK] ."]


@pytest.fixture
def release(tmp_path):
    """A tiny original-format release: random weights with the cls/predictions head (NumPy), config, vocab."""
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=32, type_vocab_size=2)
    weights = numpy_bert.random_weights(config, seed=3, heads=True)
    numpy_bert.write_tf1_checkpoint(weights, str(tmp_path / "bert_model.ckpt"))
    config.to_json_file(str(tmp_path / "bert_config.json"))
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    (tmp_path / "input.txt").write_text("".join(line + "\n" for line in LINES))
    return tmp_path, config, weights


def _reference(weights, config, example, top_k):
    """NumPy: softmax over the vocabulary of the masked-LM logits at the mask positions, top_k (ties: lower id)."""
    arrays = {name: np.array([getattr(example, name)], np.int32) for name in ("input_ids", "input_mask",
                                                                               "segment_ids")}
    sequence = numpy_bert.forward(weights, config, **arrays)["sequence_output"]
    logits = numpy_bert.masked_lm_logits(weights, config, sequence, np.array([example.positions]))[0]
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    order = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
    return np.take_along_axis(probabilities, order, -1), order


def test_masks_survive_tokenization(tmp_path):
    tokenizer = _tokenizer(tmp_path)
    assert fill_mask.tokenize_with_masks("The [MASK] bought milk.", tokenizer) == ["the", "[MASK]", "bought",
                                                                                  "milk", "."]
    assert fill_mask.tokenize_with_masks("[MASK][MASK]", tokenizer) == ["[MASK]", "[MASK]"]
    # What the plain tokenizer would do with it:
    assert tokenizer.tokenize("[MASK]") == ["[UNK]", "[UNK]", "[UNK]"]


def _tokenizer(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w") as f:
        f.write("".join(t + "\n" for t in VOCAB))
    return tokenization.FullTokenizer(path, do_lower_case=True)


def test_predictions_equal_a_numpy_forward_pass(release):
    directory, config, weights = release
    out = directory / "masks.jsonl"
    count = fill_mask.run(str(directory / "input.txt"), str(out), str(directory / "bert_config.json"),
                          str(directory / "vocab.txt"), str(directory / "bert_model.ckpt"), max_seq_length=16,
                          top_k=4, batch_size=2)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert count == len(rows) == len(LINES)
    examples = fill_mask.convert_examples(extract_features.read_examples(str(directory / "input.txt")),
                                          _tokenizer(directory), 16)
    assert [len(row["masks"]) for row in rows] == [1, 3, 2]
    for row, example in zip(rows, examples):
        assert row["tokens"] == example.tokens and row["tokens"][0] == "[CLS]"
        assert [m["position"] for m in row["masks"]] == [i for i, t in enumerate(example.tokens) if t == "[MASK]"]
        probabilities, ids = _reference(weights, config, example, 4)
        for mask, p, i in zip(row["masks"], probabilities, ids):
            assert [x["id"] for x in mask["predictions"]] == i.tolist()
            assert [x["token"] for x in mask["predictions"]] == [VOCAB[j] for j in i]
            np.testing.assert_allclose([x["probability"] for x in mask["predictions"]], p, atol=2e-6)
    # The second line is a pair: its third mask is in segment 1.
    assert examples[1].segment_ids[examples[1].positions[2]] == 1


def test_bad_input_is_named(release):
    directory, _, weights = release
    common = dict(output_file=str(directory / "o.jsonl"), bert_config_file=str(directory / "bert_config.json"),
                  vocab_file=str(directory / "vocab.txt"), init_checkpoint=str(directory / "bert_model.ckpt"),
                  max_seq_length=16)
    (directory / "nomask.txt").write_text("the man [MASK] .\nthe man went .\n")
    with pytest.raises(ValueError, match=r"nomask.txt:2: no \[MASK\] in the line"):
        fill_mask.run(str(directory / "nomask.txt"), **common)
    with pytest.raises(ValueError, match="Cannot use sequence length 64 because the BERT model was only trained up "
                                         "to sequence length 32"):
        fill_mask.run(str(directory / "nomask.txt"), **{**common, "max_seq_length": 64})
    (directory / "long.txt").write_text("the man went to the store to buy a gallon [MASK]\n")
    with pytest.raises(ValueError, match=r"long.txt:1: 1 of its 1 \[MASK\] tokens fall beyond max_seq_length=8"):
        fill_mask.run(str(directory / "long.txt"), **{**common, "max_seq_length": 8})
    # An encoder-only checkpoint has no masked-LM head to predict with.
    encoder_only = {k: v for k, v in weights.items() if k.startswith("bert/")}
    numpy_bert.write_tf1_checkpoint(encoder_only, str(directory / "encoder" / "bert_model.ckpt"))
    with pytest.raises(ValueError, match=r"no trained masked_lm head \(e.g. variable 'cls/predictions/"):
        fill_mask.run(str(directory / "input.txt"), **{**common, "init_checkpoint": str(directory / "encoder")})
    assert not (directory / "o.jsonl").exists()


def test_script_writes_the_same_predictions(release):
    directory, _, _ = release
    args = [f"--input_file={directory / 'input.txt'}", f"--vocab_file={directory / 'vocab.txt'}",
            f"--bert_config_file={directory / 'bert_config.json'}", f"--init_checkpoint={directory}",
            "--max_seq_length=16", "--top_k=3"]
    result = forkserver.run([sys.executable, SCRIPT, *args, f"--output_file={directory / 'script.jsonl'}"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Strategy: none (TensorFlow's default device): " in result.stderr  # where it runs (training.devices)
    assert "Batch: 8, 8 per replica" in result.stderr and "CPU: " in result.stderr
    fill_mask.run(str(directory / "input.txt"), str(directory / "library.jsonl"), str(directory / "bert_config.json"),
                  str(directory / "vocab.txt"), str(directory), max_seq_length=16, top_k=3)
    assert (directory / "script.jsonl").read_text() == (directory / "library.jsonl").read_text()
