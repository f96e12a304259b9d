"""Tests for the entities of raw text with character offsets: `ner.entities_from_tags` (from its words' tags, grouped
as the eval's seqeval groups them: its F1 over the spans is the eval's F1), and the NER export's in-graph entities
(`export.entities`), the same as `bert_tf.load(...).predict`'s."""
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier
from seqeval import metrics as seqeval_metrics

import bert_tf
from bert_tf import fileio
from bert_tf.export import entities, exporter
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import ner
from bert_tf.text import tokenization

# Accents (precomposed, decomposed), two spaces, a no-break space, CJK and an emoji inside entities.
TEXT = "José  Álvarez vive en São\u00a0Paulo, 中国. Cafe\u0301 😀 Ltd!"
# Its words: José Álvarez vive en São Paulo , 中 国 . Café 😀 Ltd !
TAGS = ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "I-ORG", "O"]


def words_of(text):
    return tokenization.BasicTokenizer(do_lower_case=False).tokenize_with_offsets(text)


def test_hand_case():
    words = words_of(TEXT)
    scores = [0.5 + 0.03 * k for k in range(len(words))]
    assert ner.entities_from_tags(TEXT, words, TAGS, scores) == [
        {"type": "PER", "text": "José  Álvarez", "start": 0, "end": 13, "score": pytest.approx(0.515)},
        {"type": "LOC", "text": "São\u00a0Paulo", "start": 22, "end": 31, "score": pytest.approx(0.635)},
        {"type": "LOC", "text": "中国", "start": 33, "end": 35, "score": pytest.approx(0.725)},
        {"type": "ORG", "text": "Cafe\u0301 😀 Ltd", "start": 37, "end": 48, "score": pytest.approx(0.83)},
    ]
    assert [e["score"] for e in ner.entities_from_tags(TEXT, words, TAGS)] == [None] * 4


def test_conlleval_grouping():
    """IOB1 and IOB2 as conlleval reads them: an I- after O or another type starts an entity; B- always does."""
    text = "a b c d e f g h i j"
    tags = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "B-MISC", "O", "I-MISC"]
    found = [(e["type"], e["text"]) for e in ner.entities_from_tags(text, words_of(text), tags)]
    assert found == [("PER", "a b"), ("LOC", "d"), ("LOC", "e f"), ("ORG", "g"), ("MISC", "h"), ("MISC", "j")]
    assert ner.entities_from_tags("", [], []) == []


def test_random_tags_give_seqeval_entities_and_f1():
    rng = random.Random(53)
    pieces = ["Ab", "é", "e\u0301", "中", "😀", "x", ",", "İ"]
    spaces = [" ", "  ", "\u00a0", "\u3000", "", "\t"]
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    true_positives = gold_count = predicted_count = 0
    gold_runs, predicted_runs = [], []
    for _ in range(200):
        text = "".join(rng.choice(pieces) + rng.choice(spaces) for _ in range(rng.randint(0, 12)))
        words = words_of(text)
        gold, predicted = ([rng.choice(tags) for _ in words] for _ in range(2))
        scores = [rng.random() for _ in words]
        entities = ner.entities_from_tags(text, words, predicted, scores)
        # seqeval's chunks, each from its first word's start to its last word's end, its score the mean
        chunks = seqeval_metrics.sequence_labeling.get_entities(predicted)
        assert len(entities) == len(chunks)
        for entity, (kind, first, last) in zip(entities, chunks):
            assert (entity["type"], entity["start"], entity["end"]) == (kind, words[first][1], words[last][2])
            assert entity["text"] == text[entity["start"]:entity["end"]]
            assert entity["score"] == pytest.approx(np.mean(scores[first:last + 1]))
        # entity F1 over the spans is seqeval's F1 over the tags
        spans = [{(e["type"], e["start"], e["end"]) for e in ner.entities_from_tags(text, words, t)}
                 for t in (gold, predicted)]
        true_positives += len(spans[0] & spans[1])
        gold_count += len(spans[0])
        predicted_count += len(spans[1])
        gold_runs.append(gold)
        predicted_runs.append(predicted)
    f1 = 2 * true_positives / (gold_count + predicted_count)
    assert f1 == pytest.approx(seqeval_metrics.f1_score(gold_runs, predicted_runs))


def test_length_mismatch_is_an_error():
    words = words_of("a b")
    with pytest.raises(ValueError, match="2 words, but 1 tags: expected one per word"):
        ner.entities_from_tags("a b", words, ["O"])
    with pytest.raises(ValueError, match="2 words, but 2 tags and 3 scores"):
        ner.entities_from_tags("a b", words, ["O", "O"], [0.1, 0.2, 0.3])


@pytest.mark.filterwarnings("ignore:.* seems not to be NE tag")
@pytest.mark.parametrize("labels", [["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
                                    ["O", "X", "MISC", "B-A", "I-B", "S", "B", "E-A"], ["B-X"]])
def test_in_graph_grouping_is_seqevals(labels):
    """Random logits on texts of words of 1-3 wordpieces, some cut by the packing: the in-graph entities are those of
    `ner.entities_from_tags` on the tags and probabilities of each word's first wordpiece, for any label names."""
    rng, seq_length = random.Random(54), 12
    pieces = [[[7] * rng.randint(1, 3) for _ in range(rng.randint(0, 9))] for _ in range(40)]
    texts = [" ".join(f"w{k}" for k in range(len(words))) for words in pieces]
    starts = [[3 * k for k in range(len(words))] for words in pieces]
    logits = np.random.RandomState(54).randn(len(texts), seq_length, len(labels)).astype(np.float32)
    grouping = entities.Entities(labels)
    out = grouping(tf.constant(texts), tf.ragged.constant(pieces, tf.int32, ragged_rank=2),
                                    tf.ragged.constant(starts, tf.int64),
                                    tf.ragged.constant([[s + 2 for s in row] for row in starts], tf.int64),
                                    tf.constant(logits), seq_length)
    for b, text in enumerate(texts):
        first = 1 + np.cumsum([0] + [len(p) for p in pieces[b]])[:-1]
        tagged = [k for k, position in enumerate(first) if position < seq_length - 1]
        rows = logits[b, first[tagged]].astype(np.float64).reshape(len(tagged), len(labels))
        probabilities = np.exp(rows) / np.exp(rows).sum(-1, keepdims=True)
        words = [(f"w{k}", starts[b][k], starts[b][k] + 2) for k in tagged]
        expected = ner.entities_from_tags(text, words, [labels[i] for i in probabilities.argmax(-1)],
                                          list(probabilities.max(-1)))
        assert _exported(out, b, grouping.types) == [{**e, "score": pytest.approx(e["score"], abs=1e-6)}
                                                     for e in expected]


def _exported(out, b, types):
    """The entities of text `b` of an export's outputs, as `.predict` answers them, after checking their type ids
    (into `types`) and the padding."""
    out = {name: np.asarray(t) for name, t in out.items()}
    n = out["num_entities"][b]
    assert [types[i] for i in out["entity_type_ids"][b, :n]] == [t.decode() for t in out["entity_types"][b, :n]]
    assert set(out["entity_type_ids"][b, n:]) <= {-1} and set(out["entity_starts"][b, n:]) <= {-1}
    return [{"type": out["entity_types"][b, j].decode(), "text": out["entity_texts"][b, j].decode(),
             "start": int(out["entity_starts"][b, j]), "end": int(out["entity_ends"][b, j]),
             "score": float(out["entity_scores"][b, j])} for j in range(n)]


LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "S-ORG"]
EXPORT_TEXTS = [TEXT, "", "  Cafe\u0301 e\u0301\u0327! al\u3000alvarez\u00a0\u00a0sao paulo",
                "İstanbul ΟΔΟΣ 中国 x\U0001f600y", "the cat sat on the mat ."]


def test_export_entities_are_loads(tmp_path):
    """A random-weights NER model exported: serving_text's entities (accents, CJK, emoji, repeated and non-ASCII
    spaces, an empty text) are `bert_tf.load(export).predict`'s, each its text's text[start:end]. (The core-ops
    export runs the same code on `CoreWordpieceTokenizer`'s words: tests/text/test_in_graph_offsets.py.)"""
    vocab = tiny_classifier.VOCAB + ["jose", "al", "##var", "##ez", "sao", "paulo", "中", "国", "cafe", "ltd"]
    vocab_file, config_file = tiny_classifier.write_tiny_model(tmp_path, vocab)
    tf.keras.utils.set_random_seed(54)
    model = task_models.build_task_model("ner", BertConfig.from_json_file(config_file), num_labels=len(LABELS))
    path = exporter.export("ner", str(tmp_path / "export"), model, vocab_file=vocab_file, label_list=LABELS,
                           max_seq_length=32, do_lower_case=True)
    out = tf.saved_model.load(path).signatures["serving_text"](text_a=tf.constant(EXPORT_TEXTS))
    types = fileio.read_json(os.path.join(path, "assets.extra", "export_metadata.json"), "")["entity_types"]
    assert types == ["PER", "LOC", "ORG"]
    answers = bert_tf.load(str(tmp_path / "export")).predict(EXPORT_TEXTS)
    assert sum(len(a["entities"]) for a in answers) >= 5
    for b, (text, answer) in enumerate(zip(EXPORT_TEXTS, answers)):
        assert _exported(out, b, types) == [{**e, "score": pytest.approx(e["score"], abs=1e-5)}
                                            for e in answer["entities"]]
        assert all(text[e["start"]:e["end"]] == e["text"] for e in answer["entities"])
