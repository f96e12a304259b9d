"""Tests for bert_tf.text: in-graph tokenization equals the Python FullTokenizer id for id, packing equals the
original run_classifier rules, and both work in tf.function, tf.data and a reloaded SavedModel."""
import itertools
import os
import random
import unicodedata

import numpy as np
import original_packing
import pytest
import tensorflow as tf

from bert_tf.text import in_graph, packing, preprocessing, tokenization

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

TRICKY = [
    "Hello, World! It's 3:45pm -- isn't it?",
    "\ufb01ne \uff28ello \u2460\u00b2",            # ligature, fullwidth, circled digit, superscript (no NFKC!)
    "wait\u2026 what\u2026",                       # ellipsis stays one punctuation character
    "Ünïcödé naïve café crème brûlée Ångström façade",
    "UNwant\u00e9d,running",
    "ΟΔΟΣ οδός ΑΣ.Β ΑΣ'Β Σ ΑΣ ΑΣ中 ΑΣ\u0301Β ΑΣ\u00adΒ ς Σσς",  # final sigma contexts
    "İstanbul İİ i\u0307 DİYARBAKIR ǅemal ǈ ǋ ß ẞ ŉ ﬀ",      # special lower-casing / multi-char
    "a\u200db c\u00add e\ufefff g\u200bh \u2060i",  # ZWJ, soft hyphen, BOM, ZWSP, word joiner: deleted
    "nul\x00byte repl\ufffdchar bell\x07 del\x7f c1\x85 x\x1cy",
    "tab\tnew\nline\rcarriage\x0bvt\x0cff",
    "nb\u00a0sp en\u2002sp em\u2003sp thin\u2009sp ideo\u3000sp narrow\u202fsp ogham\u1680x",
    "line\u2028sep para\u2029sep mongol\u180evs",
    "力加勝北区 日本語のテキスト 한국어 텍스트 中文，标点。",
    "\U00020000\U0002a6df\U0002a700 \uf900\ufa6a \U0002f800 ⺀ ⼀",  # CJK extension/compatibility ideographs
    "emoji 😀👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✌︎",
    "ภาษาไทย العربية مرحبا עברית हिन्दी देवनागरी ქართული Ελληνικά Русский",
    "math ≠ ≤ ≥ ∑ ∫ √ ∞ ± × ÷ ° € £ ¥ $ % ^ & * ~ ` | \\ < > { } [ ]",
    "quotes “double” ‘single’ «guillemets» „low“ ‹x› — – ‐ ‑ ‒ ― ・ 〜",
    "combining e\u0301 a\u0308 o\u0302\u0323 \u0301alone x\u0316\u0301 \U0001d165\U0001d16e x\U0001d16d\U0001d165",
    "e\u0301" * 3 + " " + "\u1e69\u0323" + " \u0344\u0345 \u0f73 \u1d160",
    "Vithkuqi \U00010570\U00010597 Glagolitic \u2c2f \ua7c0 ΑΣ\U00010570 Α\u0898Σ",
    "private \ue000\U000f0000 unassigned \u0378\U00050000 tag \U000e0041 noncharacter \ufdd0\uffff",
    "",
    " ",
    "   \t\n\r\u00a0\u3000 ",
    "a",
    "x" * 199 + " " + "y" * 200 + " " + "z" * 201,
    "é" * 199 + " " + "é" * 200 + " " + "é" * 201 + " " + "e\u0301" * 150,
    "ж" * 200 + " " + "ж" * 201 + " " + "中" * 250 + " " + "😀" * 201,
    "url https://en.wikipedia.org/wiki/Bidirectional_Encoder_Representations_from_Transformers?x=1&y=2#z",
    "##hash ##tag [CLS] [SEP] [UNK] [MASK] <s> </s>",
]


def _write_vocab(path, tokens):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return str(path)


def _char_vocab(path, texts, python):
    """A vocabulary of every character the Python tokenizer's words hold, alone and as "##" suffix: then
    WordPiece spells each word character by character, so equal ids mean equal words."""
    chars = sorted({c for t in texts for w in python.tokenize(t) for c in w})
    return _write_vocab(path, SPECIALS + chars + ["##" + c for c in chars])


def _ids(tokenizer, strings, batch_size=4096):
    out = []
    for i in range(0, len(strings), batch_size):
        out += tokenizer.tokenize(tf.constant(strings[i:i + batch_size])).to_list()
    return out


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def do_lower_case(request):
    return request.param


_TOKENIZERS = {}


def _tokenizer(vocab_file, do_lower_case):
    """One in-graph tokenizer per (vocab, casing) for the whole module: building and tracing take seconds."""
    key = (vocab_file, do_lower_case)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = in_graph.InGraphTokenizer(vocab_file, do_lower_case=do_lower_case)
    return _TOKENIZERS[key]


@pytest.fixture(scope="module")
def pair(uncased_vocab_file, do_lower_case):
    """(in-graph tokenizer, Python FullTokenizer) on the bert-base-uncased vocab."""
    return (_tokenizer(uncased_vocab_file, do_lower_case),
            tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=do_lower_case))


@pytest.fixture(scope="module")
def preprocessor(uncased_vocab_file):
    return preprocessing.InGraphPreprocessor(tokenizer=_tokenizer(uncased_vocab_file, True), max_seq_length=24)


@pytest.fixture(scope="module")
def uncased_python(uncased_vocab_file):
    return tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True)


def _python_ids(python, strings):
    return [python.convert_tokens_to_ids(python.tokenize(s)) for s in strings]


# ------------------------------------------------------------------------------------------------
# tf.function, tf.data, SavedModel (first: the export then holds only the functions it needs)
# ------------------------------------------------------------------------------------------------

def test_tf_data_and_tf_function(preprocessor):
    pre = preprocessor
    text_a = ["Hello there, General Kenobi!", "naïve café", "ΟΔΟΣ", "", "中文字符 😀", "x" * 300, "a b c"]
    text_b = ["You are a bold one.", "", "οδός", "b", "more", "y", "d e"]
    eager = pre(tf.constant(text_a), tf.constant(text_b))
    ds = tf.data.Dataset.from_tensor_slices((text_a, text_b)).batch(3).map(pre)
    batches = list(ds)
    for key in ("input_ids", "input_mask", "segment_ids"):
        assert np.concatenate([b[key].numpy() for b in batches]).tolist() == eager[key].numpy().tolist()
    singles = list(tf.data.Dataset.from_tensor_slices(text_a).batch(4).map(pre))
    assert np.concatenate([b["input_ids"].numpy() for b in singles]).tolist() == \
        pre(tf.constant(text_a))["input_ids"].numpy().tolist()

    @tf.function
    def inside(strings):
        return pre.tokenizer.tokenize(strings).to_tensor(-1)

    assert inside(tf.constant(text_a)).numpy().tolist() == \
        pre.tokenizer.tokenize(tf.constant(text_a)).to_tensor(-1).numpy().tolist()


def test_saved_model_round_trip(tmp_path, uncased_vocab_file, preprocessor):
    pre = preprocessor
    assert pre.vocab_file == uncased_vocab_file == pre.tokenizer.vocab_file
    strings = tf.constant(TRICKY)
    seconds = tf.constant(list(reversed(TRICKY)))
    want_ids = pre.tokenizer.tokenize(strings).to_list()
    want_pair = pre.encode_pair(strings, seconds)
    want_single = pre.encode(strings)
    export_dir = str(tmp_path / "preprocessor")
    tf.saved_model.save(pre, export_dir)
    loaded = tf.saved_model.load(export_dir)
    assert loaded.tokenizer.tokenize(strings).to_list() == want_ids
    got_pair, got_single = loaded.encode_pair(strings, seconds), loaded.encode(strings)
    for key in ("input_ids", "input_mask", "segment_ids"):
        assert got_pair[key].numpy().tolist() == want_pair[key].numpy().tolist()
        assert got_single[key].numpy().tolist() == want_single[key].numpy().tolist()


# ------------------------------------------------------------------------------------------------
# Tokenization equals the Python FullTokenizer
# ------------------------------------------------------------------------------------------------

def test_tricky_strings(pair):
    graph, python = pair
    expected = _python_ids(python, TRICKY)
    assert _ids(graph, TRICKY) == expected
    assert graph.tokenize_exact(tf.constant(TRICKY)).to_list() == expected
    words = graph.basic_tokenize(tf.constant(TRICKY)).to_list()
    assert [[w.decode("utf-8") for w in row] for row in words] == [
        python.basic_tokenizer.tokenize(s) for s in TRICKY]


def test_routes(pair):
    """Each route is really taken (else the equality tests above would not cover it): printable ASCII, checked
    BMP text, and the exact code-point route for the rest (including BMP strings with a long run)."""
    graph, _ = pair
    ascii_, bmp, exact = 0, 1, 2
    cases = [("plain ASCII, with tab\tand newline\n", ascii_), ("", ascii_), ("x" * 300, ascii_),
             ("naïve café — “quotes” 中文 ΟΔΟΣ Ünïcödé", bmp), ("nb\u00a0sp soft\u00adhyphen", bmp),
             ("bell\x07 in ASCII", bmp), ("é" * 66, bmp), ("é" * 67, exact), ("emoji 😀", exact),
             ("repl\ufffd", exact), ("\U00020000", exact),
             (b"bad \xff", exact), (b"caf\xc3\xa9 \xed\xa0\x80", exact), (b"\xc3\xa9\xc0\x80", exact),
             (b"\xe2\x80\x94\xe2\x80", exact), (b"\xce\xa3\xf4\x90\x80\x80", exact)]
    if graph.do_lower_case:
        cases += [("Glagolitic \u2c2f", exact), ("Tagalog \u1715", exact), ("Arabic \u0898", exact)]
    strings = [c if isinstance(c, bytes) else c.encode("utf-8") for c, _ in cases]
    assert graph._tokenize_routed(tf.constant(strings))[1].numpy().tolist() == [route for _, route in cases]


def test_no_nfkc_and_known_cases(uncased_vocab_file, uncased_python):
    graph, python = _tokenizer(uncased_vocab_file, True), uncased_python
    words = graph.basic_tokenize(tf.constant(["\ufb01ne \uff28ello \u2460\u00b2 \u2026", "ΟΔΟΣ ΑΣ.Β", "İ"])).to_list()
    assert [[w.decode() for w in row] for row in words] == [
        ["\ufb01ne", "\uff48ello", "\u2460\u00b2", "\u2026"], ["οδος", "ασ", ".", "β"], ["i"]]
    # tf_text.BertTokenizer-style NFKC would give "fine hello 12 ..."; the original does not.
    assert graph.tokenize(tf.constant(["\ufb01ne \u2026"])).to_list() == _python_ids(python, ["\ufb01ne \u2026"])


def test_extract_input_lines(pair, data_dir):
    graph, python = pair
    with open(os.path.join(data_dir, "extract_input.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    segments = lines + [part.strip() for line in lines for part in line.split("|||")]
    assert _ids(graph, segments) == _python_ids(python, segments)


def test_utf8_bytes_and_invalid_utf8(pair):
    graph, python = pair
    rng = random.Random(7)
    valid = [b"Word", b" ", b"caf\xc3\xa9", b"\xce\xa3", b"\xe4\xb8\xad", b"\xf0\x9f\x98\x80", b".", b"\xc3\x89",
             b"\xef\xbf\xbd", b"\x00", b"\xcc\x81"]
    invalid = [b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80",
               b"\xe0\x80\x80", b"\xf0\x9f\x98", b"\xf8\x88\x80\x80\x80"]
    pieces = valid + invalid
    samples = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    assert _ids(graph, samples) == _python_ids(python, samples)


def test_every_code_point_at_word_level(tmp_path, do_lower_case):
    """Every BMP character (every third one when cased, the simpler path) and a sample of the other planes,
    each in several contexts (final sigma on both sides, combining marks, inside a word, after punctuation),
    plus every printable ASCII character and pairs of reorderable combining characters, with a per-character
    vocabulary so that any difference in the words shows in the ids."""
    step = 1 if do_lower_case else 3
    rng = random.Random(3)
    cps = [cp for cp in range(0, 0x10000, step) if not 0xD800 <= cp <= 0xDFFF]
    cps += list(range(0x10000, 0x110000, 257)) + rng.sample(range(0x10000, 0x30000), 600) + [
        0x10570, 0x10597, 0x105C9, 0x1D15E, 0x1D165, 0x1D16E, 0x1F600, 0x1F3FD, 0x20000, 0x2A6DF, 0x2B740,
        0x2CEAF, 0x2F800, 0x2FA1D, 0x30000, 0xE0001, 0xE0041, 0xE0100, 0xF0000, 0x10FFFD, 0x1E900, 0x1E922]
    strings = ["a%sb \u0391\u03a3%s.\u0391%s\u03a3 x\u0301%s\u0316" % ((chr(cp),) * 4) for cp in cps]
    strings += ["A%sb %s x%s%sY\tz\r\nw" % ((chr(cp),) * 4) for cp in range(0x20, 0x7F)]  # ASCII route
    # NFD's canonical reordering shows after Mn stripping for non-Mn combining characters (Mc of non-zero
    # class): every ordered pair of them, with Mn marks around.
    marks = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
             and unicodedata.combining(chr(cp)) and unicodedata.category(chr(cp)) != "Mn"]
    assert len(marks) >= 10
    strings += ["x%s%s y%s\u0301%s\u0316 %s\u0334%s" % (a, b, a, b, a, b) for a in marks for b in marks]
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    vocab_file = _char_vocab(tmp_path / "chars.txt", strings, basic)
    graph = in_graph.InGraphTokenizer(vocab_file, do_lower_case=do_lower_case)
    python = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    assert _ids(graph, strings, batch_size=8192) == _python_ids(python, strings)


def test_word_length_limit(pair):
    """Words of more than 200 characters (after normalization) are [UNK]; bytes do not count."""
    graph, python = pair
    vocab = python.vocab
    units = [u for u in ["a", "é", "e\u0301", "É", "ж", "ω", "\u3042", "\u0915", "\u4e00", "😀", "ab"]
             if u.lower() in vocab or unicodedata.normalize("NFD", u.lower())[0] in vocab]
    strings = []
    for unit in units:
        for n in (50, 66, 67, 68, 99, 100, 101, 133, 134, 199, 200, 201, 250):
            strings.append(unit * n)
            strings.append("x " + unit * n + ", y")
    assert _ids(graph, strings) == _python_ids(python, strings)
    ids = graph.tokenize(tf.constant(["a" * 200, "a" * 201, "é" * 200, "é" * 201])).to_list()
    unk = vocab["[UNK]"]
    assert ids[0] != [unk] and ids[1] == [unk] and ids[3] == [unk]
    if graph.do_lower_case:  # "é" -> "e"
        assert ids[2] != [unk]


def test_vocab_with_duplicates_blank_lines_and_crlf(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "want", "##want", "", "##ed", "want", "un", "##", "runn",
              "##ing", ",", " un ", "##e", "é"]
    path = tmp_path / "vocab.txt"
    path.write_bytes("\r\n".join(tokens).encode("utf-8"))  # CRLF, no final newline
    strings = ["UNwant\u00e9d,running", "want wanted", "unrunning ##", "é ée"]
    graph = in_graph.InGraphTokenizer(str(path), do_lower_case=True)
    python = tokenization.FullTokenizer(str(path), do_lower_case=True)
    assert graph.vocab_size == len(tokens)
    assert _ids(graph, strings) == _python_ids(python, strings)


# ------------------------------------------------------------------------------------------------
# Packing and truncation
# ------------------------------------------------------------------------------------------------

def test_truncation_closed_form_matches_loop_exhaustively():
    lens_a, lens_b, maxes, expected = [], [], [], []
    for max_length, len_a, len_b in itertools.product(range(14), range(17), range(17)):
        a, b = list(range(len_a)), list(range(100, 100 + len_b))
        ref_a, ref_b = list(a), list(b)
        original_packing.truncate_seq_pair(ref_a, ref_b, max_length)
        packing.truncate_seq_pair(a, b, max_length)
        assert (a, b) == (ref_a, ref_b), (max_length, len_a, len_b)
        lens_a.append(len_a)
        lens_b.append(len_b)
        maxes.append(max_length)
        expected.append((len(ref_a), len(ref_b)))
    got_a, got_b = preprocessing.truncated_pair_lengths(tf.constant(lens_a), tf.constant(lens_b), tf.constant(maxes))
    assert list(zip(got_a.numpy().tolist(), got_b.numpy().tolist())) == expected
    with pytest.raises(ValueError):
        packing.truncate_seq_pair([1], [2], -1)


def test_pack_inputs_matches_original_rules():
    rng = random.Random(11)
    vocab = {"[CLS]": 101, "[SEP]": 102}
    vocab.update({"t%d" % i: 1000 + i for i in range(40)})
    for max_seq_length in (2, 3, 4, 5, 8, 13):
        rows_a, rows_b = [], []
        for _ in range(40):
            rows_a.append(["t%d" % rng.randrange(40) for _ in range(rng.choice([0, 1, 2, 5, 9, 15]))])
            rows_b.append(["t%d" % rng.randrange(40) for _ in range(rng.choice([0, 0, 1, 3, 7, 12]))])
        to_ids = lambda rows: tf.ragged.constant([[vocab[t] for t in r] for r in rows], dtype=tf.int32,
                                                 ragged_rank=1, inner_shape=())
        cases = [(rows_a, None)]
        if max_seq_length >= 3:
            cases.append((rows_a, rows_b))
        for a, b in cases:
            got = preprocessing.pack_inputs(to_ids(a), None if b is None else to_ids(b), max_seq_length=max_seq_length,
                                   cls_id=101, sep_id=102)
            for key in ("input_ids", "input_mask", "segment_ids"):
                assert got[key].dtype == tf.int32 and got[key].shape[1] == max_seq_length
            want = [original_packing.pack_ids(ra, None if b is None else rb, max_seq_length, vocab)
                    for ra, rb in zip(a, b or a)]
            assert got["input_ids"].numpy().tolist() == [w[0] for w in want]
            assert got["input_mask"].numpy().tolist() == [w[1] for w in want]
            assert got["segment_ids"].numpy().tolist() == [w[2] for w in want]


def test_preprocessor_matches_python_packing(preprocessor, uncased_python):
    pre, python = preprocessor, uncased_python
    text_a = ["The quick brown fox jumps over the lazy dog. " * 3, "Short one", "", "Ünïcödé 中文 😀"]
    text_b = ["Is it lazy?", "   ", "Only the second segment has words here", "ΟΔΟΣ " * 20]
    singles = pre(tf.constant(text_a))
    pairs = pre(tf.constant(text_a), tf.constant(text_b))
    for i, (a, b) in enumerate(zip(text_a, text_b)):
        want_single = original_packing.pack_ids(python.tokenize(a), None, 24, python.vocab)
        want_pair = original_packing.pack_ids(python.tokenize(a), python.tokenize(b), 24, python.vocab)
        for got, want in ((singles, want_single), (pairs, want_pair)):
            assert [got[k][i].numpy().tolist() for k in ("input_ids", "input_mask", "segment_ids")] == list(want)


def test_errors(tmp_path, uncased_vocab_file):
    missing = str(tmp_path / "no_such_vocab.txt")
    with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
        in_graph.InGraphTokenizer(missing)
    no_cls = _write_vocab(tmp_path / "v.txt", ["[PAD]", "[UNK]", "[SEP]", "a"])
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        in_graph.InGraphTokenizer(no_cls)
    no_unk = _write_vocab(tmp_path / "w.txt", ["[PAD]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        in_graph.InGraphTokenizer(no_unk)
    ids = tf.ragged.constant([[5, 6]], dtype=tf.int32)
    with pytest.raises(ValueError, match="at least 2"):
        preprocessing.pack_inputs(ids, max_seq_length=1, cls_id=1, sep_id=2)
    with pytest.raises(ValueError, match="at least 3"):
        preprocessing.pack_inputs(ids, ids, max_seq_length=2, cls_id=1, sep_id=2)
    packed = preprocessing.pack_inputs(ids, max_seq_length=2, cls_id=1, sep_id=2)
    assert packed["input_ids"].numpy().tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="at least 2"):
        preprocessing.InGraphPreprocessor(tokenizer=_tokenizer(uncased_vocab_file, True), max_seq_length=1)
    pre = preprocessing.InGraphPreprocessor(tokenizer=_tokenizer(uncased_vocab_file, True), max_seq_length=2)
    with pytest.raises(ValueError, match="at least 3"):
        pre(tf.constant(["a"]), tf.constant(["b"]))
