"""Dynamic masking: the masked-LM predictions drawn afresh every epoch in the tf.data pipeline, from the original
TFRecords. `DynamicMasking` puts an example's predictions back (`unmasked_input_ids`) and masks it again by the
original rule (`instances.create_masked_lm_predictions`; whole-word masking joins a "##" piece to the candidate before
it even across the middle [SEP], as the original): same keys, dtypes, shapes.

Randomness is stateless: `apply` seeds element k with (seed, k), so on the repeated dataset each epoch masks
differently and a checkpointed iterator resumes exactly.
"""
import numbers

import numpy as np
import tensorflow as tf

from bert_tf.data.pretraining import instances


def unmasked_input_ids(features):
    """The text before masking [S]: input_ids[masked_lm_positions[i]] = masked_lm_ids[i] wherever
    masked_lm_weights[i] > 0."""
    real = features["masked_lm_weights"] > 0
    positions = tf.boolean_mask(features["masked_lm_positions"], real)
    labels = tf.boolean_mask(features["masked_lm_ids"], real)
    input_ids = features["input_ids"]
    return tf.tensor_scatter_nd_update(input_ids, positions[:, None], tf.cast(labels, input_ids.dtype))


class DynamicMasking:
    """Re-masks parsed pretraining examples by the original rule."""

    def __init__(self, vocab, max_predictions_per_seq, masked_lm_prob=0.15, do_whole_word_mask=False):
        """vocab: {token: id} or the tokens in id order, with [CLS], [SEP] and [MASK]; the rest:
        create_pretraining_data's flags."""
        if not isinstance(max_predictions_per_seq, numbers.Integral) or max_predictions_per_seq < 0:
            raise ValueError(f"max_predictions_per_seq must be an int >= 0; got {max_predictions_per_seq!r}.")
        if not 0.0 <= masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in [0, 1]; got {masked_lm_prob!r}.")
        tables = instances.VocabTables(vocab)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.do_whole_word_mask = bool(do_whole_word_mask)
        self.cls_id, self.sep_id, self.mask_id = tables.cls_id, tables.sep_id, tables.mask_id
        self.random_ids = np.array(tables.random_ids, np.int32)  # the original draws among the vocab entries
        self.is_subword = np.frombuffer(bytes(tables.is_subword), np.uint8).astype(bool)

    def __call__(self, features, seed):
        """One parsed example, a [2] int64 seed -> the re-masked example."""
        self._check(features)
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=4)
        tokens = tf.cast(unmasked_input_ids(features), tf.int32)
        real = features["input_mask"] > 0
        candidate = real & (tokens != self.cls_id) & (tokens != self.sep_id)
        group, num_groups = self._groups(tokens, candidate)
        num_to_predict = self.num_to_predict(tf.reduce_sum(tf.cast(real, tf.int32)))
        chosen = self._choose(group, num_groups, num_to_predict, seeds[0])
        masked = tf.where(chosen, self._replacements(tokens, seeds[1:]), tokens)
        outputs = dict(features, input_ids=masked, **self._predictions(tokens, chosen))
        return {name: tf.cast(value, features[name].dtype) for name, value in outputs.items()}

    def apply(self, dataset, seed):
        """Parsed examples (unbatched; repeat first) -> re-masked, element k (across repeats) seeded with (seed, k)."""
        if not isinstance(seed, numbers.Integral):
            raise TypeError(f"DynamicMasking.apply needs an int seed; got {seed!r}.")
        seed = int(seed)

        def remask(index, features):
            return self(features, tf.stack([tf.constant(seed, tf.int64), index]))

        return dataset.enumerate().map(remask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def num_to_predict(self, num_tokens):
        """min(P, max(1, round(num_tokens * masked_lm_prob))) in float64, round half to even: the original's, bit for
        bit."""
        rounded = tf.round(tf.cast(num_tokens, tf.float64) * self.masked_lm_prob)
        return tf.minimum(self.max_predictions_per_seq, tf.maximum(1, tf.cast(rounded, tf.int32)))

    def _check(self, features):
        """Rejects a batch, or a record's P other than max_predictions_per_seq."""
        seq_shape = features["input_ids"].shape
        if seq_shape.rank is not None and seq_shape.rank != 1:
            raise ValueError(f"DynamicMasking takes one example at a time: input_ids of shape [max_seq_length], "
                             f"got {seq_shape}; apply it before batching.")
        pred_shape = features["masked_lm_positions"].shape
        if pred_shape.is_fully_defined() and pred_shape != [self.max_predictions_per_seq]:
            raise ValueError(f"masked_lm_positions has shape {pred_shape}, but max_predictions_per_seq is "
                             f"{self.max_predictions_per_seq}.")

    def _groups(self, tokens, candidate):
        """-> (group [S]: each candidate's group, numbered from 0, -1 for non-candidates; the number of groups)."""
        starts = candidate
        if self.do_whole_word_mask:
            after_candidate = tf.cumsum(tf.cast(candidate, tf.int32), exclusive=True) > 0
            starts &= ~(tf.gather(self.is_subword, tokens) & after_candidate)
        starts = tf.cast(starts, tf.int32)
        return tf.where(candidate, tf.cumsum(starts) - 1, -1), tf.reduce_sum(starts)

    @staticmethod
    def _choose(group, num_groups, num_to_predict, seed):
        """-> chosen [S] bool: the groups before the first that does not fit at once, then a loop (whole-word
        masking only: single pieces always fit)."""
        length = tf.shape(group)[0]
        sizes = tf.math.unsorted_segment_sum(tf.ones_like(group), group, length)  # negative ids are dropped
        order = tf.random.experimental.stateless_shuffle(tf.range(num_groups), seed)
        ordered_sizes = tf.gather(sizes, order)
        fitting = tf.cumsum(ordered_sizes) <= num_to_predict  # a prefix of the order
        start = (tf.reduce_sum(tf.cast(fitting, tf.int32)), tf.reduce_sum(tf.where(fitting, ordered_sizes, 0)),
                 tf.scatter_nd(order[:, None], fitting, [length]))

        def more(i, count, taken):
            return (i < num_groups) & (count < num_to_predict)

        def take(i, count, taken):
            size = sizes[order[i]]
            fits = count + size <= num_to_predict
            taken = tf.tensor_scatter_nd_update(taken, [[order[i]]], [fits])
            return i + 1, count + tf.where(fits, size, 0), taken

        _, _, taken = tf.while_loop(more, take, start)
        return (group >= 0) & tf.gather(taken, tf.maximum(group, 0))

    def _predictions(self, tokens, chosen):
        """-> masked_lm_positions (ascending), masked_lm_ids, masked_lm_weights, each [P], padded with 0."""
        positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)
        slots = tf.range(tf.size(positions))[:, None]
        shape = [self.max_predictions_per_seq]
        return {"masked_lm_positions": tf.scatter_nd(slots, positions, shape),
                "masked_lm_ids": tf.scatter_nd(slots, tf.gather(tokens, positions), shape),
                "masked_lm_weights": tf.range(shape[0]) < tf.size(positions)}

    def _replacements(self, tokens, seeds):
        """What each position becomes if chosen: [MASK] (a first draw < 0.8), else itself (a second < 0.5), else a
        random vocab entry."""
        shape = tf.shape(tokens)
        first = tf.random.stateless_uniform(shape, seeds[0], dtype=tf.float64)
        second = tf.random.stateless_uniform(shape, seeds[1], dtype=tf.float64)
        entry = tf.random.stateless_uniform(shape, seeds[2], maxval=len(self.random_ids), dtype=tf.int32)
        random_ids = tf.gather(self.random_ids, entry)
        return tf.where(first < 0.8, self.mask_id, tf.where(second < 0.5, tokens, random_ids))
