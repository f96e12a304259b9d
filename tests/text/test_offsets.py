"""Tests for the tokenizers' character offsets (`tokenize_with_offsets`): the same tokens as `tokenize`, each with the
span of the given text it came from, by hand on each kind of character and as properties on random text."""
import random

import pytest
from test_tokenization import TRICKY, _random_texts

from bert_tf.text import tokenization

# Pieces for the hand cases, cased and uncased.
SMALL_VOCAB = ["[UNK]", "un", "##aff", "##able", "ab", "##c", "##d", "st", "##raße", "Ca", "##fé", "##fe", "##\u0301",
               "cafe", "i", "##stanbul", "ο", "##δ", "##ος", ",", "!", "中", "文", "hello", "world", "a", "b", "c", "d",
               "e", "x", "jose", "Jos", "##e"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """{do_lower_case: FullTokenizer} on SMALL_VOCAB."""
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in SMALL_VOCAB), encoding="utf-8")
    return {lower: tokenization.FullTokenizer(str(path), do_lower_case=lower) for lower in (True, False)}


@pytest.fixture(scope="module")
def full(uncased_vocab_file):
    """{do_lower_case: FullTokenizer} on the bert-base-uncased vocab."""
    return {lower: tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=lower) for lower in (True, False)}


def spans(tokenizer, text):
    """[(piece, text[start:end])] of `tokenize_with_offsets`, after checking its pieces are `tokenize`'s."""
    result = tokenizer.tokenize_with_offsets(text)
    assert [piece for piece, _, _ in result] == tokenizer.tokenize(text)
    return [(piece, text[start:end]) for piece, start, end in result]


# (text, uncased pieces with their text, cased ones): spans worked out by hand.
HAND = [
    # the original tokenization_test.py's inputs
    ("UNwant\u00e9d,running", [("[UNK]", "UNwant\u00e9d"), (",", ","), ("[UNK]", "running")], None),
    ("unaffable", [("un", "un"), ("##aff", "aff"), ("##able", "able")], None),
    ("ah\u535a\u63a8zz", [("[UNK]", "ah"), ("[UNK]", "\u535a"), ("[UNK]", "\u63a8"), ("[UNK]", "zz")], None),
    (" \tHeLLo!how  \n Are yoU?  ", [("hello", "HeLLo"), ("!", "!"), ("[UNK]", "how"), ("[UNK]", "Are"),
                                     ("[UNK]", "yoU"), ("[UNK]", "?")],
     [("[UNK]", "HeLLo"), ("!", "!"), ("[UNK]", "how"), ("[UNK]", "Are"), ("[UNK]", "yoU"), ("[UNK]", "?")]),
    # ASCII, punctuation one each
    ("Hello, world!", [("hello", "Hello"), (",", ","), ("world", "world"), ("!", "!")],
     [("[UNK]", "Hello"), (",", ","), ("world", "world"), ("!", "!")]),
    # precomposed and decomposed accents: the combining mark goes with its letter (uncased) or is its own piece
    ("Café José", [("cafe", "Café"), ("jose", "José")], [("Ca", "Ca"), ("##fé", "fé"), ("[UNK]", "José")]),
    ("Cafe\u0301 Jose\u0301", [("cafe", "Cafe\u0301"), ("jose", "Jose\u0301")],
     [("Ca", "Ca"), ("##fe", "fe"), ("##\u0301", "\u0301"), ("Jos", "Jos"), ("##e", "e"), ("##\u0301", "\u0301")]),
    # a combining mark on its own (after a space) vanishes when lower-casing
    ("\u0301 e\u0301\u0327!", [("e", "e\u0301\u0327"), ("!", "!")], [("[UNK]", "\u0301"), ("[UNK]", "e\u0301\u0327"),
                                                                   ("!", "!")]),
    # lower-casing that keeps the length (ß, final sigma) and that doubles it (İ -> i + U+0307, stripped again)
    ("Straße İstanbul ΟΔΟΣ", [("st", "St"), ("##raße", "raße"), ("i", "İ"), ("##stanbul", "stanbul"), ("ο", "Ο"),
                              ("##δ", "Δ"), ("##ος", "ΟΣ")],
     [("[UNK]", "Straße"), ("[UNK]", "İstanbul"), ("[UNK]", "ΟΔΟΣ")]),
    # CJK one each, glued to Latin letters or not
    ("ab中文cd", [("ab", "ab"), ("中", "中"), ("文", "文"), ("c", "c"), ("##d", "d")], None),
    # emoji (outside the BMP: one code point) spell no piece: [UNK] covers its whole word
    ("\U0001f600a b\U0001f600", [("[UNK]", "\U0001f600a"), ("[UNK]", "b\U0001f600")], None),
    # repeated, non-ASCII and ideographic spaces, tabs and newlines separate words and belong to none
    ("a  b\u00a0\u00a0c\u3000d\t\ne\u2028x", [("a", "a"), ("b", "b"), ("c", "c"), ("d", "d"), ("e", "e"),
                                              ("x", "x")], None),
    # NUL, U+FFFD and format characters are dropped: inside a piece they lie inside its span, between two in none
    ("a\x00b\ufffdc\u200bd\x00 \ufffde", [("ab", "a\x00b"), ("##c", "c"), ("##d", "d"), ("e", "e")], None),
    # over max_input_chars_per_word (200) characters: one [UNK] for the word
    (" ab" + "c" * 199 + "!", [("[UNK]", "ab" + "c" * 199), ("!", "!")], None),
    ("", [], None),
    ("\x00 \t\u3000\ufffd", [], None),
]


@pytest.mark.parametrize("text,uncased,cased", HAND, ids=[repr(case[0])[:24] for case in HAND])
def test_hand_cases(small, text, uncased, cased):
    assert spans(small[True], text) == uncased
    assert spans(small[False], text) == (uncased if cased is None else cased)


def test_offsets_are_code_points_of_the_decoded_text(small):
    # the emoji is one code point; the word it ends spells no pieces
    assert small[True].tokenize_with_offsets("Café\U0001f600 中 x") == [("[UNK]", 0, 5), ("中", 6, 7), ("x", 8, 9)]
    assert small[True].tokenize_with_offsets("Café x") == [("cafe", 0, 4), ("x", 5, 6)]
    # bytes: offsets into the text as decoded (invalid bytes dropped first)
    assert small[True].tokenize_with_offsets(b"\xffCaf\xc3\xa9 x") == [("cafe", 0, 4), ("x", 5, 6)]


def test_hangul_syllables_share_their_span(full):
    # lower-casing decomposes each syllable into jamo, each a piece: all three come from the one syllable
    text = "a\u0301\u0301한 국"
    assert spans(full[True], text) == [("a", "a\u0301\u0301"), ("##ᄒ", "한"), ("##ᅡ", "한"), ("##ᆫ", "한"),
                                       ("ᄀ", "국"), ("##ᅮ", "국"), ("##ᆨ", "국")]
    assert spans(full[False], text) == [("[UNK]", "a\u0301\u0301한"), ("[UNK]", "국")]


def test_basic_tokenizer_words(small):
    text = "  Hello,\u00a0WÖRLD\u0301!  中x "
    expected = [("hello", 2, 7), (",", 7, 8), ("world", 9, 15), ("!", 15, 16), ("中", 18, 19), ("x", 19, 20)]
    assert tokenization.BasicTokenizer(True).tokenize_with_offsets(text) == expected
    cased = [(text[start:end], start, end) for _, start, end in expected]
    cased[2] = ("WÖRLD\u0301", 9, 15)
    assert tokenization.BasicTokenizer(False).tokenize_with_offsets(text) == cased


def test_subclassed_basic_tokenizer_is_refused(small):
    tokenizer = tokenization.FullTokenizer(small[True].vocab_file)
    tokenizer.basic_tokenizer = type("Upper", (tokenization.BasicTokenizer,), {})()
    with pytest.raises(TypeError, match="needs a BasicTokenizer"):
        tokenizer.tokenize_with_offsets("x")


# --- properties on random text ---------------------------------------------------------------------------------

# Accents (precomposed, decomposed, alone), length-changing lower-casing, CJK, emoji, Hangul, spaces, dropped
# characters, punctuation, an over-long word, characters whose NFD is punctuation (U+1FEF, U+037E) or only marks.
PARTS = ["Café", "Cafe\u0301", "e\u0301\u0327", "\u0301", "Straße", "İ", "İstanbul", "ΟΔΟΣ", "ΣΟΣ", "中文",
         "\U0001f600", "한국어", "\u00a0", "\u3000", "\t", "\n", "  ", "\x00", "\ufffd", "\u200b", "don't", "U.S.",
         "a" * 201, "unaffable", "\u1fef", "\u037e", "\u0f73", "\u0385", "=\u1b44", "x", "The", " "]


def _mixed_texts(n, seed=53):
    rng = random.Random(seed)
    return ["".join(rng.choice(PARTS) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def _retokenized(basic, text):
    """`basic.tokenize(text)`, final sigma as sigma (lower-casing a piece alone may see a word end)."""
    return [token.replace("ς", "σ") for token in basic.tokenize(text)]


def test_random_text_properties(full):
    texts = [case[0] for case in TRICKY] + _random_texts(300, seed=53) + _mixed_texts(300)
    for tokenizer in full.values():
        basic, wordpiece = tokenizer.basic_tokenizer, tokenizer.wordpiece_tokenizer
        for text in texts:
            pieces = tokenizer.tokenize_with_offsets(text)
            assert [piece for piece, _, _ in pieces] == tokenizer.tokenize(text), repr(text)
            words = basic.tokenize_with_offsets(text)
            assert [word for word, _, _ in words] == basic.tokenize(text), repr(text)
            previous_end = 0
            for word, start, end in words:
                # each word's span tokenizes to the word alone, and the spans are in order without overlap
                assert previous_end <= start < end <= len(text), repr(text)
                assert _retokenized(basic, text[start:end]) == [word.replace("ς", "σ")], repr(text)
                previous_end = end
                # the word's pieces are the next ones, between its ends, in order
                word_pieces = [pieces.pop(0) for _ in wordpiece.tokenize(word)]
                assert word_pieces[0][1] == start and word_pieces[-1][2] == end, repr(text)
                for k, (piece, piece_start, piece_end) in enumerate(word_pieces):
                    assert start <= piece_start < piece_end <= end, repr(text)
                    if piece == wordpiece.unk_token:
                        assert (piece_start, piece_end) == (start, end), repr(text)
                        continue
                    if k:
                        assert word_pieces[k - 1][2] <= piece_end and word_pieces[k - 1][1] <= piece_start
                    # a piece's span normalizes to the piece, unless it shares characters with a neighbour
                    # (a Hangul syllable decomposes into jamo that may fall into several pieces)
                    shared = (k and word_pieces[k - 1][2] > piece_start) or (
                        k + 1 < len(word_pieces) and word_pieces[k + 1][1] < piece_end)
                    core = _retokenized(basic, text[piece_start:piece_end])
                    if shared:
                        assert piece.removeprefix("##").replace("ς", "σ") in "".join(core), repr(text)
                    else:
                        assert core == [piece.removeprefix("##").replace("ς", "σ")], repr(text)
            assert not pieces, repr(text)
