"""Tests for `ner.entities_from_tags`: the entities of raw text, with character offsets, from its words' tags, grouped
as the eval's seqeval groups them (its F1 over the spans is the eval's F1)."""
import random

import numpy as np
import pytest
from seqeval import metrics as seqeval_metrics

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
