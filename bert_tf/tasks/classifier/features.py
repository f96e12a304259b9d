"""run_classifier.py's features: examples packed as `[CLS] a [SEP] (b [SEP])` with the original truncation and zero
padding, written to TFRecords of the original schema and file names.

Multi-label: `label_ids` is the multi-hot int64 vector [num_labels]. With --doc_stride a text too long for
max_seq_length becomes windows, a feature and a record each, with the example's label.
"""
import collections
import dataclasses
import os
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.data import lengths as lengths_lib
from bert_tf.data import records
from bert_tf.tasks.classifier.processors import PaddingInputExample, regression_label
from bert_tf.text import packing, tokenization


@dataclasses.dataclass
class InputFeatures:
    """The packed model inputs of one example, or of one of its windows (--doc_stride)."""
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: Any
    is_real_example: bool = True
    window: int = 0  # its index among its example's windows (0: the first, or the only one)


def _where(example):
    """An example's file and line for errors (else its guid)."""
    return example.source or f"example {example.guid}"


def example_label_id(example, label_list, multi_label=False):
    """The index of `example.label` in `label_list`; for regression (`label_list=None`) a finite float; for
    `multi_label` a multi-hot list. ValueError naming the example's file and line otherwise."""
    where = _where(example)
    if label_list is None:
        return regression_label(example.label, where)
    labels = list(label_list)
    if isinstance(example.label, (list, tuple)) != multi_label:
        raise ValueError(f"{where}: the label {example.label!r} is " + (
            "one label, not a list of labels (multi-label)." if multi_label
            else "a list of labels: multi-label data needs --multi_label."))
    for label in example.label if multi_label else [example.label]:
        if label not in labels:
            raise ValueError(f"{where}: label {label!r} is not in the label list {labels}.")
    if multi_label:
        return [int(label in example.label) for label in labels]
    return labels.index(example.label)


def check_dev_labels(dev_splits, label_list, multi_label=False):
    """Raises `example_label_id`'s error for the first dev label (`dev_splits`) not in `label_list`, before training
    rather than after it."""
    for _, examples in dev_splits:
        for example in examples:
            example_label_id(example, label_list, multi_label)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer, cut=None, multi_label=False):
    """Packs one `InputExample` into `InputFeatures` exactly as the original (a pair cut from its longer text); `cut`:
    a Counter of what truncation cut (`packing.pack_tokens`)."""
    return convert_example_windows(ex_index, example, label_list, max_seq_length, tokenizer, cut, multi_label)[0]


def convert_example_windows(ex_index, example, label_list, max_seq_length, tokenizer, cut=None, multi_label=False,
                            doc_stride=0):
    """`convert_single_example`'s features of `example`: one, or with `doc_stride` > 0 one per window of text_a
    (`packing.pack_windows`, text_b whole in each), each with the label and its `window` index."""
    if isinstance(example, PaddingInputExample):
        label_id = 0.0 if label_list is None else [0] * len(label_list) if multi_label else 0
        return [InputFeatures(input_ids=[0] * max_seq_length, input_mask=[0] * max_seq_length,
                              segment_ids=[0] * max_seq_length, label_id=label_id, is_real_example=False)]

    packed, _ = _pack(example, max_seq_length, tokenizer, doc_stride, cut)
    label_id = example_label_id(example, label_list, multi_label)
    features = [InputFeatures(*packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                                                  max_seq_length), label_id=label_id, window=window)
                for window, (tokens, segment_ids) in enumerate(packed)]
    if ex_index < 5:
        first = features[0]
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in packed[0][0]))
        logging.info("input_ids: %s", " ".join(str(x) for x in first.input_ids))
        logging.info("input_mask: %s", " ".join(str(x) for x in first.input_mask))
        logging.info("segment_ids: %s", " ".join(str(x) for x in first.segment_ids))
        logging.info("label: %s (id = %s)", example.label, label_id)
        if len(features) > 1:
            logging.info("windows: %d (the first shown)", len(features))
    return features


def _pack(example, max_seq_length, tokenizer, doc_stride, cut=None):
    """`packing.pack_windows` of `example`'s texts, its error naming the example's file and line."""
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    try:
        return packing.pack_windows(tokenizer.tokenize(example.text_a), tokens_b, max_seq_length, doc_stride, cut)
    except ValueError as error:
        raise ValueError(f"{_where(example)}: {error}") from None


def check_windows(examples, max_seq_length, tokenizer, doc_stride):
    """Raises, before training, `packing.pack_windows`' error for the first pair of `examples` whose text_b leaves
    text_a no room."""
    for example in examples:
        if example.text_b:
            _pack(example, max_seq_length, tokenizer, doc_stride)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, multi_label=False):
    """`convert_single_example` over a list."""
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer, multi_label=multi_label)
            for i, example in enumerate(examples)]


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, output_file,
                                            multi_label=False, doc_stride=0, fill_batches=1):
    """Writes examples' features (or windows) to a TFRecord file atomically, then padding features up to a multiple of
    `fill_batches`; -> (the list of `InputFeatures`, the records' `records.Writer`: count and fingerprint)."""
    regression = label_list is None
    features, cut = [], collections.Counter()
    with records.writer(output_file) as write:
        def add(feature):
            values = {"input_ids": feature.input_ids, "input_mask": feature.input_mask,
                      "segment_ids": feature.segment_ids, "label_ids": feature.label_id,
                      "is_real_example": int(feature.is_real_example)}
            schema = name_to_features(max_seq_length, regression, np.shape(feature.label_id))
            write(records.example(values, schema).SerializeToString(deterministic=True))
            features.append(feature)

        for ex_index, example in enumerate(examples):
            if ex_index % 10000 == 0:
                logging.info("Writing example %d of %d", ex_index, len(examples))
            for feature in convert_example_windows(ex_index, example, label_list, max_seq_length, tokenizer, cut,
                                                   multi_label, doc_stride):
                add(feature)
        while len(features) % fill_batches:
            add(convert_single_example(len(features), PaddingInputExample(), label_list, max_seq_length, tokenizer,
                                       multi_label=multi_label))
    packing.log_cut(cut, os.path.basename(output_file), max_seq_length, packing.DOC_STRIDE_KEEPS)
    return features, write


def name_to_features(seq_length, regression=False, label_shape=()):
    """The TFRecord schema; `label_shape` (num_labels,) for multi-label."""
    return {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature(list(label_shape), tf.float32 if regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def decode_record(record, seq_length, regression=False, label_shape=()):
    """A serialized example -> (features, labels): int64 becomes int32 as in the original."""
    example = records.parse(record, name_to_features(seq_length, regression, label_shape))
    features = {name: example[name] for name in packing.INPUT_NAMES}
    labels = {name: example[name] for name in ("label_ids", "is_real_example")}
    return features, labels


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder, regression=False,
                                shuffle_seed=None, lengths=None, label_shape=()):
    """The original's input pipeline as a Trainer `dataset_fn(batch_size, input_context=None, seed=shuffle_seed)`:
    training repeats and shuffles (a 100-record buffer), split into replicas' batches (`lengths`); otherwise file
    order."""
    def decode(record):
        return decode_record(record, seq_length, regression, label_shape)

    def dataset_fn(batch_size, input_context=None, seed=shuffle_seed):
        if is_training:
            return records.training_dataset(input_file, decode, batch_size, 100, seed, input_context,
                                            repeat_first=True, drop_remainder=drop_remainder,
                                            batch=lengths_lib.batcher(lengths, packing.INPUT_NAMES))
        return records.reading_dataset(input_file, decode, batch_size, drop_remainder)
    return dataset_fn


def features_to_arrays(features, seq_length, regression=False, label_shape=()):
    """[InputFeatures] -> (features: int32 [N, seq_length], labels: label_ids [N, *label_shape], is_real_example [N]),
    as `decode_record` reads them."""
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32).reshape(len(features), seq_length)
              for name in packing.INPUT_NAMES}
    label_ids = np.array([f.label_id for f in features], np.float32 if regression else np.int32)
    labels = {"label_ids": label_ids.reshape(len(features), *label_shape),
              "is_real_example": np.array([f.is_real_example for f in features], np.int32)}
    return inputs, labels

