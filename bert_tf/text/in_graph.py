"""BERT tokenization in TensorFlow ops (TensorFlow Text), id for id equal to the original `FullTokenizer` (its rules:
`bert_tf.text.tokenization`), for `tf.function`, `tf.data` and SavedModels. Unlike `tf_text.BertTokenizer`, lower-casing
is `str.lower()` (final sigma included) with no NFKC.

Three routes, chosen per string, give the same ids: ASCII (FastWordpiece's splitting is the original's), BMP (characters
checked at build time to behave as in Python; a run of 67+ characters goes exact) and exact (code points mapped by
tables from this Python's `unicodedata`). All Unicode knowledge comes from the Python that builds the tokenizer, as the
original's from the Python that runs it.
"""
import functools
import os
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text import tokenization

__all__ = ["InGraphTokenizer"]

# The original's ASCII "punctuation" ranges (its CJK blocks: tokenization.CJK_RANGES).
_ASCII_PUNCT_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))

# Per-code-point property bits (bits 16..23 hold the canonical combining class).
_DELETE = 1 << 0      # removed by the original's _clean_text
_SPACE = 1 << 1       # becomes / acts as a word separator
_SPLIT = 1 << 2       # punctuation or CJK: a word of its own
_MN = 1 << 3          # general category Mn (stripped when lower-casing)
_CASED = 1 << 4       # cased and not case-ignorable, for str.lower()'s final-sigma rule
_IGNORABLE = 1 << 5   # case-ignorable, for str.lower()'s final-sigma rule
_DROP = 1 << 6        # lower-casing + NFD + Mn stripping leaves nothing of it
_MULTI = 1 << 7       # ... leaves two or more code points
_REORDER = 1 << 8     # NFD(c.lower()) holds a non-Mn character of non-zero combining class
_CCC_SHIFT = 16

_CAPITAL_SIGMA = 0x3A3
_FINAL_SIGMA = 0x3C2
_SPACE_CP = 0x20

_ASCII_ROUTE_PATTERN = "[\\x20-\\x7E\\t\\n\\r]*"
# A BMP character takes at most 3 UTF-8 bytes, so on the BMP route every word shorter than this many
# characters is within FastWordpiece's byte limit (= max_input_chars_per_word = 200) and is not over-long.
# Longer runs of non-separators send the string to the exact route. (Larger counts make RE2's DFA too big.)
_BMP_SAFE_RUN = 67
_ASCII_SEPARATORS = " !-/:-@\\[-`{-~"


def _two_level(values):
    """A per-code-point int32 array as (page index, distinct 256-entry pages in ascending order) for two gathers."""
    pages = [page.tobytes() for page in values.astype(np.int32).reshape(-1, 256)]
    distinct = sorted(set(pages), key=lambda page: np.frombuffer(page, np.int32).tolist())
    index = {page: i for i, page in enumerate(distinct)}
    return (np.array([index[page] for page in pages], np.int32),
            np.frombuffer(b"".join(distinct), np.int32).copy())


def _sequence_table(mapping):
    """Sorted keys and flat values/offsets/lengths of a {code point: [code points]} dict."""
    keys = sorted(mapping)
    lengths = np.array([len(mapping[k]) for k in keys], np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    values = np.array([c for k in keys for c in mapping[k]] or [0], np.int32)
    return np.array(keys, np.int32), offsets, lengths, values


def _regex_class(codepoints):
    """An RE2 character class matching exactly the given code points."""
    ranges = []
    for cp in sorted(codepoints):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "[" + "".join("\\x{%X}-\\x{%X}" % (lo, hi) for lo, hi in ranges) + "]"


@functools.cache
def _unicode_tables():
    """Tables from this Python's `unicodedata`, with T(c) = strip_Mn(NFD(c.lower())): `props` (property bits), `lowered`
    (NFD(c.lower()) where it differs), `delta` (T(c) - c where one code point), `multi` (T(c) where several), `nfd`."""
    category = unicodedata.category
    combining = unicodedata.combining
    normalize = unicodedata.normalize
    props = np.zeros(0x110000, np.int32)
    delta = np.zeros(0x110000, np.int32)
    lowered, multi = {}, {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        cat = category(ch)
        if cat in ("Cn", "Co"):  # unassigned or private use: no property, case, decomposition or class (the CJK
            continue             # ranges are set below)
        if cp == 0 or cp == 0xFFFD or (cat in ("Cc", "Cf") and ch not in "\t\n\r"):
            props[cp] = _DELETE
            continue
        bits = combining(ch) << _CCC_SHIFT
        if ch in " \t\n\r" or cat == "Zs" or ch.isspace():
            bits |= _SPACE
        if cat[0] == "P":
            bits |= _SPLIT
        if cat == "Mn":
            bits |= _MN
        # str.lower() makes U+03A3 final when a cased character precedes it (skipping case-ignorable ones)
        # and none follows; probe which kind this character is for that rule.
        if (ch + "\u03a3").lower()[-1] == "\u03c2":
            bits |= _CASED
        elif ("\u0391" + ch + "\u03a3").lower()[-1] == "\u03c2":
            bits |= _IGNORABLE
        props[cp] = bits
        mapped = normalize("NFD", ch.lower())
        if mapped != ch:
            lowered[cp] = mapped
    for cp, mapped in lowered.items():
        kept = [ord(c) for c in mapped if category(c) != "Mn"]
        if not kept:
            props[cp] |= _DROP
        elif len(kept) == 1:
            delta[cp] = kept[0] - cp
        else:
            props[cp] |= _MULTI
            multi[cp] = kept
        if any(combining(c) and category(c) != "Mn" for c in mapped):
            props[cp] |= _REORDER
    unmapped_mn = (props & _MN) != 0
    unmapped_mn[list(lowered)] = False
    props[unmapped_mn] |= _DROP  # left alone by lower/NFD, then stripped
    props[((props >> _CCC_SHIFT) != 0) & ((props & _MN) == 0)] |= _REORDER
    for lo, hi in _ASCII_PUNCT_RANGES:
        props[lo:hi + 1] |= _SPLIT
    for lo, hi in tokenization.CJK_RANGES:
        # A CJK character is a token of its own before lower-casing in the original, so it also bounds the
        # final-sigma context: never cased/ignorable for that purpose.
        props[lo:hi + 1] = (props[lo:hi + 1] | _SPLIT) & ~(_CASED | _IGNORABLE)
    return {
        "props_array": props,
        "lowered": lowered,
        "props": _two_level(props),
        "delta": _two_level(delta),
        "multi": _sequence_table(multi),
        "nfd": _sequence_table({cp: [ord(c) for c in m] for cp, m in lowered.items()}),
    }


@functools.cache
def _bmp_route(do_lower_case):
    """The BMP route's regular expressions, for the BMP characters whose NFD(lower()), final-sigma role and
    FastWordpiece split under TF's ops are Python's (never U+FFFD)."""
    tables = _unicode_tables()
    props = tables["props_array"]
    lowered = tables["lowered"]
    bmp = np.arange(0x10000)
    assigned = np.array([unicodedata.category(chr(c)) != "Cn" if not 0xD800 <= c <= 0xDFFF else False
                         for c in bmp])
    deleted = ((props[:0x10000] & _DELETE) != 0) & assigned
    spaces = ((props[:0x10000] & _SPACE) != 0) & assigned
    deleted[0xFFFD] = False
    candidates = [int(c) for c in bmp[assigned & ~deleted & ~spaces] if c != 0xFFFD]

    with tf.init_scope():
        probe = tf_text.FastWordpieceTokenizer(
            vocab=["[UNK]", "a", "##a"], token_out_type=tf.int32, unknown_token="[UNK]",
            no_pretokenization=False, max_bytes_per_word=100)
        pieces = probe.tokenize(tf.constant(["a%sa" % chr(c) for c in candidates]))
        ids, splits = pieces.flat_values.numpy().tolist(), pieces.row_splits.numpy().tolist()
    fw_role = {}
    for cp, start, end in zip(candidates, splits, splits[1:]):
        # "a?a" is one unknown word (or "a", "##a", "##a" for "aaa") if ? is a word character, and
        # "a", ?, "a" if ? is split off.
        word = (1, 2, 2) if cp == ord("a") else (0,)
        fw_role[cp] = {word: "word", (1, 0, 1): "split"}.get(tuple(ids[start:end]), "other")

    def splits_alike(cps):
        return all(fw_role.get(c) == ("split" if props[c] & _SPLIT else "word") for c in cps)

    if do_lower_case:
        with tf.init_scope():
            chars = tf.constant([chr(c) for c in candidates])
            lower = functools.partial(tf.strings.lower, encoding="utf-8")
            normalized = tf_text.normalize_utf8(lower(chars), "NFD").numpy()
            sigma_probes = [lower(tf.strings.join(parts)).numpy() for parts in (
                [chars, "\u03a3"], ["\u0391", chars, "\u03a3"], ["\u0391\u03a3", chars])]
        ok = set()
        for i, cp in enumerate(candidates):
            ch = chr(cp)
            mapped = lowered.get(cp, ch)
            if normalized[i].decode("utf-8") != mapped or props[cp] & _REORDER:
                continue
            expected = ((ch + "\u03a3").lower(), ("\u0391" + ch + "\u03a3").lower(), ("\u0391\u03a3" + ch).lower())
            if any(probes[i].decode("utf-8") != e for probes, e in zip(sigma_probes, expected)):
                continue
            kept = [ord(c) for c in mapped if unicodedata.category(c) != "Mn"]
            if splits_alike(kept):
                ok.add(cp)
    else:
        ok = {cp for cp in candidates if splits_alike([cp])}

    deleted_cps = [int(c) for c in bmp[deleted]]
    space_cps = [int(c) for c in bmp[spaces] if c != _SPACE_CP]
    mn_cps = [int(c) for c in np.flatnonzero((props & _MN) != 0)]
    return {
        "route": _regex_class(ok | set(deleted_cps) | set(space_cps) | {_SPACE_CP}) + "*",
        "delete": _regex_class(deleted_cps),
        "space": _regex_class(space_cps),
        "mn": _regex_class(mn_cps),
        "long_run": "(?s).*[^%s]{%d}.*" % (_ASCII_SEPARATORS, _BMP_SAFE_RUN),
    }


def checked(texts, max_texts_per_request=None, max_request_bytes=None):
    """`texts` checked against the request limits (the most texts and UTF-8 bytes a call may hold; None: no limit):
    InvalidArgumentError naming the option."""
    checks = []
    if max_texts_per_request is not None:
        count = tf.size(texts)
        checks.append(tf.debugging.Assert(count <= max_texts_per_request, [tf.strings.format(
            f"the request has {{}} texts; this export takes at most {max_texts_per_request} (export option "
            f"max_texts_per_request)", count)]))
    if max_request_bytes is not None:
        size = tf.reduce_sum(tf.cast(tf.strings.length(texts), tf.int64))
        checks.append(tf.debugging.Assert(size <= max_request_bytes, [tf.strings.format(
            f"the texts of the request hold {{}} bytes; this export takes at most {max_request_bytes} bytes "
            f"of text per request (export option max_request_bytes)", size)]))
    if not checks:
        return texts
    with tf.control_dependencies(checks):
        return tf.identity(texts)


class InGraphTokenizer(tf.Module):
    """`FullTokenizer` as a `tf.Module` (`unk_token`, `[CLS]`, `[SEP]` must be in the vocabulary). `tokenize` has an
    input signature and refuses a call over the request limits (`checked`); `tokenize_exact` and `basic_tokenize` are
    exported only if called before saving."""

    def __init__(self, vocab_file, do_lower_case=True, unk_token="[UNK]", max_input_chars_per_word=200,
                 name=None, max_texts_per_request=None, max_request_bytes=None):
        super().__init__(name=name)
        self.vocab_file = os.fspath(vocab_file)
        for option, value in (("max_texts_per_request", max_texts_per_request),
                              ("max_request_bytes", max_request_bytes)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{option} must be a positive integer, got {value!r}.")
        self.max_texts_per_request, self.max_request_bytes = max_texts_per_request, max_request_bytes
        vocab = tokenization.load_vocab(self.vocab_file)  # the Python tokenizer's reading, hence its ids
        missing = [t for t in (unk_token, "[CLS]", "[SEP]") if t not in vocab]
        if missing:
            raise ValueError("BERT vocabulary %s lacks the special token(s) %s"
                             % (self.vocab_file, ", ".join(missing)))
        if max_input_chars_per_word < 1:
            raise ValueError("max_input_chars_per_word must be positive, got %d" % max_input_chars_per_word)
        self.do_lower_case = bool(do_lower_case)
        self.unk_token = unk_token
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.vocab_size = max(vocab.values()) + 1  # the vocab file's lines
        self.unk_id, self.cls_id, self.sep_id = (vocab[token] for token in (unk_token, "[CLS]", "[SEP]"))

        # FastWordpieceTokenizer numbers tokens by position. Lines whose token the original can never emit
        # (shadowed duplicates, empty lines, a bare "##") get a placeholder no word can contain (control
        # characters are always deleted from the input), so every id stays the line number.
        tokens = ["\x01%d" % i for i in range(self.vocab_size)]
        for token, index in vocab.items():
            if token and token != "##":
                tokens[index] = token
        # The original's WordPiece marks every piece after a word's first with "##"; no word starts with "#" (a
        # punctuation character, hence a word of its own), and an unknown word is one `unk_token`.
        self._starts_word = tf.constant([not token.startswith("##") for token in tokens])
        # Exact route: whole words in (at most 4 bytes per character), ids out.
        self._word_wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##", max_bytes_per_word=4 * self.max_input_chars_per_word,
            token_out_type=tf.int32, unknown_token=unk_token, no_pretokenization=True)
        # ASCII and BMP routes: FastWordpiece's own splitting; byte limit = the original's character limit.
        self._text_wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##", max_bytes_per_word=self.max_input_chars_per_word,
            token_out_type=tf.int32, unknown_token=unk_token, no_pretokenization=False)

        tables = _unicode_tables()
        self._props_pages, self._props_blocks = (tf.constant(t) for t in tables["props"])
        if self.do_lower_case:
            self._delta_pages, self._delta_blocks = (tf.constant(t) for t in tables["delta"])
            self._multi_table = tuple(tf.constant(t) for t in tables["multi"])
            self._nfd_table = tuple(tf.constant(t) for t in tables["nfd"])
        # The BMP route needs words below _BMP_SAFE_RUN characters to fit the byte limit.
        self._use_bmp_route = 3 * (_BMP_SAFE_RUN - 1) <= self.max_input_chars_per_word
        self._bmp_patterns = _bmp_route(self.do_lower_case) if self._use_bmp_route else None

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        """WordPiece ids of each string: int32 RaggedTensor [batch, (num_wordpieces)]."""
        return self._tokenize_routed(checked(strings, self.max_texts_per_request, self.max_request_bytes))[0]

    def tokenize_words(self, strings):
        """`tokenize`'s ids by BasicTokenizer word: int32 RaggedTensor [batch, (num_words), (num_wordpieces)]."""
        ids = self.tokenize(strings)
        starts = tf.gather(self._starts_word, ids.flat_values)
        word_of_piece = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        words = tf.RaggedTensor.from_value_rowids(ids.flat_values, word_of_piece,
                                                  nrows=tf.reduce_sum(tf.cast(starts, tf.int64)), validate=False)
        return tf.RaggedTensor.from_value_rowids(words, tf.boolean_mask(ids.value_rowids(), starts),
                                                 nrows=ids.nrows(), validate=False)

    def tokenize_words_with_offsets(self, strings):
        """`tokenize_words` and each word's start and end in code points, int64 [batch, (num_words)], as
        `BasicTokenizer.tokenize_with_offsets` gives them."""
        return words_with_offsets(self, self._wordpiece, strings)

    def _tokenize_routed(self, strings):
        """(`tokenize`'s ids, each string's route int32 [batch]: 0 ASCII, 1 BMP, 2 exact)."""
        on_ascii = tf.strings.regex_full_match(strings, _ASCII_ROUTE_PATTERN)
        ascii_rows = tf.where(on_ascii)[:, 0]
        ascii_strings = tf.gather(strings, ascii_rows)
        if self.do_lower_case:
            ascii_strings = tf.strings.lower(ascii_strings)  # ASCII-only lower-casing; these strings are ASCII
        routed_ids = [self._text_wordpiece.tokenize(ascii_strings)]
        routed_rows = [ascii_rows]
        on_exact = tf.logical_not(on_ascii)
        exact_rows = []
        if self._use_bmp_route:
            on_bmp = tf.strings.regex_full_match(strings, self._bmp_patterns["route"]) & on_exact
            on_exact = on_exact & tf.logical_not(on_bmp)
            bmp_rows = tf.where(on_bmp)[:, 0]
            bmp_ids, too_long = self._tokenize_bmp(tf.gather(strings, bmp_rows))
            fits = tf.logical_not(too_long)
            routed_ids.append(tf.ragged.boolean_mask(bmp_ids, fits))
            routed_rows.append(tf.boolean_mask(bmp_rows, fits))
            exact_rows.append(tf.boolean_mask(bmp_rows, too_long))
        exact_rows = tf.concat([tf.where(on_exact)[:, 0]] + exact_rows, axis=0)
        routed_ids.append(self._tokenize_unicode(tf.gather(strings, exact_rows)))
        routed_rows.append(exact_rows)
        order = tf.math.invert_permutation(tf.concat(routed_rows, axis=0))
        route_ids = tf.concat([tf.fill(tf.shape(rows), i) for i, rows in enumerate(routed_rows[:-1])]
                              + [tf.fill(tf.shape(exact_rows), 2)], axis=0)
        return tf.gather(tf.concat(routed_ids, axis=0), order), tf.gather(route_ids, order)

    @tf.function(reduce_retracing=True, autograph=False)
    def tokenize_exact(self, strings):
        """`tokenize` with every string on the code-point route (for reference and testing)."""
        return self._tokenize_unicode(strings)

    @tf.function(reduce_retracing=True, autograph=False)
    def basic_tokenize(self, strings):
        """The original BasicTokenizer's words: tf.string RaggedTensor [batch, (num_words)] (code-point route)."""
        words, word_rows, num_rows = self.unicode_words(strings)
        return tf.RaggedTensor.from_value_rowids(
            tf.strings.unicode_encode(words, "UTF-8"), word_rows, nrows=num_rows, validate=False)

    # BMP route.

    def _tokenize_bmp(self, strings):
        """Ids of BMP-route strings, and whether each may hold an over-long word (then redone exactly)."""
        patterns = self._bmp_patterns
        text = tf.strings.regex_replace(strings, patterns["delete"], "")
        text = tf.strings.regex_replace(text, patterns["space"], " ")
        if self.do_lower_case:
            text = tf.strings.lower(text, encoding="utf-8")
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, patterns["mn"], "")
        too_long = tf.strings.regex_full_match(text, patterns["long_run"])
        return self._text_wordpiece.tokenize(text), too_long

    # Exact (code-point) route.

    @staticmethod
    def _lookup(pages, blocks, cps):
        block = tf.gather(pages, tf.bitwise.right_shift(cps, 8))
        return tf.gather(blocks, block * 256 + tf.bitwise.bitwise_and(cps, 255))

    def _props(self, cps):
        return self._lookup(self._props_pages, self._props_blocks, cps)

    def _tokenize_unicode(self, strings):
        words, word_rows, num_rows = self.unicode_words(strings)
        return tf.RaggedTensor.from_value_rowids(self._wordpiece(words), word_rows, nrows=num_rows,
                                                 validate=False).merge_dims(1, 2)

    def _wordpiece(self, words):
        """int32 code points [W, (chars)] -> ids [W, (pieces)]."""
        word_strings = tf.strings.unicode_encode(words, "UTF-8")
        too_long = words.row_lengths() > self.max_input_chars_per_word
        # An over-long word becomes the unknown token, which WordPiece maps to itself.
        return self._word_wordpiece.tokenize(tf.where(too_long, self.unk_token, word_strings))

    def unicode_words(self, strings, with_offsets=False):
        """Basic tokenization on code points -> (words int32 [num_words, (chars)], each word's row, rows),
        `with_offsets` plus each word's start and end (int64 [num_words])."""
        num_rows = tf.shape(strings, out_type=tf.int64)[0]
        chars = tf.strings.unicode_decode(strings, "UTF-8", errors="ignore")
        cps = chars.flat_values
        rows = chars.value_rowids()
        props = self._props(cps)
        # Each character's place in its string (carried through the steps below when asked for).
        spans = (tf.range(tf.size(cps, out_type=tf.int64)) - tf.gather(chars.row_starts(), rows),) if with_offsets \
            else ()

        # _clean_text: delete controls, map whitespace to spaces.
        cps, rows, props, *spans = _drop_where(_bit(props, _DELETE), cps, rows, props, *spans)
        cps = tf.where(_bit(props, _SPACE), _SPACE_CP, cps)
        if spans:
            spans.append(self._ends(cps, rows, props, spans[0]))

        if self.do_lower_case:
            cps = tf.cond(tf.reduce_any(tf.equal(cps, _CAPITAL_SIGMA)),
                          lambda: self._final_sigma(cps, rows, props), lambda: cps)
            cps, rows, props, *spans = tf.cond(tf.reduce_any(_bit(props, _REORDER)),
                                               lambda: self._lower_nfd_strip_reordering(cps, rows, *spans),
                                               lambda: self._lower_nfd_strip(cps, rows, props, *spans))

        # Split: spaces separate words, punctuation/CJK characters are words of their own.
        is_space = tf.equal(cps, _SPACE_CP)
        is_split = _bit(props, _SPLIT)
        breaks_after = is_space | is_split | tf.concat([tf.not_equal(rows[1:], rows[:-1]), [True]], axis=0)
        after_break = tf.concat([[True], breaks_after], axis=0)[:tf.size(cps)]
        solid = tf.logical_not(is_space)
        starts_word = solid & (is_split | after_break)
        cps, rows, starts_word, *spans = (tf.boolean_mask(t, solid) for t in (cps, rows, starts_word, *spans))
        word_ids = tf.cumsum(tf.cast(starts_word, tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int64))
        words = tf.RaggedTensor.from_value_rowids(cps, word_ids, nrows=num_words, validate=False)
        words = (words, tf.boolean_mask(rows, starts_word), num_rows)
        if spans:  # a word spans its characters' places (lower-casing may reorder combining marks within it)
            words += (tf.math.unsorted_segment_min(spans[0], word_ids, num_words),
                      tf.math.unsorted_segment_max(spans[1], word_ids, num_words))
        return words

    def _ends(self, cps, rows, props, places):
        """Each character's end in its string: one past it, lower-casing also past the characters of its word that
        lower-casing drops after it (a stripped accent joins a non-CJK character before it)."""
        after = places + 1
        if not self.do_lower_case:
            return after
        index = tf.range(tf.size(cps, out_type=tf.int64))
        first_in_row = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], axis=0)[:tf.size(cps)]
        kept = tf.where(~_bit(props, _DROP) | tf.equal(cps, _SPACE_CP) | first_in_row)[:, 0]
        following = tf.gather(tf.concat([kept, [tf.size(cps, out_type=tf.int64)]], axis=0),
                              tf.searchsorted(kept, index, side="right"))
        cjk = tf.reduce_any([(cps >= lo) & (cps <= hi) for lo, hi in tokenization.CJK_RANGES], axis=0)
        return tf.where(cjk, after, tf.gather(after, following - 1))

    def _final_sigma(self, cps, rows, props):
        """Replaces each capital sigma that str.lower() would make final by U+03C2."""
        not_ignorable = tf.logical_not(_bit(props, _IGNORABLE))
        cased = _bit(props, _CASED)
        anchors = tf.where(not_ignorable)[:, 0]  # positions of the non-ignorable characters
        anchor_index = tf.cumsum(tf.cast(not_ignorable, tf.int64)) - 1
        sigmas = tf.where(tf.equal(cps, _CAPITAL_SIGMA))[:, 0]
        sigma_index = tf.gather(anchor_index, sigmas)  # a sigma is itself non-ignorable
        num_anchors = tf.size(anchors, out_type=tf.int64)
        sigma_rows = tf.gather(rows, sigmas)

        prev_index = sigma_index - 1
        prev_pos = tf.gather(anchors, tf.maximum(prev_index, 0))
        prev_cased = ((prev_index >= 0) & tf.equal(tf.gather(rows, prev_pos), sigma_rows)
                      & tf.gather(cased, prev_pos))
        next_index = sigma_index + 1
        next_pos = tf.gather(anchors, tf.minimum(next_index, num_anchors - 1))
        next_cased = ((next_index < num_anchors) & tf.equal(tf.gather(rows, next_pos), sigma_rows)
                      & tf.gather(cased, next_pos))
        final = prev_cased & tf.logical_not(next_cased)
        updates = tf.where(final, _FINAL_SIGMA, _CAPITAL_SIGMA)
        return tf.tensor_scatter_nd_update(cps, sigmas[:, None], updates)

    def _lower_nfd_strip(self, cps, rows, props, *carried):
        """strip_Mn(NFD(c.lower())) per character, exact when no reordering can matter; `carried`: per-character tensors
        kept aligned."""
        cps, rows, props, *carried = _drop_where(_bit(props, _DROP), cps, rows, props, *carried)
        cps = cps + self._lookup(self._delta_pages, self._delta_blocks, cps)  # multi chars: delta 0
        multi = _bit(props, _MULTI)
        cps, rows, *carried = tf.cond(tf.reduce_any(multi),
                                      lambda: _expand(cps, multi, self._multi_table, rows, *carried),
                                      lambda: (cps, rows, *carried))
        return (cps, rows, self._props(cps), *carried)

    def _lower_nfd_strip_reordering(self, cps, rows, *carried):
        """strip_Mn(NFD(lower)) with canonical reordering, for text holding non-Mn combining marks."""
        keys = self._nfd_table[0]
        index = tf.minimum(tf.searchsorted(keys, cps), tf.size(keys) - 1)
        hit = tf.equal(tf.gather(keys, index), cps)
        cps, rows, *carried = _expand(cps, hit, self._nfd_table, rows, *carried)
        props = self._props(cps)

        ccc = tf.bitwise.right_shift(props, _CCC_SHIFT)
        same_row = tf.equal(rows[1:], rows[:-1])
        run_start = tf.concat([[True], tf.logical_not(same_row)], axis=0)[:tf.size(cps)] | tf.equal(ccc, 0)
        # Canonical ordering: stable sort of each run of non-starters by combining class.
        key = tf.cumsum(tf.cast(run_start, tf.int64)) * 256 + tf.cast(ccc, tf.int64)
        order = tf.argsort(key, stable=True)
        cps, props, *carried = (tf.gather(t, order) for t in (cps, props, *carried))
        return _drop_where(_bit(props, _MN), cps, rows, props, *carried)


def words_with_offsets(tokenizer, wordpiece, strings):
    """`tokenize_words_with_offsets` of `tokenizer` (its `unicode_words` and request limits)
    with `wordpiece` (words -> ids)."""
    words, word_rows, num_rows, starts, ends = tokenizer.unicode_words(
        checked(strings, tokenizer.max_texts_per_request, tokenizer.max_request_bytes), with_offsets=True)
    return tuple(tf.RaggedTensor.from_value_rowids(t, word_rows, nrows=num_rows, validate=False)
                 for t in (wordpiece(words), starts, ends))


def _bit(props, mask):
    return tf.not_equal(tf.bitwise.bitwise_and(props, mask), 0)


def _drop_where(drop, *tensors):
    """Removes the positions where `drop` holds from each equally long 1-D tensor (skipped if none)."""
    keep = tf.logical_not(drop)
    return tf.cond(tf.reduce_any(drop), lambda: tuple(tf.boolean_mask(t, keep) for t in tensors),
                   lambda: tuple(tf.identity(t) for t in tensors))


def _expand(cps, hit, table, *carried):
    """Replaces each code point where `hit` holds by its sequence in `table`, repeating each of `carried` alike."""
    keys, offsets, lengths, values = table
    index = tf.minimum(tf.searchsorted(keys, cps), tf.size(keys) - 1)
    counts = tf.where(hit, tf.gather(lengths, index), 1)
    source = tf.repeat(tf.range(tf.size(cps)), counts)
    within = tf.range(tf.reduce_sum(counts)) - tf.gather(tf.cumsum(counts, exclusive=True), source)
    source_hit = tf.gather(hit, source)
    at = tf.where(source_hit, tf.gather(offsets, tf.gather(index, source)) + within, 0)
    expanded = tf.where(source_hit, tf.gather(values, at), tf.gather(cps, source))
    return (expanded, *(tf.gather(t, source) for t in carried))
