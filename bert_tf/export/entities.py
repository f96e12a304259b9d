"""The NER export's entities, in graph: words tagged by their first wordpiece and grouped as `ner.entities_from_tags`
(seqeval's `get_entities`) groups them. seqeval's rules depend only on consecutive labels, so they become tables over
the label list, built with seqeval's own functions.

Outputs, padded to the request's most entities E (-1 padding): `entity_type_ids` int32 [B, E] (into `Entities.types`),
`entity_types`, `entity_texts` string [B, E], `entity_starts`, `entity_ends` int32 [B, E] (code points:
text[start:end]), `entity_scores` float32 [B, E] (its words' mean top-label probability), `num_entities` int32 [B].
"""
import numpy as np
import tensorflow as tf
from seqeval.metrics.sequence_labeling import end_of_chunk, start_of_chunk

from bert_tf.text import preprocessing


def _tag_and_type(label):
    """seqeval's reading of a label (`get_entities`, prefix tags)."""
    return label[0], label[1:].split("-", maxsplit=1)[-1] or "_"


class Entities:
    """seqeval's grouping over `labels` as tables. Rows: each label, then the state before the first word; columns: each
    label, then the "O" seqeval appends after the last word."""

    def __init__(self, labels):
        labels = list(labels)
        before = [_tag_and_type(label) for label in labels] + [("O", "")]
        after = [_tag_and_type(label) for label in labels] + [("O", "_")]
        self.ends = np.array([[end_of_chunk(p[0], c[0], p[1], c[1]) for c in after] for p in before])
        self.starts = np.array([[start_of_chunk(p[0], c[0], p[1], c[1]) for c in after] for p in before])
        # A chunk takes the type of the label it ends after: the types some label can close, in label order.
        closing = [kind for (_, kind), row in zip(before[:-1], self.ends[:-1]) if row.any()]
        self.types = list(dict.fromkeys(closing))
        self.type_ids = np.array([self.types.index(kind) if kind in self.types else -1 for _, kind in before],
                                 np.int32)

    def __call__(self, text, word_ids, word_starts, word_ends, logits, max_seq_length):
        """The entities of `text` [B] from the model's `logits` [B, S, labels] on its words packed as one segment
        (words cut off have no tag), given their wordpiece ids [B, (words), (pieces)], starts and ends [B, (words)]."""
        counts = word_ids.row_lengths(axis=2)  # [B, (words)] wordpieces per word
        first = 1 + _exclusive_cumsum(counts)  # each word's first wordpiece, after [CLS]
        fits = first.flat_values < max_seq_length - 1
        words = tf.RaggedTensor.from_value_rowids(tf.where(fits)[:, 0], tf.boolean_mask(first.value_rowids(), fits),
                                                  nrows=first.nrows(), validate=False)  # flat indices of tagged words
        rows = words.value_rowids()
        probabilities = tf.nn.softmax(tf.gather_nd(logits, tf.stack([rows, tf.gather(first.flat_values,
                                                                                     words.flat_values)], 1)))
        tags = words.with_flat_values(tf.argmax(probabilities, -1, output_type=tf.int32))
        scores = tf.cast(tf.reduce_max(probabilities, -1), tf.float64)

        # seqeval's walk: position i of each text (its words, then the appended "O") ends the chunk begun at the
        # last start before i, of the type of the label at i - 1.
        state = tf.size(self.type_ids) - 1  # the state before the first word, and the appended "O"
        before = tf.concat([tf.fill([tags.nrows(), 1], state), tags], axis=1)
        after = tf.concat([tags, tf.fill([tags.nrows(), 1], state)], axis=1)
        pairs = tf.stack([before.flat_values, after.flat_values], 1)
        ends, starts = (tf.gather_nd(tf.constant(table), pairs) for table in (self.ends, self.starts))
        row_start = tf.gather(after.row_starts(), after.value_rowids())
        start_at = tf.concat([tf.where(starts)[:, 0], [-1]], 0)  # (-1: a gather in range when nothing starts)
        seen = tf.cumsum(tf.cast(starts, tf.int64), exclusive=True)  # starts before each position
        last_start = tf.gather(start_at, tf.maximum(seen - 1, 0))
        begin = tf.where((seen > 0) & (last_start >= row_start), last_start, row_start)
        closing = tf.where(ends)[:, 0]
        # word positions (flat over the tagged words: position k of text r is word k - r of the flat list)
        entity_rows = tf.gather(after.value_rowids(), closing)
        first_word = tf.gather(begin, closing) - entity_rows
        last_word = closing - 1 - entity_rows
        total = tf.concat([[0.0], tf.cumsum(scores)], 0)
        score = (tf.gather(total, last_word + 1) - tf.gather(total, first_word)) / tf.cast(
            last_word + 1 - first_word, tf.float64)
        type_ids = tf.gather(tf.constant(self.type_ids), tf.gather(before.flat_values, closing))
        span = [tf.gather(values.flat_values, tf.gather(words.flat_values, word))
                for values, word in ((word_starts, first_word), (word_ends, last_word))]
        start, end = (tf.cast(t, tf.int32) for t in span)

        def dense(values, padding):
            return tf.RaggedTensor.from_value_rowids(values, entity_rows, nrows=tags.nrows(),
                                                     validate=False).to_tensor(padding)

        texts = tf.strings.substr(tf.gather(text, entity_rows), start, end - start, unit="UTF8_CHAR")
        return {"entity_type_ids": dense(type_ids, -1),
                "entity_types": dense(tf.gather(tf.constant(self.types, tf.string), type_ids), ""),
                "entity_texts": dense(texts, ""), "entity_starts": dense(start, -1), "entity_ends": dense(end, -1),
                "entity_scores": dense(tf.cast(score, tf.float32), 0.0),
                "num_entities": tf.cast(tf.math.bincount(entity_rows, minlength=tags.nrows(),
                                                         maxlength=tags.nrows()), tf.int32)}


def _exclusive_cumsum(ragged):
    """Each row's exclusive cumulative sum of a ragged [B, (n)] tensor."""
    total = tf.cumsum(ragged.flat_values, exclusive=True)
    return ragged.with_flat_values(total - tf.gather(total, tf.gather(ragged.row_starts(), ragged.value_rowids())))


def pack(tokenizer, text, max_seq_length, **padding):
    """`text` [B] as the NER text signature packs it -> (packed inputs, word ids, starts, ends)."""
    word_ids, starts, ends = tokenizer.tokenize_words_with_offsets(text)
    packed = preprocessing.pack_inputs(word_ids.merge_dims(1, 2), max_seq_length=max_seq_length,
                                       cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, **padding)
    return packed, word_ids, starts, ends
