import glob
import json
import os
import re

import pytest

from bert_tf.model.config import DEFAULTS, REQUIRED, BertConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The keys every bert_config.json must give, with small values.
ARCHITECTURE = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                "intermediate_size": 37}


def test_defaults_are_the_originals():
    config = BertConfig(vocab_size=30522)
    assert config.to_dict() == {**DEFAULTS, "vocab_size": 30522}
    assert (config.hidden_size, config.num_hidden_layers, config.hidden_act, config.type_vocab_size) == (
        768, 12, "gelu", 16)
    optional = BertConfig.from_dict(ARCHITECTURE)  # keys that do not shape the weights take the defaults
    assert optional.to_dict() == {**DEFAULTS, **ARCHITECTURE}


def test_json_round_trip_keeps_the_original_form(tmp_path):
    text = json.dumps({**ARCHITECTURE, "hidden_size": 64, "hidden_act": "gelu"})
    path = tmp_path / "bert_config.json"
    path.write_text(text)
    config = BertConfig.from_json_file(str(path))
    out = tmp_path / "out.json"
    config.to_json_file(str(out))
    written = out.read_text()
    assert written == json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n"
    assert BertConfig.from_json_file(str(out)) == config


def test_unknown_keys_are_kept():
    config = BertConfig.from_dict({**ARCHITECTURE, "directionality": "bidi"})
    assert config.to_dict()["directionality"] == "bidi"


@pytest.mark.parametrize("change, message", [
    ({"hidden_size": 30, "num_attention_heads": 4}, "not a multiple of num_attention_heads"),
    ({"hidden_act": "swishy"}, "unknown hidden_act 'swishy'"),
    ({"num_hidden_layers": -1}, "`num_hidden_layers` must be a positive integer"),
    ({"vocab_size": 0}, "`vocab_size` must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "`hidden_dropout_prob` must be a probability"),
    ({"intermediate_size": "big"}, "`intermediate_size` must be a positive integer"),
])
def test_validation_names_the_key(change, message, tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({**ARCHITECTURE, **change}))
    with pytest.raises(ValueError, match=message) as info:
        BertConfig.from_json_file(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("key", REQUIRED)
def test_a_missing_architecture_key_names_the_file_and_key(key, tmp_path):
    """The original silently builds its default (e.g. 768-wide) model when a key is missing; bert-tf refuses."""
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({k: v for k, v in ARCHITECTURE.items() if k != key}))
    with pytest.raises(ValueError, match=re.escape(f"{path}: missing required key `{key}`")):
        BertConfig.from_json_file(str(path))


def test_malformed_json_reports_line(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text('{\n  "vocab_size": 100,\n  "hidden_size": 32,,\n}')
    with pytest.raises(ValueError, match=r"bert_config.json:3:\d+: malformed JSON"):
        BertConfig.from_json_file(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_every_shipped_config_loads():
    files = sorted(glob.glob(os.path.join(REPO, "configs", "*", "bert_config.json")))
    names = {os.path.basename(os.path.dirname(f)) for f in files}
    small = {f"uncased_L-{n}_H-{h}_A-{h // 64}" for n in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)}
    assert small <= names
    assert {"uncased_L-12_H-768_A-12", "uncased_L-24_H-1024_A-16", "cased_L-12_H-768_A-12",
            "multi_cased_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"} <= names
    for f in files:
        config = BertConfig.from_json_file(f)
        name = os.path.basename(os.path.dirname(f))
        if "_L-" in name:
            layers, hidden, heads = (int(p[2:]) for p in name.split("_")[-3:])
            assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
                layers, hidden, heads), f
            assert config.intermediate_size == 4 * hidden, f
