"""Tests for bert_tf.tokenization: the original test-suite's cases, golden parity with the original
extract_features.py, hand-derived expectations on tricky Unicode, and agreement of the fast paths."""
import gzip
import json
import os
import random
import re
import unicodedata

import pytest

from bert_tf.text import tokenization

SMALL_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture
def small_vocab_file(tmp_path):
    return _write(tmp_path / "vocab.txt", "".join(t + "\n" for t in SMALL_VOCAB).encode("utf-8"))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def do_lower_case(request):
    return request.param


@pytest.fixture(scope="module")
def uncased(uncased_vocab_file):
    return tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def tokenizers(uncased_vocab_file):
    """{do_lower_case: (cached FullTokenizer, uncached FullTokenizer)} on the bert-base-uncased vocab."""
    return {lower: (tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=lower),
                    tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=lower, cache_size=0))
            for lower in (True, False)}


# ------------------------------------------------------------------------------------------------
# The original tokenization_test.py cases
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cache_size", [1 << 16, 0])
def test_full_tokenizer(small_vocab_file, cache_size):
    tok = tokenization.FullTokenizer(small_vocab_file, cache_size=cache_size)
    for _ in range(2):  # second round is served from the cache
        tokens = tok.tokenize("UNwant\u00E9d,running")
        assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tok.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens


def test_full_tokenizer_cased(small_vocab_file):
    tok = tokenization.FullTokenizer(small_vocab_file, do_lower_case=False)
    # "UNwant" has no pieces in the vocab; without lower-casing the accent stays, so "éd" fails too.
    assert tok.tokenize("UNwant\u00E9d,running") == ["[UNK]", ",", "runn", "##ing"]


def test_chinese(do_lower_case):
    tok = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    assert tok.tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tok = tokenization.BasicTokenizer(do_lower_case=True)
    assert tok.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tok.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tok = tokenization.BasicTokenizer(do_lower_case=False)
    assert tok.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert tok.tokenize("H\u00E9llo") == ["H\u00E9llo"]


def test_wordpiece_tokenizer():
    vocab = {t: i for i, t in enumerate(SMALL_VOCAB[:-1])}
    tok = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tok.tokenize("") == []
    assert tok.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tok.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_convert_tokens_to_ids():
    vocab = {t: i for i, t in enumerate(SMALL_VOCAB[:-1])}
    assert tokenization.convert_tokens_to_ids(vocab, ["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]
    inv = {i: t for t, i in vocab.items()}
    assert tokenization.convert_ids_to_tokens(inv, [7, 4]) == ["un", "##want"]


def test_is_whitespace():
    for c in " \t\r\n\u00A0\u2003\u3000":
        assert tokenization._is_whitespace(c), repr(c)
    for c in "A-\u2028\x0b\x85":  # line separator / VT / NEL are not whitespace here (not Zs)
        assert not tokenization._is_whitespace(c), repr(c)


def test_is_control():
    for c in "\u0005\x00\x7f\u200d\u00ad\ufeff":
        assert tokenization._is_control(c), repr(c)
    for c in ["A", " ", "\t", "\r", "\n", "\U0001F4A9"]:
        assert not tokenization._is_control(c), repr(c)


def test_is_punctuation():
    for c in "-$`.^~\u00bf\u2014\u3001":
        assert tokenization._is_punctuation(c), repr(c)
    for c in "A \u00b2\u2460":
        assert not tokenization._is_punctuation(c), repr(c)


def test_is_chinese_char():
    for cp in (0x4E00, 0x9FFF, 0x3400, 0x20000, 0x2A6DF, 0x2B820, 0xF900, 0x2F800, 0x2FA1F):
        assert tokenization._is_chinese_char(cp), hex(cp)
        assert tokenization.BasicTokenizer()._is_chinese_char(cp)
    for cp in (0x4DFF, 0x2A6E0, 0x3042, 0xAC00, ord("a"), 0x2FA20):  # hexagrams, gap, kana, hangul
        assert not tokenization._is_chinese_char(cp), hex(cp)


# ------------------------------------------------------------------------------------------------
# Golden parity with the original extract_features.py
# ------------------------------------------------------------------------------------------------

def _truncate_pair(tokens_a, tokens_b, max_length):
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def _features_tokens(tokenizer, line, seq_length=128):
    line = line.strip()
    m = re.match(r"^(.*) \|\|\| (.*)$", line)
    text_a, text_b = (line, None) if m is None else (m.group(1), m.group(2))
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    if tokens_b:
        _truncate_pair(tokens_a, tokens_b, seq_length - 3)
        return ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    return ["[CLS]"] + tokens_a[:seq_length - 2] + ["[SEP]"]


@pytest.mark.parametrize("cache_size", [1 << 16, 0])
def test_golden_extract_features_tokens(data_dir, uncased_vocab_file, cache_size):
    with open(os.path.join(data_dir, "extract_input.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines[-1] == "":
        lines.pop()
    with gzip.open(os.path.join(data_dir, "extract_features_minilm.jsonl.gz"), "rt", encoding="utf-8") as f:
        golden = [[feat["token"] for feat in json.loads(row)["features"]] for row in f]
    assert len(golden) == len(lines) == 5
    tok = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True, cache_size=cache_size)
    for i, line in enumerate(lines):
        assert _features_tokens(tok, line) == golden[i], f"line {i}"
    assert len(golden[1]) == 112 and len(golden[2]) == 64  # a pair and a long single line were covered


# ------------------------------------------------------------------------------------------------
# Tricky text, expectations derived by hand from the original's rules (bert-base-uncased vocab)
# ------------------------------------------------------------------------------------------------

# (text, expected with do_lower_case=True, expected with do_lower_case=False)
TRICKY = [
    # accents stripped only when lower-casing; compatibility chars (ligature, full-width, circled,
    # superscript) are NOT normalised (no NFKC), so only what the vocab spells survives.
    ("Ünïcödé naïve café — ﬁne Ｈello ①² 力加勝北区 😀",
     ["unicode", "naive", "cafe", "—", "ﬁ", "##ne", "[UNK]", "[UNK]", "力", "加", "勝", "北", "区", "[UNK]"],
     ["[UNK]", "[UNK]", "[UNK]", "—", "ﬁ", "##ne", "[UNK]", "[UNK]", "力", "加", "勝", "北", "区", "[UNK]"]),
    # Greek: str.lower() gives the final sigma at word end; accents (tonos) stripped.
    ("ΟΔΟΣ Σ όσος", ["ο", "##δ", "##ος", "σ", "ο", "##σ", "##ος"], ["[UNK]", "[UNK]", "[UNK]"]),
    # Turkish dotted capital I lower-cases to "i" + U+0307, whose combining dot is then stripped.
    ("İstanbul", ["istanbul"], ["[UNK]"]),
    # format characters (ZWJ, soft hyphen, BOM), NUL and U+FFFD are deleted, joining their neighbours.
    ("a\u200db co\u00adoperate \ufeffhello a\x00b a\ufffdb", ["ab", "cooperate", "hello", "ab", "ab"],
     ["ab", "cooperate", "hello", "ab", "ab"]),
    # \t \r \n, NBSP, em space, ideographic space, narrow NBSP and the line separator all split words...
    ("a\tb\rc\nd\u00a0e\u2003f\u3000g\u202fh\u2028i", list("abcdefghi"), list("abcdefghi")),
    # ...but VT, FF, FS and NEL are control characters (Cc), so they are deleted and glue words together.
    ("a\x0bb\x0cc\x1cd\x85e", ["abc", "##de"], ["abc", "##de"]),
    # CJK (incl. extension B up to U+2A6DF) is spaced; U+2A6E0 lies outside the listed ranges.
    ("中文abc \U00020000x\U0002A6DFy\U0002A6E0", ["中", "文", "abc", "[UNK]", "x", "[UNK]", "[UNK]"],
     ["中", "文", "abc", "[UNK]", "x", "[UNK]", "[UNK]"]),
    # Thai and Devanagari vowel signs / virama are Mn, so lower-casing strips them from the words.
    ("สวัสดี", ["[UNK]"], ["[UNK]"]),
    ("नमस्ते", ["न", "##म", "##स", "##त"], ["[UNK]"]),
    ("مرحبا", ["م", "##ر", "##ح", "##ب", "##ا"], ["م", "##ر", "##ح", "##ب", "##ا"]),
    # all non-alphanumeric ASCII is punctuation, one token per character; Unicode P* too.
    ("hello!!!?(x)[y]{z} don't $5.00 ^_^ `x` ~",
     ["hello", "!", "!", "!", "?", "(", "x", ")", "[", "y", "]", "{", "z", "}", "don", "'", "t",
      "$", "5", ".", "00", "^", "_", "^", "`", "x", "`", "~"], None),
    ("«quote» ¿qué? ‘x’", ["«", "quote", "»", "¿", "que", "?", "‘", "x", "’"],
     ["«", "quote", "»", "¿", "[UNK]", "?", "‘", "x", "’"]),
    # a lone combining mark vanishes when lower-casing; "ß" has no lower-case change; "Straße" splits.
    ("\u0301 e\u0301 ß Straße", ["e", "ß", "st", "##raße"], ["[UNK]", "[UNK]", "ß", "[UNK]"]),
    ("", [], []),
    (" \t\n\u3000 ", [], []),
]


@pytest.mark.parametrize("text,expect_lower,expect_cased", TRICKY, ids=[repr(t[0])[:24] for t in TRICKY])
def test_tricky_text(tokenizers, text, expect_lower, expect_cased):
    if expect_cased is None:  # same expectation in both cases
        expect_cased = expect_lower
    for lower, expected in ((True, expect_lower), (False, expect_cased)):
        cached, uncached = tokenizers[lower]
        assert cached.tokenize(text) == expected, lower
        assert cached.tokenize(text) == expected, lower  # now from the cache
        assert uncached.tokenize(text) == expected, lower
        assert cached.tokenize(text.encode("utf-8")) == expected, lower


def test_word_length_limit_counts_characters(uncased):
    assert uncased.tokenize("a" * 199) == ["aaa"] + ["##aa"] * 98
    assert uncased.tokenize("a" * 200) == ["aaa"] + ["##aa"] * 98 + ["##a"]
    assert uncased.tokenize("a" * 201) == ["[UNK]"]
    # 200 two-byte characters: still within the limit (characters, not bytes).
    assert uncased.tokenize("é" * 200) != ["[UNK]"]
    # Lower-casing "İ" doubles the length, but stripping the dot brings it back before the check.
    assert uncased.tokenize("İ" * 150) == ["iii"] + ["##iii"] * 49
    wp = tokenization.WordpieceTokenizer({"a": 0, "##a": 1}, max_input_chars_per_word=3)
    assert wp.tokenize("aaa aaaa") == ["a", "##a", "##a", "[UNK]"]


def test_bytes_input(uncased):
    # invalid UTF-8 bytes are dropped silently; a truncated sequence at the end too.
    assert uncased.tokenize(b"caf\xc3\xa9 \xff\xfeabc \xe2\x82") == ["cafe", "abc"]
    assert uncased.tokenize(b"x\xc3") == ["x"]
    assert tokenization.convert_to_unicode(b"a\xffb") == "ab"
    assert tokenization.printable_text(b"\xc3\xa9") == "é"
    assert tokenization.printable_text("é") == "é"
    with pytest.raises(ValueError, match="Unsupported string type"):
        tokenization.convert_to_unicode(3)
    with pytest.raises(ValueError, match="Unsupported string type"):
        uncased.tokenize(bytearray(b"abc"))


# ------------------------------------------------------------------------------------------------
# Fast paths agree with slow/reference paths
# ------------------------------------------------------------------------------------------------

def _reference_basic(text, do_lower_case):
    """The original pipeline, spelled out with the per-character helper methods."""
    bt = tokenization.BasicTokenizer(do_lower_case)
    text = bt._tokenize_chinese_chars(bt._clean_text(tokenization.convert_to_unicode(text)))
    pieces = []
    for token in tokenization.whitespace_tokenize(text):
        if do_lower_case:
            token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                            if unicodedata.category(c) != "Mn")
        pieces.extend(bt._run_split_on_punc(token))
    return tokenization.whitespace_tokenize(" ".join(pieces))


def _reference_wordpiece(vocab, word, unk="[UNK]", max_chars=200):
    """Greedy longest-match-first, trying every end position (no length bound)."""
    if len(word) > max_chars:
        return [unk]
    out, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                out.append(piece)
                start = end
                break
        else:
            return [unk]
    return out


_SPECIAL_CPS = [0, 0xFFFD, 0x200D, 0xAD, 0xFEFF, 9, 10, 13, 11, 0x1C, 0x85, 0xA0, 0x2028, 0x3000, 0x130,
                0x3A3, 0x301, 0x1F600, 0x20000, 0x2A6E0, 0x4E00, 0xE31, 0x94D, 0x2460, 0xFB01, 0xFF28]
_WORDS = ["the", "Running", "ΟΔΟΣ", "İstanbul", "café", "naïve", "unwanted", "##", "[UNK]", "don't", " "]


def _random_texts(n, seed=1234):
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 30)):
            r = rng.random()
            if r < 0.45:
                parts.append(chr(rng.randint(32, 126)))
            elif r < 0.6:
                parts.append(chr(rng.choice(_SPECIAL_CPS)))
            elif r < 0.75:
                parts.append(chr(rng.randint(0x80, 0x2FFF)))
            elif r < 0.8:
                parts.append(chr(rng.randint(0, 0x10FFFF)))
            else:
                parts.append(rng.choice(_WORDS))
        texts.append("".join(parts))
    return texts


def test_fast_paths_match_reference(tokenizers, uncased_vocab_file):
    vocab = tokenizers[True][0].vocab
    for lower in (True, False):
        cached, uncached = tokenizers[lower]
        basic = tokenization.BasicTokenizer(lower)
        for text in _random_texts(1500, seed=7 + lower):
            expected_basic = _reference_basic(text, lower)
            assert basic.tokenize(text) == expected_basic, repr(text)
            expected = [p for t in expected_basic for p in _reference_wordpiece(vocab, t)]
            assert cached.tokenize(text) == expected, repr(text)
            assert uncached.tokenize(text) == expected, repr(text)


def test_character_helpers_match_unicodedata():
    # spot-check the lazily built tables against the definitions over a spread of code points
    for cp in list(range(0x3000)) + list(range(0x1F000, 0x1F100)) + [0xE0001, 0x10FFFF]:
        c = chr(cp)
        cat = unicodedata.category(c)
        assert tokenization._is_control(c) == (c not in "\t\n\r" and cat in ("Cc", "Cf")), hex(cp)
        assert tokenization._is_whitespace(c) == (c in " \t\n\r" or cat == "Zs"), hex(cp)
        ascii_punct = 33 <= cp <= 126 and not c.isalnum()
        assert tokenization._is_punctuation(c) == (ascii_punct or cat.startswith("P")), hex(cp)


def test_ascii_and_non_ascii_paths_agree(uncased):
    base = "Hello, World! It's 3:15pm -- see https://x.org/a_b?c=d&e."
    expected = uncased.tokenize(base)
    # the same words surrounded by non-ASCII text take the Unicode paths but must tokenize the same
    assert uncased.tokenize("\u00e9 " + base + " \u4e2d") == ["e"] + expected + ["中"]
    assert uncased.tokenize(base.replace(" ", "\u00a0")) == expected
    bt = tokenization.BasicTokenizer()
    for word in base.split():
        assert bt._run_strip_accents(word.lower()) == word.lower()
    # precomposed vs decomposed accents are the same once lower-cased
    assert uncased.tokenize("Caf\u00e9 na\u00efve") == uncased.tokenize("Cafe\u0301 nai\u0308ve")


def test_subclassed_components_are_used(uncased_vocab_file):
    class Upper(tokenization.BasicTokenizer):
        def tokenize(self, text):
            return [t.upper() for t in super().tokenize(text)]

    tok = tokenization.FullTokenizer(uncased_vocab_file)
    assert tok.tokenize("hello") == ["hello"]
    tok.basic_tokenizer = Upper(do_lower_case=True)
    assert tok.tokenize("hello") == ["[UNK]"]


def test_cache_follows_setting_and_vocab_changes(small_vocab_file):
    tok = tokenization.FullTokenizer(small_vocab_file)
    assert tok.tokenize("UNwant") == ["un", "##want"]
    tok.basic_tokenizer.do_lower_case = False
    assert tok.tokenize("UNwant") == ["[UNK]"]
    tok.basic_tokenizer.do_lower_case = True
    assert tok.tokenize("wanted") == ["want", "##ed"]
    tok.vocab["wanted"] = len(tok.vocab)  # grows the vocab in place
    assert tok.tokenize("wanted") == ["wanted"]


def test_small_cache_evicts_correctly(small_vocab_file):
    tok = tokenization.FullTokenizer(small_vocab_file, cache_size=2)
    words = ["unwanted", "running", "want", "wa", "unwanted", "runn"]
    for _ in range(3):
        assert tok.tokenize(" ".join(words)) == ["un", "##want", "##ed", "runn", "##ing", "want", "wa",
                                                 "un", "##want", "##ed", "runn"]
    assert len(tok._cache) <= 2


def test_wordpiece_length_bound_does_not_change_results():
    vocab = {"a": 0, "ab": 1, "##b": 2, "##bc": 3, "abcd": 4, "##d": 5, "##": 6}
    wp = tokenization.WordpieceTokenizer(vocab)
    rng = random.Random(0)
    for _ in range(500):
        word = "".join(rng.choice("abcd#") for _ in range(rng.randint(1, 12)))
        assert wp.tokenize(word) == _reference_wordpiece(vocab, word), word



def test_wordpiece_takes_a_vocab_that_only_answers_in():
    """The original's WordpieceTokenizer needs only `in` of its vocab (a set, a trie, a lookup object)."""
    class Lookup:
        def __init__(self, tokens):
            self.tokens = set(tokens)

        def __contains__(self, token):
            return token in self.tokens

        def __len__(self):
            return len(self.tokens)

    vocab = {"a": 0, "ab": 1, "##b": 2, "##bc": 3, "abcd": 4, "##d": 5, "##": 6}
    wp = tokenization.WordpieceTokenizer(Lookup(vocab))
    for word in ("abcd", "abbcd", "abd", "dd", "a" * 30):
        assert wp.tokenize(word) == _reference_wordpiece(vocab, word), word

# ------------------------------------------------------------------------------------------------
# Vocabulary loading and errors
# ------------------------------------------------------------------------------------------------

def test_load_vocab_line_semantics(tmp_path):
    # ids are line numbers; \r is dropped everywhere, lines split on \n only, then stripped;
    # a blank line is the token ""; a repeated token keeps its last id; no trailing newline is fine.
    path = _write(tmp_path / "v.txt", "[PAD]\r\n a b \n\nx\ry\u2028z\nfoo\u3000\nfoo\nlast".encode("utf-8"))
    vocab = tokenization.load_vocab(path)
    assert list(vocab.items()) == [("[PAD]", 0), ("a b", 1), ("", 2), ("xy\u2028z", 3), ("foo", 5), ("last", 6)]
    tok = tokenization.FullTokenizer(path)
    assert tok.inv_vocab == {0: "[PAD]", 1: "a b", 2: "", 3: "xy\u2028z", 5: "foo", 6: "last"}
    assert tok.convert_ids_to_tokens([5, 6]) == ["foo", "last"]
    with pytest.raises(KeyError, match="id 4 is not in the vocab file"):
        tok.convert_ids_to_tokens([4])  # the first "foo" line


def test_real_vocab(uncased):
    assert len(uncased.vocab) == 30522
    assert uncased.vocab["[PAD]"] == 0 and uncased.vocab["[UNK]"] == 100
    assert uncased.convert_tokens_to_ids(["[CLS]", "[SEP]", "the"]) == [101, 102, 1996]


def test_missing_vocab_file_names_path(tmp_path):
    missing = str(tmp_path / "nope" / "vocab.txt")
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        tokenization.FullTokenizer(missing)
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        tokenization.load_vocab(missing)


def test_empty_vocab_file(tmp_path):
    for name, data in [("empty.txt", b""), ("cr.txt", b"\r")]:
        path = _write(tmp_path / name, data)
        with pytest.raises(ValueError, match=re.escape(path) + ".*empty"):
            tokenization.FullTokenizer(path)


def test_non_utf8_vocab_file(tmp_path):
    path = _write(tmp_path / "latin1.txt", b"[UNK]\ncaf\xe9\n")
    with pytest.raises(ValueError, match=re.escape(path) + r".*UTF-8 \(line 2\)"):
        tokenization.load_vocab(path)


def test_vocab_without_unk(tmp_path):
    path = _write(tmp_path / "v.txt", b"[CLS]\n[SEP]\nhello\n")
    tok = tokenization.FullTokenizer(path)
    tokens = tok.tokenize("hello world")
    assert tokens == ["hello", "[UNK]"]  # tokenize still marks the unknown word, as the original does
    with pytest.raises(KeyError, match=re.escape(path) + ".*needs a '\\[UNK\\]' entry"):
        tok.convert_tokens_to_ids(tokens)
    with pytest.raises(KeyError, match="'nope' is not in the vocab file"):
        tok.convert_tokens_to_ids(["nope"])


# ------------------------------------------------------------------------------------------------
# Checkpoint casing check
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ckpt,lower", [
    ("gs://bucket/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
    ("/models/uncased_L-24_H-1024_A-16/bert_model.ckpt", False),
    ("multilingual_L-12_H-768_A-12/bert_model.ckpt", False),
    ("/m/chinese_L-12_H-768_A-12/bert_model.ckpt-1000", False),
    ("/m/cased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt", True),
])
def test_validate_case_mismatch_raises(ckpt, lower):
    with pytest.raises(ValueError, match="do_lower_case"):
        tokenization.validate_case_matches_checkpoint(lower, ckpt)


@pytest.mark.parametrize("ckpt,lower", [
    ("uncased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("/m/cased_L-24_H-1024_A-16/bert_model.ckpt", False),
    ("/m/my_model/bert_model.ckpt", False),  # unknown names are not checked
    ("/m/my_model/bert_model.ckpt", True),
    ("/m/uncased_L-12_H-768_A-12/model.ckpt", False),  # not the bert_model.ckpt layout
    ("", False),
    (None, True),
])
def test_validate_case_match_passes(ckpt, lower):
    assert tokenization.validate_case_matches_checkpoint(lower, ckpt) is None
