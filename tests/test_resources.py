import csv
import os

import pytest

from bert_tf import resources


def test_minilm_is_found():
    model_dir = resources.minilm_dir()
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(model_dir))


def test_polarity_tsv_is_a_stratified_reproducible_split(tmp_path):
    assert resources.write_polarity_tsv(str(tmp_path / "a"), split_seed=3) == (160, 40)
    resources.write_polarity_tsv(str(tmp_path / "b"), split_seed=3)
    resources.write_polarity_tsv(str(tmp_path / "c"), split_seed=4)
    read = lambda d, n: list(csv.reader(open(tmp_path / d / f"{n}.tsv", encoding="utf-8"),  # noqa: E731
                                        delimiter="\t", quoting=csv.QUOTE_NONE))
    train, dev = read("a", "train"), read("a", "dev")
    assert train[0] == dev[0] == ["id", "label", "text_a"]
    assert sorted(r[1] for r in dev[1:]) == ["neg"] * 20 + ["pos"] * 20
    assert not {r[0] for r in train[1:]} & {r[0] for r in dev[1:]}
    assert read("b", "train") == train and read("c", "train") != train
    assert all(len(r) == 3 and r[2] for r in train[1:])


def test_missing_package_says_how_to_install():
    with pytest.raises(ImportError, match="pip install nothing-here"):
        resources._package_dir("no_such_module_bert_tf", "pip install nothing-here")
