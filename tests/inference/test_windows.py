"""--doc_stride windows (bert_tf.text.packing.pack_windows) and their use by extract_features and the sentence
embeddings, against the original run_squad.py's windows and max-context rule (transcribed below) and the model run
by hand on each window."""
import collections
import json
import logging
import math
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import lengths as lengths_lib
from bert_tf.inference import embeddings
from bert_tf.inference import extract_features as ef
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.text import packing, tokenization

# --- the original run_squad.py (google-research/bert), its window loop and _check_is_max_context -------------------
_DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def original_doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    doc_spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = num_tokens - start_offset
        if length > max_tokens_for_doc:
            length = max_tokens_for_doc
        doc_spans.append(_DocSpan(start=start_offset, length=length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


def original_check_is_max_context(doc_spans, cur_span_index, position):
    best_score = None
    best_span_index = None
    for (span_index, doc_span) in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start:
            continue
        if position > end:
            continue
        num_left_context = position - doc_span.start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


# --- the helper ----------------------------------------------------------------------------------------------------
def test_windows_and_max_context_by_hand_and_as_the_original():
    # 10 tokens, windows of 4 every 3: ties (positions 3 and 6) go to the first window.
    assert packing.doc_spans_for(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert packing.max_context_windows(packing.doc_spans_for(10, 4, 3)) == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    # 7 tokens every 2: the shorter last window (score + 0.03) still wins position 5 (1.03 against 0.04).
    assert packing.doc_spans_for(7, 4, 2) == [(0, 4), (2, 4), (4, 3)]
    assert packing.max_context_windows(packing.doc_spans_for(7, 4, 2)) == [0, 0, 0, 1, 1, 2, 2]
    assert packing.doc_spans_for(10, 4, 6) == [(0, 4), (4, 4), (8, 2)]  # a stride above the room acts as the room
    assert packing.doc_spans_for(0, 4, 2) == [] and packing.max_context_windows([]) == []
    rng = random.Random(0)
    for _ in range(150):
        num_tokens, room, stride = rng.randint(1, 60), rng.randint(1, 12), rng.randint(1, 14)
        spans = packing.doc_spans_for(num_tokens, room, stride)
        assert spans == original_doc_spans(num_tokens, room, stride)
        assert len(spans) == (1 if num_tokens <= room else math.ceil((num_tokens - room) / min(stride, room)) + 1)
        best = packing.max_context_windows(spans)
        assert len(best) == num_tokens
        for index in range(len(spans)):
            for position in range(num_tokens):
                assert (best[position] == index) == original_check_is_max_context(spans, index, position)
    with pytest.raises(ValueError, match="doc_stride >= 1, got 4 and 0"):
        packing.doc_spans_for(10, 4, 0)


def test_pack_windows_by_hand():
    a = [f"t{i}" for i in range(7)]
    packed, sources = packing.pack_windows(list(a), None, 6, doc_stride=2)  # room 4: windows (0, 4), (2, 4), (4, 3)
    assert packed == [(["[CLS]", "t0", "t1", "t2", "t3", "[SEP]"], [0] * 6),
                      (["[CLS]", "t2", "t3", "t4", "t5", "[SEP]"], [0] * 6),
                      (["[CLS]", "t4", "t5", "t6", "[SEP]"], [0] * 5)]
    assert sources == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4)]
    # room 9 - 3 - 2: the same windows
    pair_packed, pair_sources = packing.pack_windows(list(a), ["u0", "u1"], 9, doc_stride=2)
    assert [tokens for tokens, _ in pair_packed] == [["[CLS]"] + a[s:s + n] + ["[SEP]", "u0", "u1", "[SEP]"]
                                                     for s, n in ((0, 4), (2, 4), (4, 3))]
    assert [segments for _, segments in pair_packed] == [[0] * 6 + [1] * 3, [0] * 6 + [1] * 3, [0] * 5 + [1] * 3]
    assert pair_sources == sources[:-1] + [(2, 4), (2, 5), (2, 6), (2, 7)]
    # A text that fits, or doc_stride 0: pack_tokens' packing, truncated as the original (and counted).
    cut = collections.Counter()
    assert packing.pack_windows(a[:4], None, 6, 2, cut) == ([packing.pack_tokens(a[:4], None, 6)], None)
    assert packing.pack_windows(list(a), ["u0"], 6, 0, cut) == ([packing.pack_tokens(list(a), ["u0"], 6)], None)
    packing.pack_windows(list(a), None, 6, 2, cut)
    assert cut == collections.Counter(texts=3, cut_texts=1, tokens_of_cut=8, dropped=5, windowed_texts=1, windows=3,
                                      most_windows=3)
    with pytest.raises(ValueError, match="text_b has 4 tokens, which with .* leave no room for text_a within "
                                         "max_seq_length 6: --doc_stride windows text_a"):
        packing.pack_windows(list(a), ["u"] * 4, 6, 2)


# --- extract_features and the sentence embeddings --------------------------------------------------------------------
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "dog", "##s", "run", "."]
LONG = "the dog run . hello world the dogs run . hello world the dog"  # 15 tokens: 6 windows of 6 every 2
PAIR_A = "hello world the dogs run . the dog run"  # 10 tokens beside "hello world": 5 windows of 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(tokenizer, embedding model (mean pooling, normalized) with seeded random weights, a directory)."""
    d = tmp_path_factory.mktemp("windows")
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=16, type_vocab_size=2)
    tf.keras.utils.set_random_seed(7)
    return tokenization.FullTokenizer(str(d / "vocab.txt")), task_models.build_task_model("embedding", config), d


def by_hand(bert, tokenizer, text_a, text_b, max_seq_length, stride):
    """(the last layer's vector of each token of [CLS] a [SEP] (b [SEP]) from its max-context window, the windows'
    outputs): the original's windows over a, each run alone."""
    tokens_a, tokens_b = tokenizer.tokenize(text_a), tokenizer.tokenize(text_b) if text_b else []
    tail = tokens_b + ["[SEP]"] if tokens_b else []
    spans = original_doc_spans(len(tokens_a), max_seq_length - 2 - len(tail), stride)
    outputs = []
    for span in spans:
        tokens = ["[CLS]"] + tokens_a[span.start:span.start + span.length] + ["[SEP]"] + tail
        inputs = {"input_ids": [tokenizer.convert_tokens_to_ids(tokens)], "input_mask": [[1] * len(tokens)],
                  "segment_ids": [[0] * (span.length + 2) + [1] * len(tail)]}
        outputs.append(bert({k: np.array(v, np.int32) for k, v in inputs.items()})["encoder_outputs"][-1][0].numpy())
    vectors = [outputs[0][0]]
    for position in range(len(tokens_a)):
        w = next(i for i in range(len(spans)) if original_check_is_max_context(spans, i, position))
        vectors.append(outputs[w][1 + position - spans[w].start])
    vectors.extend(outputs[-1][1 + spans[-1].length:])
    return np.stack(vectors), outputs


def test_extract_features_takes_each_token_from_its_max_context_window(tiny, caplog):
    """A text 2x max_seq_length and a pair across windows: one entry per token of the whole text, each the model's
    output on its max-context window run alone; in batches of 2 sorted by length (windows across batches)."""
    tokenizer, model, d = tiny
    (d / "in.txt").write_text(f"{LONG}\nhello world\n{PAIR_A} ||| hello world\nthe dog ||| run .\n")
    caplog.set_level(logging.INFO, logger="absl")  # absl logs under "absl", whatever other tests set
    assert ef.extract_features(model.bert, tokenizer, str(d / "in.txt"), str(d / "out.jsonl"), "-1", 8, batch_size=2,
                               lengths=lengths_lib.SequenceLengths.for_run(), doc_stride=2) == 4
    assert ("The input file: 2 of 4 texts were longer than max_seq_length 8 and were split into 11 windows in all "
            "(--doc_stride), at most 6 for one text.") in caplog.messages
    lines = [json.loads(line) for line in open(d / "out.jsonl")]
    assert [line["linex_index"] for line in lines] == [0, 1, 2, 3]
    for line, (a, b) in zip(lines, [(LONG, None), ("hello world", None), (PAIR_A, "hello world"),
                                    ("the dog", "run .")]):
        tokens = ["[CLS]"] + tokenizer.tokenize(a) + ["[SEP]"] + (tokenizer.tokenize(b) + ["[SEP]"] if b else [])
        assert [f["token"] for f in line["features"]] == tokens
        expected, _ = by_hand(model.bert, tokenizer, a, b, 8, 2)
        got = np.array([f["layers"][0]["values"] for f in line["features"]])
        np.testing.assert_allclose(got, expected, atol=2e-6)
    # Texts that fit: the output without --doc_stride, exactly; a long text without it is cut, and the log says
    # which flag keeps it.
    (d / "short.txt").write_text("hello world\nthe dog ||| run .\n")
    for stride in (0, 2):
        ef.extract_features(model.bert, tokenizer, str(d / "short.txt"), str(d / f"short{stride}.jsonl"), "-1", 8,
                            doc_stride=stride)
    assert (d / "short0.jsonl").read_text() == (d / "short2.jsonl").read_text()
    ef.convert_examples_to_texts(ef.read_examples(str(d / "in.txt")), 8, tokenizer)
    lost = 100 * (15 - 6 + 12 - 5) / (15 + 12)  # 6 of the single's 15 tokens kept, 5 of the pair's 10 + 2
    assert caplog.messages[-1] == (f"The input file: 2 of 4 texts (50.0%) were longer than max_seq_length 8 and were "
                                   f"cut, losing {lost:.1f}% of their tokens; --doc_stride keeps them whole, in "
                                   "windows (or a larger --max_seq_length).")
    examples = [ef.InputExample(0, "hello", None), ef.InputExample(1, "hello", "the dog run . hello world")]
    with pytest.raises(ValueError, match="Input line 2: text_b has 6 tokens"):
        ef.convert_examples_to_texts(examples, 8, tokenizer, doc_stride=2)


def test_embeddings_pool_over_the_windows(tiny, caplog):
    """Mean pooling: the mean over the whole text's tokens, each from its max-context window, then normalized;
    [CLS] pooling: the mean of the windows' [CLS] vectors; a text that fits: its embedding without windows."""
    tokenizer, model, _ = tiny
    caplog.set_level(logging.INFO, logger="absl")  # absl logs under "absl", whatever other tests set
    encoder = embeddings.SentenceEncoder(model, tokenizer, max_seq_length=8, batch_size=2, doc_stride=2)
    got = encoder.encode([LONG, "hello world"])
    assert ("The texts to embed: 1 of 2 texts were longer than max_seq_length 8 and were split into 6 windows in "
            "all (--doc_stride), at most 6 for one text.") in caplog.messages
    vectors, windows = by_hand(model.bert, tokenizer, LONG, None, 8, 2)
    np.testing.assert_allclose(got[0], embeddings.unit(vectors.mean(0)), atol=1e-6)
    np.testing.assert_allclose(got[1], embeddings.SentenceEncoder(model, tokenizer, 8).encode(["hello world"])[0],
                               atol=1e-6)
    cls = task_models.BertSentenceEncoder(model.bert.config, pooling="cls", normalize_embeddings=False, bert=model.bert)
    np.testing.assert_allclose(embeddings.SentenceEncoder(cls, tokenizer, 8, batch_size=4, doc_stride=2).encode([LONG]),
                               [np.mean([w[0] for w in windows], axis=0)], atol=1e-6)
