"""SQuAD examples -> features and TFRecords, as the original convert_examples_to_features: the question cut to
max_query_length tokens, the paragraph to windows of max_seq_length - len(query) - 3 tokens `doc_stride` apart, each
packed `[CLS] query [SEP] window [SEP]`; unique_ids from 1000000000; training windows without the answer (and v2
impossible questions) point at [CLS]. `FeatureWriter` writes the original schema atomically; `make_dataset` reads it.
"""
import collections
import contextlib
import dataclasses

import tensorflow as tf
from absl import logging

from bert_tf.data import records
from bert_tf.text import packing, tokenization
from bert_tf.text.packing import doc_spans_for

FIRST_UNIQUE_ID = 1000000000
TRAIN_RECORD_FILE = "train.tf_record"
EVAL_RECORD_FILE = "eval.tf_record"


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, packed for the model."""
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]
    token_is_max_context: dict[int, bool]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool | None = None


def validate_lengths(max_seq_length, max_query_length, doc_stride, max_position_embeddings=None):
    """Raises ValueError for window settings that cannot produce features."""
    if max_position_embeddings is not None and max_seq_length > max_position_embeddings:
        raise ValueError(f"Cannot use sequence length {max_seq_length} because the BERT model was only trained up "
                         f"to sequence length {max_position_embeddings}.")
    if max_seq_length - max_query_length - 3 <= 0:
        raise ValueError(f"The max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3 ([CLS] and two [SEP]), or no paragraph token would fit.")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}.")


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """The tightest token span within [input_start, input_end] matching the tokenized answer (e.g. "1895" in
    "(1895-1943)."), else the span unchanged."""
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:(new_end + 1)]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def _log_feature(feature, is_training, example):
    logging.info("*** Example ***")
    logging.info("unique_id: %s", feature.unique_id)
    logging.info("example_index: %s", feature.example_index)
    logging.info("doc_span_index: %s", feature.doc_span_index)
    logging.info("tokens: %s", " ".join(tokenization.printable_text(x) for x in feature.tokens))
    logging.info("token_to_orig_map: %s", " ".join(f"{x}:{y}" for x, y in feature.token_to_orig_map.items()))
    logging.info("token_is_max_context: %s",
                 " ".join(f"{x}:{y}" for x, y in feature.token_is_max_context.items()))
    logging.info("input_ids: %s", " ".join(str(x) for x in feature.input_ids))
    logging.info("input_mask: %s", " ".join(str(x) for x in feature.input_mask))
    logging.info("segment_ids: %s", " ".join(str(x) for x in feature.segment_ids))
    if is_training and example.is_impossible:
        logging.info("impossible example")
    if is_training and not example.is_impossible:
        answer_text = " ".join(feature.tokens[feature.start_position:(feature.end_position + 1)])
        logging.info("start_position: %d", feature.start_position)
        logging.info("end_position: %d", feature.end_position)
        logging.info("answer: %s", tokenization.printable_text(answer_text))


def generate_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training):
    """Yields the InputFeatures of `examples` (a feature per window), then logs how many questions max_query_length
    cut."""
    validate_lengths(max_seq_length, max_query_length, doc_stride)
    unique_id = FIRST_UNIQUE_ID
    cut = collections.Counter()
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)
        dropped = max(0, len(query_tokens) - max_query_length)
        cut.update(texts=1, cut_texts=int(dropped > 0), tokens_of_cut=len(query_tokens) if dropped else 0,
                   dropped=dropped)
        del query_tokens[max_query_length:]

        tok_to_orig_index = []
        orig_to_tok_index = []
        all_doc_tokens = []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            for sub_token in tokenizer.tokenize(token):
                tok_to_orig_index.append(i)
                all_doc_tokens.append(sub_token)

        tok_start_position = tok_end_position = None
        if is_training and example.is_impossible:
            tok_start_position = tok_end_position = -1
        if is_training and not example.is_impossible:
            tok_start_position = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end_position = len(all_doc_tokens) - 1
            tok_start_position, tok_end_position = _improve_answer_span(
                all_doc_tokens, tok_start_position, tok_end_position, tokenizer, example.orig_answer_text)

        # [CLS], [SEP] and [SEP] take 3 positions.
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = doc_spans_for(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        max_context = packing.max_context_windows(doc_spans)

        for doc_span_index, doc_span in enumerate(doc_spans):
            tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig_map = {}
            token_is_max_context = {}
            for i in range(doc_span.length):
                split_token_index = doc_span.start + i
                token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
                token_is_max_context[len(tokens)] = max_context[split_token_index] == doc_span_index
                tokens.append(all_doc_tokens[split_token_index])
                segment_ids.append(1)
            tokens.append("[SEP]")
            segment_ids.append(1)

            input_ids, input_mask, segment_ids = packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens),
                                                                    segment_ids, max_seq_length)

            start_position = end_position = None
            if is_training and not example.is_impossible:
                # A window without the whole answer has nothing to predict: point at [CLS].
                doc_start = doc_span.start
                doc_end = doc_span.start + doc_span.length - 1
                if tok_start_position >= doc_start and tok_end_position <= doc_end:
                    doc_offset = len(query_tokens) + 2
                    start_position = tok_start_position - doc_start + doc_offset
                    end_position = tok_end_position - doc_start + doc_offset
                else:
                    start_position = end_position = 0
            if is_training and example.is_impossible:
                start_position = end_position = 0

            feature = InputFeatures(
                unique_id=unique_id, example_index=example_index, doc_span_index=doc_span_index, tokens=tokens,
                token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position, is_impossible=example.is_impossible)
            if example_index < 20:
                _log_feature(feature, is_training, example)
            yield feature
            unique_id += 1
    packing.log_cut(cut, "The questions", max_query_length, "a larger --max_query_length keeps them",
                    "max_query_length")


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                                 output_fn=None):
    """The original's entry point: `output_fn(feature)` for each, returning the count; without it, the list."""
    features = generate_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training)
    if output_fn is None:
        return list(features)
    count = 0
    for feature in features:
        output_fn(feature)
        count += 1
    return count


class FeatureWriter:
    """The original's FeatureWriter, atomic: the file appears on `close()`; an exception in its `with` discards it."""

    def __init__(self, filename, is_training):
        self.filename = filename
        self.is_training = is_training
        self.num_features = 0
        self._stack = contextlib.ExitStack()
        self.written = self._stack.enter_context(records.writer(filename))

    def process_feature(self, feature):
        """Writes `feature` as a tf.train.Example of the original run_squad.py schema."""
        self.num_features += 1
        values = {"unique_ids": feature.unique_id, "input_ids": feature.input_ids,
                  "input_mask": feature.input_mask, "segment_ids": feature.segment_ids}
        if self.is_training:
            values.update(start_positions=feature.start_position,
                          end_positions=feature.end_position,
                          is_impossible=1 if feature.is_impossible else 0)
        schema = name_to_features(len(feature.input_ids), self.is_training, written=True)
        self.written(records.example(values, schema).SerializeToString(deterministic=True))

    def close(self):
        self._stack.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return self._stack.__exit__(exc_type, exc, tb)


def name_to_features(seq_length, is_training, written=False):
    """The original input_fn_builder's spec (`written`: plus `is_impossible`)."""
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
    }
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
        if written:
            spec["is_impossible"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


LABELS = ("start_positions", "end_positions")


def make_dataset(input_file, seq_length, is_training, batch_size, input_context=None, seed=None):
    """The original input_fn: training, shuffled (buffer 100) repeated (features, labels) batches of this worker's
    share; prediction, features in written order, remainder kept."""
    spec = name_to_features(seq_length, is_training)

    def decode(record):
        example = records.parse(record, spec)
        features = {name: example[name] for name in packing.INPUT_NAMES}
        if is_training:
            return features, {name: example[name] for name in LABELS}
        return features

    if is_training:
        return records.training_dataset(input_file, decode, batch_size, 100, seed, input_context, repeat_first=True)
    return records.reading_dataset(input_file, decode, batch_size)


def span_loss(labels, outputs):
    """The original's per-example loss [B] float32: the mean of the start and end cross-entropies."""
    def cross_entropy(logits, positions):
        logits = tf.cast(logits, tf.float32)
        one_hot = tf.one_hot(positions, depth=tf.shape(logits)[-1], dtype=tf.float32)
        return -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits, axis=-1), axis=-1)

    start = cross_entropy(outputs["start_logits"], labels["start_positions"])
    end = cross_entropy(outputs["end_logits"], labels["end_positions"])
    return (start + end) / 2.0


def write_train_features(examples, tokenizer, output_file, max_seq_length, doc_stride, max_query_length):
    """Converts training examples into a TFRecord file; returns its `records.Writer`."""
    with FeatureWriter(output_file, is_training=True) as writer:
        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, True,
                                     output_fn=writer.process_feature)
    return writer.written


def write_eval_features(examples, tokenizer, output_file, max_seq_length, doc_stride, max_query_length):
    """Converts prediction examples into a TFRecord file; returns the features."""
    features = convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, False)
    with FeatureWriter(output_file, is_training=False) as writer:
        for feature in features:
            writer.process_feature(feature)
    return features
