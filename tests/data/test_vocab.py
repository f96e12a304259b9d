"""WordPiece vocab learning: the released vocabularies' layout, loadable by FullTokenizer, few [UNK]s."""
import os
import subprocess
import sys

import forkserver
import pytest

from bert_tf import resources  # noqa: E402
from bert_tf.data import vocab
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def lee_corpus():
    return resources.gensim_test_file("lee_background.cor")


@pytest.fixture(scope="module")
def lee_vocab(tmp_path_factory, lee_corpus):
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    tokens = vocab.build_vocab(lee_corpus, path, vocab_size=2000, do_lower_case=True, num_unused=120,
                               lower_thresh=2, upper_thresh=64)
    return path, tokens


def test_reserved_tokens_match_the_released_layout(uncased_vocab_file):
    with open(uncased_vocab_file, encoding="utf-8") as f:
        released = [line.rstrip("\n") for line in f]
    reserved = vocab.reserved_tokens(994)
    assert released[:len(reserved)] == reserved
    assert reserved.index("[UNK]") == 100 and reserved.index("[MASK]") == 103
    assert vocab.reserved_tokens(3) == ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]",
                                        "[MASK]"]


def test_built_vocab_file(lee_vocab, lee_corpus):
    path, tokens = lee_vocab
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    assert lines == tokens and len(lines) == 2000 and len(set(lines)) == 2000
    assert lines[:100] == ["[PAD]"] + [f"[unused{i}]" for i in range(99)]
    assert lines[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert lines[104:125] == [f"[unused{i}]" for i in range(99, 120)]
    learned = [t for t in lines[125:] if not (t.startswith("[unused") and t.endswith("]"))]
    assert len(learned) > 1500  # the learner filled most of the budget on this small corpus
    assert all(t == t.lower() for t in learned)
    assert any(t.startswith("##") for t in learned) and "the" in learned
    for char in "abcdefghijklmnopqrstuvwxyz0123456789.,'\"(":
        assert char in learned, char
        if char.isalnum():
            assert "##" + char in learned, char

    tokenizer = tokenization.FullTokenizer(path, do_lower_case=True)
    assert tokenizer.vocab["[CLS]"] == 101 and tokenizer.vocab["[MASK]"] == 103
    num_tokens = num_unk = 0
    with open(lee_corpus, encoding="utf-8") as f:
        for line in f:
            pieces = tokenizer.tokenize(line)
            num_tokens += len(pieces)
            num_unk += pieces.count("[UNK]")
    assert num_tokens > 60000
    assert num_unk / num_tokens < 0.001
    # A frequent word is one piece; a rare one is split into learned pieces, not [UNK].
    assert tokenizer.tokenize("The government said") == ["the", "government", "said"]
    assert "[UNK]" not in tokenizer.tokenize("unbelievably")


def test_count_words_splits_like_basic_tokenizer():
    lines = ["Héllo, World!", "hello world."]
    assert vocab.count_words(lines, do_lower_case=True) == {"hello": 2, "world": 2, ",": 1, "!": 1, ".": 1}
    assert vocab.count_words(lines, do_lower_case=False)["Héllo"] == 1
    assert vocab.count_words(lines * 50, num_workers=2, chunk_lines=10) == \
        vocab.count_words(lines * 50, num_workers=1)


def test_cased_vocab_and_errors(tmp_path):
    counts = {"The": 50, "the": 40, "Cat": 30, "cats": 20}
    tokens = vocab.learn_vocab(counts, 60, num_unused=2, lower_thresh=1, pad_to_vocab_size=False)
    assert tokens[:7] == ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "The" in tokens and "the" in tokens and len(tokens) <= 60
    padded = vocab.learn_vocab(counts, 60, num_unused=2, lower_thresh=1)
    assert len(padded) == 60 and padded[:len(tokens)] == tokens and padded[-1].startswith("[unused")
    with pytest.raises(ValueError):
        vocab.learn_vocab(counts, 5, num_unused=2)
    with pytest.raises(ValueError):
        vocab.write_vocab(["a", "a"], str(tmp_path / "v.txt"))


def test_script(tmp_path, lee_corpus):
    out = tmp_path / "vocab.txt"
    proc = forkserver.run([sys.executable, os.path.join(REPO, "run_scripts", "build_vocab.py"),
                           f"--input_file={lee_corpus}", f"--output_file={out}", "--vocab_size=400",
                           "--num_unused=5", "--max_lines=40", "--lower_thresh=2", "--nodo_lower_case"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 400
    assert lines[:10] == ["[PAD]"] + [f"[unused{i}]" for i in range(5)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(t != t.lower() for t in lines)  # cased
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_learner_loads_without_tensorflow():
    code = ("import sys; from bert_tf.data import vocab; lib = vocab._learner_lib(); "
            "print(hasattr(lib, 'learn'), 'tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "False"], proc.stderr[-2000:]
