"""google-research/bert's ``tokenization.py``: the same API and the same output for every input, faster.

Per text: UTF-8 decode (invalid bytes dropped) -> drop NUL, U+FFFD, Cc/Cf; whitespace -> spaces; spaces around CJK
ideographs -> split on whitespace -> per word: lower-case, NFD, drop Mn (``do_lower_case`` only) -> split off
punctuation -> greedy longest-match-first WordPiece (``##`` prefix; a word over ``max_input_chars_per_word``
characters, or one it cannot spell, becomes ``unk_token``). Speed: ``str.translate`` with lazily filled tables, and
``FullTokenizer`` memoises each word's pieces.

Offsets (``tokenize_with_offsets``, not in the original): the same tokens, each with the span of the given text (code
points) it came from. A dropped character (NUL, control) between two of a piece's characters lies inside its span;
an accent stripped by lower-casing joins the span before it (``e`` + U+0301: "e" spans both); the characters one
character normalizes to (a Hangul syllable's jamo) each span all of it; an ``unk_token`` spans its whole word.
"""

import collections
import itertools
import os
import re
import unicodedata

from bert_tf import fileio

__all__ = [
    "BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "convert_by_vocab", "convert_ids_to_tokens",
    "convert_to_unicode", "convert_tokens_to_ids", "load_vocab", "printable_text", "validate_case_matches_checkpoint",
    "whitespace_tokenize",
]

# Checkpoint directory names of the released models, by casing (used only for the sanity check).
_UNCASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12", "multilingual_L-12_H-768_A-12",
                   "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12")
# Same pattern as the original (including its unescaped '.' before "ckpt").
_CHECKPOINT_NAME_RE = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model.ckpt")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """ValueError if `do_lower_case` contradicts the released model that `init_checkpoint`'s path names."""
    if not init_checkpoint:
        return
    match = _CHECKPOINT_NAME_RE.match(init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _UNCASED_MODELS and not do_lower_case:
        given, kind, wanted = "False", "lowercased (uncased)", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        given, kind, wanted = "True", "cased", "False"
    else:
        return
    raise ValueError(
        f"do_lower_case={given} does not match init_checkpoint={init_checkpoint!r}: `{model_name}` is a "
        f"{kind} model, so use do_lower_case={wanted} to tokenize the way it was pre-trained. If the "
        f"checkpoint was renamed and this check is wrong, skip validate_case_matches_checkpoint.")


def convert_to_unicode(text):
    """`text` as str; bytes are decoded as UTF-8, invalid bytes dropped."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % (type(text),))


def printable_text(text):
    """Same as convert_to_unicode (the original's name for logging)."""
    return convert_to_unicode(text)


def load_vocab(vocab_file):
    """OrderedDict {token: 0-based line number} of a UTF-8 vocab file, as the original reads it: lines split on "\\n"
    only, "\\r" dropped, each stripped (a blank line is the token ""); a repeated token keeps its last line.
    FileNotFoundError / ValueError naming the file if it is missing, empty or not UTF-8."""
    path = os.fspath(vocab_file)
    data = fileio.read_bytes(path, "vocab file").replace(b"\r", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"vocab file {path!r} is not valid UTF-8 (line {line_no}): {err}") from None
    lines = text.split("\n")
    if lines[-1] == "":  # the text after the last "\n" is a line only if it is non-empty
        lines.pop()
    if not lines:
        raise ValueError(f"vocab file {path!r} is empty")
    return collections.OrderedDict((line.strip(), index) for index, line in enumerate(lines))


def convert_by_vocab(vocab, items):
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    return text.split()


_TAB_NEWLINES = frozenset("\t\n\r")


def _is_whitespace(char):
    return char == " " or char in _TAB_NEWLINES or unicodedata.category(char) == "Zs"


def _is_control(char):
    return char not in _TAB_NEWLINES and unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    cp = ord(char)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(char).startswith("P"))


# The original's CJK ideograph blocks (inclusive); each ideograph gets spaces put around it.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_chinese_char(cp):
    return any(low <= cp <= high for low, high in CJK_RANGES)


class _LazyTable(dict):
    """{key: rule(key)} filled in on first use of each key (a str.translate table, a memo), emptied when it holds
    `max_size` keys."""

    def __init__(self, rule, max_size=None):
        super().__init__()
        self._rule = rule
        self._max_size = max_size

    def __missing__(self, key):
        value = self._rule(key)
        if self._max_size is not None and len(self) >= self._max_size:
            self.clear()
        self[key] = value
        return value


def _clean_rule(cp):
    char = chr(cp)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
        return None
    if _is_whitespace(char):
        return " "
    if _is_chinese_char(cp):
        return " " + char + " "
    return cp


# What the clean-up (_clean_rule) makes of a code point, for the offsets: dropped, a word break, a character of a word,
# a word alone (CJK).
_DROP, _BREAK, _KEEP, _ALONE = range(4)


def _clean_kind_rule(cp):
    kept = _clean_rule(cp)
    if kept is None:
        return _DROP
    if kept == cp:
        return _BREAK if chr(cp).isspace() else _KEEP  # str.split() also breaks at e.g. U+2028
    return _BREAK if kept == " " else _ALONE


# Tables for str.translate: text clean-up + CJK spacing; punctuation isolation; combining-mark removal. And the
# clean-up's kind of each code point.
_CLEAN_TABLE = _LazyTable(_clean_rule)
_PUNCT_TABLE = _LazyTable(lambda cp: " " + chr(cp) + " " if _is_punctuation(chr(cp)) else cp)
_ACCENT_TABLE = _LazyTable(lambda cp: None if unicodedata.category(chr(cp)) == "Mn" else cp)
_CLEAN_KIND_TABLE = _LazyTable(_clean_kind_rule)


def _word_positions(text):
    """The positions in `text` of each word's characters, for the words of `BasicTokenizer._words(text)`."""
    kinds = _CLEAN_KIND_TABLE
    positions = []
    for i, char in enumerate(text):
        kind = kinds[ord(char)]
        if kind == _KEEP:
            positions.append(i)
        elif kind != _DROP:
            if positions:
                yield positions
                positions = []
            if kind == _ALONE:
                yield [i]
    if positions:
        yield positions


def _split_spans(word, starts, ends):
    """(token, starts, ends) per token of normalized `word` split as `_split_word` does; starts/ends per character."""
    begin = 0
    for k, char in enumerate(word):
        if _is_punctuation(char):
            if begin < k:
                yield word[begin:k], starts[begin:k], ends[begin:k]
            yield char, starts[k:k + 1], ends[k:k + 1]
            begin = k + 1
    if begin < len(word):
        yield word[begin:], starts[begin:], ends[begin:]


def _piece_spans(token, pieces, starts, ends):
    """(piece, start, end) per word piece of `token`; pieces that do not spell `token` (unk_token) cover all of it."""
    parts = [piece[2:] if k else piece for k, piece in enumerate(pieces)]
    if "".join(parts) != token or not all(piece.startswith("##") for piece in pieces[1:]):
        return [(piece, starts[0], ends[-1]) for piece in pieces]
    bounds = list(itertools.accumulate(map(len, parts), initial=0))
    return [(piece, starts[a], ends[b - 1]) for piece, a, b in zip(pieces, bounds, bounds[1:])]


class BasicTokenizer:
    """Clean-up, CJK spacing, optional lower-casing/accent stripping and punctuation splitting."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        return [token for word in self._words(text) for token in self._split_word(word)]

    def tokenize_with_offsets(self, text):
        """[(token, start, end)]: `tokenize(text)`'s tokens, each from text[start:end] (`text` as `convert_to_unicode`
        gives it)."""
        return [(token, starts[0], ends[-1]) for token, starts, ends in self._token_spans(convert_to_unicode(text))]

    def _token_spans(self, text):
        """(token, starts, ends) per token of `tokenize(text)`: token[k] came from text[starts[k]:ends[k]]."""
        for positions in _word_positions(text):
            word = "".join(text[i] for i in positions)
            normalized = self._normalize(word)
            ends = [i + 1 for i in positions]
            if normalized == word:
                yield from _split_spans(normalized, positions, ends)
                continue
            # Each character normalized alone gives as many characters as its part of the word's normalization
            # (lower-casing and NFD work per character, up to the order of combining marks); one that gives none
            # (a stripped accent) joins the span of the last one that gave some.
            starts, char_ends, last = [], [], 0
            for char, start, end in zip(word, positions, ends):
                n = len(self._normalize(char))
                if n:
                    last = len(starts)
                    starts += [start] * n
                    char_ends += [end] * n
                else:
                    char_ends[last:] = [end] * (len(char_ends) - last)
            yield from _split_spans(normalized, starts, char_ends)

    @staticmethod
    def _words(text):
        return convert_to_unicode(text).translate(_CLEAN_TABLE).split()

    def _split_word(self, word):
        return self._normalize(word).translate(_PUNCT_TABLE).split()

    def _normalize(self, word):
        """`word` lower-cased and accent-stripped if `do_lower_case`, else as it is."""
        if self.do_lower_case:
            word = word.lower()
            if not word.isascii():  # ASCII has no decompositions or combining marks
                word = self._run_strip_accents(word)
        return word

    # The original's per-step methods, kept for code written against its BasicTokenizer (subclasses, callers).

    def _run_strip_accents(self, text):
        return unicodedata.normalize("NFD", text).translate(_ACCENT_TABLE)

    def _run_split_on_punc(self, text):
        positions = range(len(text))
        return [token for token, _, _ in _split_spans(text, positions, positions)]

    def _tokenize_chinese_chars(self, text):
        return "".join(" " + c + " " if _is_chinese_char(ord(c)) else c for c in text)

    def _is_chinese_char(self, cp):
        return _is_chinese_char(cp)

    def _clean_text(self, text):
        return "".join("" if ord(c) == 0 or ord(c) == 0xFFFD or _is_control(c)
                       else " " if _is_whitespace(c) else c for c in text)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece segmentation against a vocabulary."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._longest = None  # (vocab, its size, its longest token's length)

    def tokenize(self, text):
        """E.g. "unaffable" -> ["un", "##aff", "##able"]; `text` is already basic-tokenized."""
        return [piece for word in convert_to_unicode(text).split() for piece in self._tokenize_word(word)]

    def _longest_key(self):
        """Length of the vocab's longest token, recomputed when the vocab object or its size changes (None for a
        vocab that supports `in` but not iteration, as the original's takes)."""
        if self._longest is None or self._longest[0] is not self.vocab or self._longest[1] != len(self.vocab):
            try:
                longest = max((len(k) for k in self.vocab if isinstance(k, str)), default=0)
            except TypeError:
                longest = None
            self._longest = (self.vocab, len(self.vocab), longest)
        return self._longest[2]

    def _tokenize_word(self, word):
        n = len(word)
        if n > self.max_input_chars_per_word:
            return [self.unk_token]
        vocab = self.vocab
        if word in vocab:
            return [word]
        longest = self._longest_key()
        if longest is None:
            longest = n + 2
        pieces = []
        start = 0
        while start < n:
            # Candidates longer than the longest vocab entry can't match, so start below that.
            end = min(n, start + (longest if start == 0 else longest - 2))
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces


class FullTokenizer:
    """BasicTokenizer, then WordpieceTokenizer, memoising up to `cache_size` words (0: no cache). The cache resets when
    its settings or the vocab object or size change; call `clear_cache()` after editing the vocab in place at the same
    size."""

    def __init__(self, vocab_file, do_lower_case=True, cache_size=1 << 16):
        self.vocab_file = os.fspath(vocab_file)
        self.vocab = load_vocab(self.vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self._cache = _LazyTable(self._tokenize_word, cache_size) if cache_size > 0 else None
        self._cache_state = None

    def tokenize(self, text):
        basic, wordpiece = self.basic_tokenizer, self.wordpiece_tokenizer
        if type(basic) is not BasicTokenizer or type(wordpiece) is not WordpieceTokenizer:
            # Replaced/subclassed components: compose them exactly as given.
            return [piece for token in basic.tokenize(text) for piece in wordpiece.tokenize(token)]
        words = basic._words(text)
        cache = self._cache
        if cache is None:
            return [piece for word in words for piece in self._tokenize_word(word)]
        state = (basic.do_lower_case, wordpiece.vocab, len(wordpiece.vocab), wordpiece.unk_token,
                 wordpiece.max_input_chars_per_word)
        old = self._cache_state
        if old is None or old[1] is not state[1] or old[0] != state[0] or old[2:] != state[2:]:
            cache.clear()
            self._cache_state = state
        return list(itertools.chain.from_iterable(map(cache.__getitem__, words)))

    def tokenize_with_offsets(self, text):
        """[(piece, start, end)]: `tokenize(text)`'s pieces, each from text[start:end]. TypeError for a replaced or
        subclassed `basic_tokenizer`."""
        if type(self.basic_tokenizer) is not BasicTokenizer:
            raise TypeError(f"tokenize_with_offsets needs a BasicTokenizer as basic_tokenizer, not "
                            f"{type(self.basic_tokenizer).__name__}: it follows BasicTokenizer's own rules.")
        output = []
        for token, starts, ends in self.basic_tokenizer._token_spans(convert_to_unicode(text)):
            output.extend(_piece_spans(token, self.wordpiece_tokenizer.tokenize(token), starts, ends))
        return output

    def _tokenize_word(self, word):
        """The pieces of one word of `BasicTokenizer._words`, a tuple (cached)."""
        return tuple(piece for token in self.basic_tokenizer._split_word(word)
                     for piece in self.wordpiece_tokenizer._tokenize_word(token))

    def clear_cache(self):
        if self._cache is not None:
            self._cache.clear()

    def convert_tokens_to_ids(self, tokens):
        """KeyError naming the vocab file for an unknown token."""
        try:
            return convert_by_vocab(self.vocab, tokens)
        except KeyError as err:
            token = err.args[0]
            unk = self.wordpiece_tokenizer.unk_token
            hint = (f"; the vocab needs a {unk!r} entry because the text has words it cannot spell"
                    if token == unk else "")
            raise KeyError(f"token {token!r} is not in the vocab file {self.vocab_file!r}{hint}") from None

    def convert_ids_to_tokens(self, ids):
        """KeyError naming the vocab file for an unknown id."""
        try:
            return convert_by_vocab(self.inv_vocab, ids)
        except KeyError as err:
            raise KeyError(f"id {err.args[0]!r} is not in the vocab file {self.vocab_file!r} "
                           f"({len(self.inv_vocab)} ids)") from None
