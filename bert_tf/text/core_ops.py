"""The original tokenizer in core TensorFlow ops only, so stock TF Serving can run raw-text signatures: the ids of
`FullTokenizer`, packed by `InGraphPreprocessor`. TensorFlow Text is needed to build it (the Unicode tables of
`InGraphTokenizer`'s code-point route), not to run it.
"""
import os

import tensorflow as tf

from bert_tf.text import in_graph, tokenization


class CoreWordpieceTokenizer(tf.Module):
    """`FullTokenizer` in core ops: `InGraphTokenizer`'s code-point route, then the original greedy WordPiece loop over
    all words at once (a `tf.while_loop` over a vocabulary hash table)."""

    def __init__(self, vocab_file, do_lower_case=True, unk_token="[UNK]", max_input_chars_per_word=200,
                 name=None, **request_limits):
        super().__init__(name=name)
        # Only its code-point route (core ops over constant tables) is used: kept as a bound
        # plain method, which tf.Module does not track, so none of its TF Text functions lands
        # in the SavedModel.
        basic = in_graph.InGraphTokenizer(vocab_file, do_lower_case, unk_token,
                                          max_input_chars_per_word, **request_limits)
        self.unicode_words = basic.unicode_words
        self.max_texts_per_request = basic.max_texts_per_request
        self.max_request_bytes = basic.max_request_bytes
        vocab = tokenization.load_vocab(vocab_file)
        self.vocab_file = os.fspath(vocab_file)
        self.unk_id, self.cls_id, self.sep_id = vocab[unk_token], vocab["[CLS]"], vocab["[SEP]"]
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        longest = max(len(t[2:]) if t.startswith("##") else len(t) for t in vocab)
        self.max_piece_chars = max(1, min(longest, self.max_input_chars_per_word))
        self._table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(vocab), tf.string), tf.constant(list(vocab.values()), tf.int32)), default_value=-1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        """WordPiece ids: int32 RaggedTensor [batch, (num_wordpieces)]."""
        checked = in_graph.checked(strings, self.max_texts_per_request, self.max_request_bytes)
        words, word_rows, num_rows = self.unicode_words(checked)  # as InGraphTokenizer.tokenize
        pieces = self._wordpiece(words)
        return tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=num_rows, validate=False).merge_dims(1, 2)

    def tokenize_words_with_offsets(self, strings):
        """As `InGraphTokenizer.tokenize_words_with_offsets`."""
        return in_graph.words_with_offsets(self, self._wordpiece, strings)

    def _wordpiece(self, words):
        """int32 code points [W, (chars)] -> ids [W, (pieces)], memory linear in the characters (each step looks up at
        most `max_piece_chars` candidates per word)."""
        strings = tf.strings.unicode_encode(words, "UTF-8")
        lens = tf.cast(words.row_lengths(), tf.int32)
        too_long = lens > self.max_input_chars_per_word
        slots = tf.where(too_long, 0, lens)  # a word has at most one piece per character
        offsets = tf.cumsum(slots, exclusive=True)

        def body(step, start, active, failed, out):
            rows = tf.where(active)[:, 0]  # only the words still being split
            word_start, word_len = tf.gather(start, rows), tf.gather(lens, rows)
            k = tf.ragged.range(1, tf.minimum(word_len - word_start, self.max_piece_chars) + 1)
            window = tf.strings.substr(tf.gather(strings, rows), word_start,
                                       tf.fill(tf.shape(word_start), self.max_piece_chars), unit="UTF8_CHAR")
            of = k.value_rowids()  # the candidate pieces of each word: its window's first 1..k characters
            sub = tf.strings.substr(tf.gather(window, of), tf.zeros_like(k.flat_values), k.flat_values,
                                    unit="UTF8_CHAR")
            ids = self._table.lookup(tf.where(tf.gather(word_start, of) > 0, tf.strings.join(["##", sub]), sub))
            best = tf.reduce_max(k.with_flat_values(tf.where(ids >= 0, k.flat_values, 0)), axis=1)  # longest match
            matched = best > 0
            piece = tf.gather(ids, tf.cast(k.row_starts(), tf.int32) + tf.maximum(best - 1, 0))
            rows32 = tf.cast(rows, tf.int32)[:, None]
            out = tf.tensor_scatter_nd_update(out, (tf.gather(offsets, rows) + step)[:, None],
                                              tf.where(matched, piece, -1))
            failed = tf.tensor_scatter_nd_update(failed, rows32, ~matched)
            new_start = word_start + best
            start = tf.tensor_scatter_nd_update(start, rows32, new_start)
            active = tf.tensor_scatter_nd_update(active, rows32, matched & (new_start < word_len))
            return step + 1, start, active, failed, out

        _, _, _, failed, out = tf.while_loop(
            lambda step, start, active, failed, out: tf.reduce_any(active), body,
            (tf.constant(0), tf.zeros_like(lens), slots > 0, too_long, tf.fill([tf.reduce_sum(slots)], -1)),
            maximum_iterations=tf.reduce_max(tf.concat([slots, [0]], 0)))
        pieces = tf.RaggedTensor.from_row_lengths(out, tf.cast(slots, tf.int64), validate=False)
        pieces = tf.ragged.boolean_mask(pieces, (pieces >= 0) & ~failed[:, None])  # a failed word is one [UNK]
        unk = tf.ragged.boolean_mask(tf.fill([tf.size(lens), 1], self.unk_id), failed[:, None])
        return tf.concat([unk, pieces], axis=1)

