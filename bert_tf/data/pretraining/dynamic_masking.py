"""Dynamic masking: the masked-LM predictions of create_pretraining_data drawn afresh for every epoch, in the tf.data
pipeline, from the original TFRecords (no new data format).

Per parsed example (the original's features, unbatched: `input_ids`, `input_mask`, `segment_ids` [S],
`masked_lm_positions`, `masked_lm_ids` [P], `masked_lm_weights` [P] float32, `next_sentence_labels` [1];
S = max_seq_length, P = max_predictions_per_seq), `DynamicMasking`:

1. puts the record's predictions back (`unmasked_input_ids`: input_ids[position] = label wherever weight > 0),
2. masks the text again by the rule of the original `create_masked_lm_predictions`
   (`bert_tf.data.pretraining.instances`): candidates are the real tokens (input_mask 1) but [CLS] and [SEP]; with
   whole-word masking a "##" piece joins the group of the candidate before it (as the original, that is the last
   word of segment A when the piece directly follows the middle [SEP]); the groups are taken in a uniformly random
   order, skipping a group that would pass num_to_predict = min(P, max(1, round(num_tokens * masked_lm_prob)))
   (num_tokens counts [CLS] and [SEP]; round half to even, as Python's), until num_to_predict are taken; each
   chosen position becomes [MASK] (80%), stays (10%) or becomes a uniformly drawn vocab entry (10%);
3. returns the same dict (same keys, dtypes and static shapes): positions ascending, padded with position 0,
   label 0, weight 0.0 as the original; `input_mask`, `segment_ids`, `next_sentence_labels` untouched.

Randomness is stateless (plain TF ops, no Python, no XLA needed): an example's draws are a function of its
shape-[2] seed. `DynamicMasking.apply` seeds element k of a dataset with (seed, k): apply it to the repeated dataset
so that k keeps counting across epochs and every epoch masks differently, while the pipeline stays deterministic
for a seed and a checkpointed iterator (`tf.train.Checkpoint(iterator=...)`) resumes it exactly. Input pipelines
that each read their own shard should pass different seeds (e.g. seed + input_pipeline_id), or their k-th
examples share their draws.
"""
import numbers

import numpy as np
import tensorflow as tf

from bert_tf.data.pretraining import instances


def unmasked_input_ids(features):
    """The text before masking: `input_ids` [S] with input_ids[masked_lm_positions[i]] = masked_lm_ids[i] wherever
    masked_lm_weights[i] > 0 (one parsed example, unbatched) -> [S], the dtype of input_ids."""
    real = features["masked_lm_weights"] > 0
    positions = tf.boolean_mask(features["masked_lm_positions"], real)
    labels = tf.boolean_mask(features["masked_lm_ids"], real)
    input_ids = features["input_ids"]
    return tf.tensor_scatter_nd_update(input_ids, positions[:, None], tf.cast(labels, input_ids.dtype))


class DynamicMasking:
    """Re-masks parsed pretraining examples by the original rule; see the module docstring."""

    def __init__(self, vocab, max_predictions_per_seq, masked_lm_prob=0.15, do_whole_word_mask=False):
        """vocab: the ordered vocabulary ({token: id} as `tokenization.load_vocab` returns it, or the list of
        tokens in id order); it needs [CLS], [SEP] and [MASK] (ValueError naming the missing ones).
        max_predictions_per_seq (P, int >= 0), masked_lm_prob (in [0, 1]), do_whole_word_mask: the flags of
        create_pretraining_data."""
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
        """One parsed example (the dict of the module docstring, unbatched) and a shape-[2] int64 seed -> the
        re-masked dict (same keys, dtypes, shapes)."""
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
        """A tf.data.Dataset of parsed examples (unbatched; repeat it first) -> the re-masked examples, element k
        (counted from 0 across repeats) seeded with (seed, k); `seed`: an int. Mapped in parallel, in order."""
        if not isinstance(seed, numbers.Integral):
            raise TypeError(f"DynamicMasking.apply needs an int seed; got {seed!r}.")
        seed = int(seed)

        def remask(index, features):
            return self(features, tf.stack([tf.constant(seed, tf.int64), index]))

        return dataset.enumerate().map(remask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def num_to_predict(self, num_tokens):
        """min(P, max(1, round(num_tokens * masked_lm_prob))) of a scalar int32 tensor, in float64 with round half
        to even: the original's Python expression, bit for bit."""
        rounded = tf.round(tf.cast(num_tokens, tf.float64) * self.masked_lm_prob)
        return tf.minimum(self.max_predictions_per_seq, tf.maximum(1, tf.cast(rounded, tf.int32)))

    def _check(self, features):
        """Rejects what would be silently wrong: a batch instead of one example, or a record's P that is not
        max_predictions_per_seq (static shapes, checked when the function is traced)."""
        seq_shape = features["input_ids"].shape
        if seq_shape.rank is not None and seq_shape.rank != 1:
            raise ValueError(f"DynamicMasking takes one example at a time: input_ids of shape [max_seq_length], "
                             f"got {seq_shape}; apply it before batching.")
        pred_shape = features["masked_lm_positions"].shape
        if pred_shape.is_fully_defined() and pred_shape != [self.max_predictions_per_seq]:
            raise ValueError(f"masked_lm_positions has shape {pred_shape}, but max_predictions_per_seq is "
                             f"{self.max_predictions_per_seq}.")

    def _groups(self, tokens, candidate):
        """tokens [S] int32, candidate [S] bool -> (group [S] int32: the candidate group of each position, numbered
        from 0 in order, -1 for non-candidates; the number of groups, scalar). Without whole-word masking every
        candidate is its own group; with it a "##" piece joins the previous candidate's group."""
        starts = candidate
        if self.do_whole_word_mask:
            after_candidate = tf.cumsum(tf.cast(candidate, tf.int32), exclusive=True) > 0
            starts &= ~(tf.gather(self.is_subword, tokens) & after_candidate)
        starts = tf.cast(starts, tf.int32)
        return tf.where(candidate, tf.cumsum(starts) - 1, -1), tf.reduce_sum(starts)

    @staticmethod
    def _choose(group, num_groups, num_to_predict, seed):
        """The original's selection: groups in random order, each taken unless it would pass num_to_predict, until
        num_to_predict positions are taken. group [S] (from `_groups`), scalars, seed [2] -> chosen [S] bool.

        The groups before the first one that does not fit are all taken (at once); a loop goes on from there
        (whole-word masking only: single pieces always fit until num_to_predict is reached)."""
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
        """tokens [S], chosen [S] bool -> masked_lm_positions (ascending), masked_lm_ids, masked_lm_weights (bool),
        each [P], padded with 0 as the original."""
        positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)
        slots = tf.range(tf.size(positions))[:, None]
        shape = [self.max_predictions_per_seq]
        return {"masked_lm_positions": tf.scatter_nd(slots, positions, shape),
                "masked_lm_ids": tf.scatter_nd(slots, tf.gather(tokens, positions), shape),
                "masked_lm_weights": tf.range(shape[0]) < tf.size(positions)}

    def _replacements(self, tokens, seeds):
        """What each position becomes if chosen: tokens [S] int32, seeds [3, 2] -> [S] int32: [MASK] when a first
        uniform draw is < 0.8, else the token itself when a second is < 0.5, else a uniformly drawn vocab entry."""
        shape = tf.shape(tokens)
        first = tf.random.stateless_uniform(shape, seeds[0], dtype=tf.float64)
        second = tf.random.stateless_uniform(shape, seeds[1], dtype=tf.float64)
        entry = tf.random.stateless_uniform(shape, seeds[2], maxval=len(self.random_ids), dtype=tf.int32)
        random_ids = tf.gather(self.random_ids, entry)
        return tf.where(first < 0.8, self.mask_id, tf.where(second < 0.5, tokens, random_ids))
