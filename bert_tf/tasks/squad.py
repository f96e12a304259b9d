"""SQuAD v1.1 / v2.0 question answering (the original run_squad.py): examples, features, TFRecords, post-processing.

Pipeline, every step with the original's rules:

1. `read_squad_examples`: each paragraph is split on whitespace (space, tab, CR, LF, U+202F) into `doc_tokens`,
   with `char_to_word_offset` mapping every character to its word. For training, the character answer span is
   projected to words; answers whose text cannot be recovered from those words are skipped (warned and counted).
2. `convert_examples_to_features`: WordPiece the question (truncated to max_query_length) and each word of the
   paragraph; for training, `_improve_answer_span` tightens the span to the tokenized answer. The paragraph is
   cut into windows of at most max_seq_length - len(query) - 3 tokens, `doc_stride` apart; each window is packed
   `[CLS] query [SEP] window [SEP]` with `token_to_orig_map` (position -> word) and `token_is_max_context`
   (whether this window gives the token its most context, `_check_is_max_context`). unique_ids count from
   1000000000. Training windows that do not contain the answer (and v2 impossible questions) point at [CLS].
3. `FeatureWriter`: TFRecords with the original schema (unique_ids, input_ids, input_mask, segment_ids, and for
   training start_positions, end_positions, is_impossible), written to a temporary name and renamed when
   complete. `make_dataset` reads them back as (features, labels) batches.
4. `write_predictions`: the n-best spans per example across its windows (`_get_best_indexes`), mapped back to the
   original text with `get_final_text`, softmaxed (`_compute_softmax`), and for v2 compared with the null score;
   writes predictions.json, nbest_predictions.json and (v2) null_odds.json exactly as the original formats them.

One deliberate difference: with version_2_with_negative the original crashes (it dereferences a missing
"best non-null" entry) when no non-null span survives the filters (all top start/end indexes fall in the
question, padding, outside the max-context tokens, reversed or too long). Such a question can only be answered
null: here its prediction is "", its n-best list the single "" entry, and its null odds the largest finite
float (the score difference is +infinity, which JSON cannot hold). Every other output is the original's.
(When some non-null span survives, the n-best list always holds one, so this is the only crashing case.)
Bad input fails with the file and position (missing file, malformed JSON, missing fields); training answers
with an empty text or an answer_start outside the paragraph are skipped and counted like unrecoverable ones
(the original would index out of range or keep a broken span).

`train` and `predict` are the script's two jobs (output_dir/train.tf_record, eval.tf_record and the JSON files);
`evaluate_predictions` runs the official evaluation (bert_tf.tasks.squad_evaluate).
"""
import collections
import dataclasses
import json
import math
import os
import random
import sys
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, records, tokenization
from bert_tf.tasks import result_files, squad_evaluate

FIRST_UNIQUE_ID = 1000000000
# The null odds written for an example with no non-null candidate at all (the difference is +inf).
NO_ANSWER_SCORE_DIFF = sys.float_info.max

TRAIN_RECORD_FILE = "train.tf_record"
EVAL_RECORD_FILE = "eval.tf_record"
PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"


class SquadFormatError(ValueError):
    """A SQuAD JSON file that cannot be read or does not have the SQuAD structure."""


@dataclasses.dataclass
class SquadExample:
    """One question on one paragraph. start/end_position are word indexes into doc_tokens (-1 if impossible)."""
    qas_id: str
    question_text: str
    doc_tokens: List[str]
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, packed for the model."""
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    token_to_orig_map: Dict[int, int]
    token_is_max_context: Dict[int, bool]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: Optional[bool] = None


RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


# ------------------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------------------

def load_squad_json(input_file):
    """The parsed JSON object of a SQuAD file; clear errors for a missing file or malformed JSON."""
    if not tf.io.gfile.exists(input_file):
        raise FileNotFoundError(f"SQuAD file not found: {input_file}")
    with tf.io.gfile.GFile(input_file, "rb") as reader:
        raw = reader.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SquadFormatError(f"{input_file}: not UTF-8 (byte offset {e.start}).") from None
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as e:
        raise SquadFormatError(f"{input_file}: malformed JSON at line {e.lineno}, column {e.colno} "
                               f"(char {e.pos}): {e.msg}") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f"{input_file}: expected a JSON object with a \"data\" list (the SQuAD format).")
    return dataset


def _field(obj, key, kind, where, source):
    if not isinstance(obj, dict) or key not in obj:
        raise SquadFormatError(f"{source}: {where} has no \"{key}\".")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SquadFormatError(f"{source}: {where}.{key} should be {names}, got {type(value).__name__}.")
    return value


def _is_whitespace(c):
    return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def split_paragraph(paragraph_text):
    """(doc_tokens, char_to_word_offset): the original's whitespace split and each character's word index."""
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if _is_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def examples_from_json(dataset, is_training, version_2_with_negative=False, source="<squad>"):
    """(examples, num_skipped) from a parsed SQuAD object; see `read_squad_examples`."""
    examples = []
    skipped = 0
    for i, entry in enumerate(_field(dataset, "data", list, "the file", source)):
        for j, paragraph in enumerate(_field(entry, "paragraphs", list, f"data[{i}]", source)):
            where = f"data[{i}].paragraphs[{j}]"
            doc_tokens, char_to_word_offset = split_paragraph(_field(paragraph, "context", str, where, source))
            for k, qa in enumerate(_field(paragraph, "qas", list, where, source)):
                qa_where = f"{where}.qas[{k}]"
                qas_id = _field(qa, "id", (str, int), qa_where, source)
                question_text = _field(qa, "question", str, qa_where, source)
                start_position = end_position = orig_answer_text = None
                is_impossible = False
                if is_training:
                    if version_2_with_negative:
                        is_impossible = bool(qa.get("is_impossible", False))
                    answers = _field(qa, "answers", list, qa_where, source)
                    if len(answers) != 1 and not is_impossible:
                        raise SquadFormatError(
                            f"{source}: {qa_where} (id {qas_id!r}) has {len(answers)} answers; for training, each "
                            f"question should have exactly 1 answer.")
                    if not is_impossible:
                        answer = answers[0]
                        orig_answer_text = _field(answer, "text", str, f"{qa_where}.answers[0]", source)
                        answer_offset = _field(answer, "answer_start", int, f"{qa_where}.answers[0]", source)
                        answer_end = answer_offset + len(orig_answer_text) - 1
                        actual_text = None
                        if 0 <= answer_offset <= answer_end < len(char_to_word_offset):
                            start_position = char_to_word_offset[answer_offset]
                            end_position = char_to_word_offset[answer_end]
                            # Keep only answers whose text can be recovered from the document's words.
                            actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
                        cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
                        if actual_text is None or actual_text.find(cleaned_answer_text) == -1:
                            logging.warning("Could not find answer of %s: '%s' vs. '%s'", qas_id, actual_text,
                                            cleaned_answer_text)
                            skipped += 1
                            continue
                    else:
                        start_position = -1
                        end_position = -1
                        orig_answer_text = ""
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens,
                    orig_answer_text=orig_answer_text, start_position=start_position, end_position=end_position,
                    is_impossible=is_impossible))
    return examples, skipped


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """A SQuAD JSON file -> list of SquadExample, as the original reads it.

    For training every question needs exactly one answer (v2: or is_impossible); answers whose text is not found
    in the paragraph's words at `answer_start` are skipped with a warning, and the count is logged.
    """
    examples, skipped = examples_from_json(load_squad_json(input_file), is_training, version_2_with_negative,
                                           source=input_file)
    if skipped:
        logging.warning("Skipped %d question(s) of %s whose answer text could not be found in the context.",
                        skipped, input_file)
    return examples


def read_predict_file(input_file, version_2_with_negative=False):
    """(parsed SQuAD object, examples) of a file to predict on; SquadFormatError when it holds no question
    (predicting would write empty outputs and look like success)."""
    dataset = load_squad_json(input_file)
    examples, _ = examples_from_json(dataset, is_training=False, version_2_with_negative=version_2_with_negative,
                                     source=input_file)
    if not examples:
        raise SquadFormatError(f"{input_file}: no questions to predict (every paragraph's \"qas\" list is empty, "
                               "or \"data\" is).")
    return dataset, examples


def has_answers(dataset):
    """True if a parsed SQuAD object carries gold answers (a dev set, not a test set)."""
    for entry in dataset.get("data", []):
        for paragraph in entry.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                if qa.get("answers") or "is_impossible" in qa:
                    return True
    return False


# ------------------------------------------------------------------------------------------------------------
# Features
# ------------------------------------------------------------------------------------------------------------

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
    """The tightest token span within [input_start, input_end] whose tokens equal the tokenized answer
    (e.g. "1895" inside "(1895-1943)."), else the span unchanged."""
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:(new_end + 1)]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether span `cur_span_index` is the one giving token `position` the most context: the largest
    min(left, right) context, plus 0.01 x span length to prefer longer spans on ties."""
    best_score = None
    best_span_index = None
    for span_index, doc_span in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start or position > end:
            continue
        num_left_context = position - doc_span.start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
    """The sliding windows over `num_tokens` paragraph tokens: list of DocSpan(start, length)."""
    doc_spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens_for_doc)
        doc_spans.append(DocSpan(start=start_offset, length=length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


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


def generate_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                      log_examples=20):
    """Yields the InputFeatures of `examples` (several per example when the paragraph needs several windows)."""
    validate_lengths(max_seq_length, max_query_length, doc_stride)
    unique_id = FIRST_UNIQUE_ID
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]

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

        for doc_span_index, doc_span in enumerate(doc_spans):
            tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig_map = {}
            token_is_max_context = {}
            for i in range(doc_span.length):
                split_token_index = doc_span.start + i
                token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
                token_is_max_context[len(tokens)] = _check_is_max_context(doc_spans, doc_span_index,
                                                                          split_token_index)
                tokens.append(all_doc_tokens[split_token_index])
                segment_ids.append(1)
            tokens.append("[SEP]")
            segment_ids.append(1)

            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            input_mask = [1] * len(input_ids)
            padding = max_seq_length - len(input_ids)
            input_ids = input_ids + [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding

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
            if example_index < log_examples:
                _log_feature(feature, is_training, example)
            yield feature
            unique_id += 1


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                                 output_fn=None):
    """The original's entry point: calls `output_fn(feature)` for each feature and returns how many there were;
    without `output_fn`, returns the list of features."""
    features = generate_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training)
    if output_fn is None:
        return list(features)
    count = 0
    for feature in features:
        output_fn(feature)
        count += 1
    return count


# ------------------------------------------------------------------------------------------------------------
# TFRecords and datasets
# ------------------------------------------------------------------------------------------------------------

def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def feature_to_example(feature, is_training):
    """InputFeatures -> tf.train.Example with the original run_squad.py schema."""
    fields = collections.OrderedDict()
    fields["unique_ids"] = _int_feature([feature.unique_id])
    fields["input_ids"] = _int_feature(feature.input_ids)
    fields["input_mask"] = _int_feature(feature.input_mask)
    fields["segment_ids"] = _int_feature(feature.segment_ids)
    if is_training:
        fields["start_positions"] = _int_feature([feature.start_position])
        fields["end_positions"] = _int_feature([feature.end_position])
        fields["is_impossible"] = _int_feature([1 if feature.is_impossible else 0])
    return tf.train.Example(features=tf.train.Features(feature=fields))


class FeatureWriter:
    """Writes InputFeatures to a TFRecord file, atomically: to `<filename>.tmp`, renamed on `close()`.

    As a context manager, an exception discards the partial file.
    """

    def __init__(self, filename, is_training):
        self.filename = filename
        self.is_training = is_training
        self.num_features = 0
        self._tmp = fileio.temp_path(filename)
        self._writer = tf.io.TFRecordWriter(self._tmp)

    def process_feature(self, feature):
        self.num_features += 1
        self._writer.write(feature_to_example(feature, self.is_training).SerializeToString())

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            tf.io.gfile.rename(self._tmp, self.filename, overwrite=True)

    def abort(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            fileio.remove_quietly(self._tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


def name_to_features(seq_length, is_training):
    """The TFRecord parsing spec of the original's input_fn_builder."""
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
    }
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
LABELS = ("start_positions", "end_positions")


def make_dataset(input_file, seq_length, is_training, batch_size, drop_remainder=None, input_context=None,
                 shuffle_buffer=100, seed=None):
    """A tf.data pipeline over a SQuAD TFRecord file, as the original input_fn (int64 cast to int32).

    Training: sharded by `input_context`, repeated, shuffled (buffer 100, order drawn from `seed`), batches of
    (features, labels) with
    features input_ids/input_mask/segment_ids and labels start_positions/end_positions, remainder dropped.
    Prediction: batches of features only (input order, remainder kept); unique_ids follow the written order.
    """
    if drop_remainder is None:
        drop_remainder = is_training
    spec = name_to_features(seq_length, is_training)

    def decode(record):
        example = tf.io.parse_single_example(record, spec)
        example = {name: tf.cast(t, tf.int32) for name, t in example.items()}
        features = {name: example[name] for name in MODEL_INPUTS}
        if is_training:
            return features, {name: example[name] for name in LABELS}
        return features

    if is_training:
        return records.training_dataset(input_file, decode, batch_size, shuffle_buffer, seed, input_context,
                                        repeat_first=True, drop_remainder=drop_remainder)
    return records.reading_dataset(input_file, decode, batch_size, drop_remainder)


def span_loss(labels, outputs):
    """The original's loss per example: mean of the start and end cross-entropies. [B] float32."""
    def cross_entropy(logits, positions):
        logits = tf.cast(logits, tf.float32)
        one_hot = tf.one_hot(positions, depth=tf.shape(logits)[-1], dtype=tf.float32)
        return -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits, axis=-1), axis=-1)

    start = cross_entropy(outputs["start_logits"], labels["start_positions"])
    end = cross_entropy(outputs["end_logits"], labels["end_positions"])
    return (start + end) / 2.0


def raw_results(features, output_batches):
    """Pairs features (in written order) with per-batch model outputs -> list of RawResult (Python floats)."""
    results = []
    batches = iter(output_batches)
    for outputs in batches:
        start = np.asarray(outputs["start_logits"], np.float32)
        end = np.asarray(outputs["end_logits"], np.float32)
        for row in range(start.shape[0]):
            if len(results) >= len(features):
                raise ValueError(f"The model returned more results than the {len(features)} features.")
            if len(results) % 1000 == 0:
                logging.info("Processing example: %d", len(results))
            results.append(RawResult(unique_id=features[len(results)].unique_id,
                                     start_logits=start[row].tolist(), end_logits=end[row].tolist()))
    if len(results) != len(features):
        raise ValueError(f"Got {len(results)} results for {len(features)} features.")
    return results


# ------------------------------------------------------------------------------------------------------------
# Post-processing
# ------------------------------------------------------------------------------------------------------------

_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestPrediction = collections.namedtuple("NbestPrediction", ["text", "start_logit", "end_logit"])


def _get_best_indexes(logits, n_best_size):
    """Indexes of the n_best_size largest logits, largest first (ties: lower index first)."""
    index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
    """Softmax of a list of floats (max-shifted), as the original computes it; [] for []."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for x in exp_scores:
        total_sum += x
    return [x / total_sum for x in exp_scores]


def _strip_spaces(text):
    ns_chars = []
    ns_to_s_map = collections.OrderedDict()
    for i, c in enumerate(text):
        if c == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


_BASIC_TOKENIZERS = {}


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Projects the normalized predicted text back onto the original text.

    `orig_text` (the whole words the span covers, e.g. "Steve Smith's") is basic-tokenized; if, with spaces
    removed, it has as many characters as the original, the characters are aligned one to one and the span of
    `pred_text` ("steve smith") is cut from the original ("Steve Smith"). When the alignment fails, `orig_text`
    is returned.
    """
    tokenizer = _BASIC_TOKENIZERS.get(do_lower_case)
    if tokenizer is None:
        tokenizer = _BASIC_TOKENIZERS[do_lower_case] = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(tokenizer.tokenize(orig_text))

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text, tok_ns_text)
        return orig_text

    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}

    orig_start_position = None
    if start_position in tok_s_to_ns_map:
        orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map[start_position])
    if orig_start_position is None:
        if verbose_logging:
            logging.info("Couldn't map start position")
        return orig_text

    orig_end_position = None
    if end_position in tok_s_to_ns_map:
        orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map[end_position])
    if orig_end_position is None:
        if verbose_logging:
            logging.info("Couldn't map end position")
        return orig_text

    return orig_text[orig_start_position:(orig_end_position + 1)]


def _span_text(example, feature, pred, do_lower_case, verbose_logging):
    """The original text of a non-null candidate span."""
    tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
    # Undo the WordPiece split, then normalize whitespace.
    tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_text = " ".join(orig_tokens)
    return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
                        version_2_with_negative=False, null_score_diff_threshold=0.0, verbose_logging=False):
    """The original write_predictions' computation, without the files.

    Returns (predictions, nbest, null_odds): OrderedDicts keyed by qas_id of the answer text, the n-best list
    (dicts text/probability/start_logit/end_logit) and, for v2, null score - best non-null score.
    """
    example_index_to_features = collections.defaultdict(list)
    for feature in all_features:
        example_index_to_features[feature.example_index].append(feature)
    unique_id_to_result = {result.unique_id: result for result in all_results}

    all_predictions = collections.OrderedDict()
    all_nbest_json = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()

    for example_index, example in enumerate(all_examples):
        features = example_index_to_features[example_index]

        prelim_predictions = []
        # The smallest null score (start + end logit at [CLS]) over the example's windows.
        score_null = 1000000
        min_null_feature_index = 0
        null_start_logit = 0
        null_end_logit = 0
        for feature_index, feature in enumerate(features):
            result = unique_id_to_result.get(feature.unique_id)
            if result is None:
                raise ValueError(f"No model result for feature {feature.unique_id} (example {example.qas_id!r}).")
            start_indexes = _get_best_indexes(result.start_logits, n_best_size)
            end_indexes = _get_best_indexes(result.end_logits, n_best_size)
            if version_2_with_negative:
                feature_null_score = result.start_logits[0] + result.end_logits[0]
                if feature_null_score < score_null:
                    score_null = feature_null_score
                    min_null_feature_index = feature_index
                    null_start_logit = result.start_logits[0]
                    null_end_logit = result.end_logits[0]
            num_tokens = len(feature.tokens)
            for start_index in start_indexes:
                for end_index in end_indexes:
                    # Drop spans in the question or padding, outside this window's max context, reversed or long.
                    if start_index >= num_tokens or end_index >= num_tokens:
                        continue
                    if start_index not in feature.token_to_orig_map or end_index not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(start_index, False):
                        continue
                    if end_index < start_index:
                        continue
                    if end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim_predictions.append(_PrelimPrediction(
                        feature_index=feature_index, start_index=start_index, end_index=end_index,
                        start_logit=result.start_logits[start_index], end_logit=result.end_logits[end_index]))

        if version_2_with_negative:
            prelim_predictions.append(_PrelimPrediction(
                feature_index=min_null_feature_index, start_index=0, end_index=0,
                start_logit=null_start_logit, end_logit=null_end_logit))
        prelim_predictions = sorted(prelim_predictions, key=lambda x: (x.start_logit + x.end_logit), reverse=True)

        seen_predictions = {}
        nbest = []
        for pred in prelim_predictions:
            if len(nbest) >= n_best_size:
                break
            if pred.start_index > 0:  # a non-null prediction
                final_text = _span_text(example, features[pred.feature_index], pred, do_lower_case,
                                        verbose_logging)
                if final_text in seen_predictions:
                    continue
                seen_predictions[final_text] = True
            else:
                final_text = ""
                seen_predictions[final_text] = True
            nbest.append(_NbestPrediction(text=final_text, start_logit=pred.start_logit,
                                          end_logit=pred.end_logit))

        # Include the empty answer in a v2 n-best list if it is not there yet.
        if version_2_with_negative and "" not in seen_predictions:
            nbest.append(_NbestPrediction(text="", start_logit=null_start_logit, end_logit=null_end_logit))
        # Should no span be valid at all, a nonce prediction.
        if not nbest:
            nbest.append(_NbestPrediction(text="empty", start_logit=0.0, end_logit=0.0))

        total_scores = []
        best_non_null_entry = None
        for entry in nbest:
            total_scores.append(entry.start_logit + entry.end_logit)
            if not best_non_null_entry and entry.text:
                best_non_null_entry = entry

        probs = _compute_softmax(total_scores)
        nbest_json = []
        for i, entry in enumerate(nbest):
            output = collections.OrderedDict()
            output["text"] = entry.text
            output["probability"] = probs[i]
            output["start_logit"] = entry.start_logit
            output["end_logit"] = entry.end_logit
            nbest_json.append(output)

        if not version_2_with_negative:
            all_predictions[example.qas_id] = nbest_json[0]["text"]
        else:
            if best_non_null_entry is None:
                # No span survived at all (the original crashes here): the answer can only be null.
                scores_diff_json[example.qas_id] = NO_ANSWER_SCORE_DIFF
                all_predictions[example.qas_id] = ""
            else:
                # Predict "" iff null score - best non-null score > threshold.
                score_diff = score_null - best_non_null_entry.start_logit - best_non_null_entry.end_logit
                scores_diff_json[example.qas_id] = score_diff
                if score_diff > null_score_diff_threshold:
                    all_predictions[example.qas_id] = ""
                else:
                    all_predictions[example.qas_id] = best_non_null_entry.text

        all_nbest_json[example.qas_id] = nbest_json

    return all_predictions, all_nbest_json, scores_diff_json


def write_json(obj, path):
    """JSON as the original writes it (indent 4, trailing newline), via a temporary file and rename."""
    result_files.write_text_atomically(path, json.dumps(obj, indent=4) + "\n")


def write_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
                      output_prediction_file, output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0, verbose_logging=False):
    """The original write_predictions: computes the predictions and writes predictions.json, the n-best file
    and, for v2, the null log-odds file. Returns (predictions, nbest, null_odds)."""
    logging.info("Writing predictions to: %s", output_prediction_file)
    logging.info("Writing nbest to: %s", output_nbest_file)
    predictions, nbest, null_odds = compute_predictions(
        all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
        version_2_with_negative, null_score_diff_threshold, verbose_logging)
    write_json(predictions, output_prediction_file)
    write_json(nbest, output_nbest_file)
    if version_2_with_negative:
        write_json(null_odds, output_null_log_odds_file)
    return predictions, nbest, null_odds


# ------------------------------------------------------------------------------------------------------------
# Whole jobs
# ------------------------------------------------------------------------------------------------------------

def write_train_features(examples, tokenizer, output_file, max_seq_length, doc_stride, max_query_length):
    """Converts training examples straight into a TFRecord file (atomically). Returns the number of features."""
    with FeatureWriter(output_file, is_training=True) as writer:
        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                     is_training=True, output_fn=writer.process_feature)
    return writer.num_features


def write_eval_features(examples, tokenizer, output_file, max_seq_length, doc_stride, max_query_length):
    """Converts prediction examples into a TFRecord file (atomically) and returns the features (for
    post-processing)."""
    features = []
    with FeatureWriter(output_file, is_training=False) as writer:
        def append(feature):
            features.append(feature)
            writer.process_feature(feature)
        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                     is_training=False, output_fn=append)
    return features


def train(trainer, examples, tokenizer, output_dir, max_seq_length, doc_stride, max_query_length,
          train_batch_size, num_train_epochs, warmup_proportion, shuffle_seed=None):
    """The original's training run: pre-shuffle the examples (random.Random(12345)), steps from the number of
    examples, features into output_dir/train.tf_record, then `trainer.train` (input order drawn from `shuffle_seed`;
    None: a seed drawn at random, kept in the checkpoints). Returns the last loss."""
    from bert_tf.training.trainer import compute_train_steps

    examples = list(examples)
    random.Random(12345).shuffle(examples)
    num_train_steps, num_warmup_steps = compute_train_steps(len(examples), train_batch_size, num_train_epochs,
                                                            warmup_proportion)
    train_file = os.path.join(output_dir, TRAIN_RECORD_FILE)
    num_features = write_train_features(examples, tokenizer, train_file, max_seq_length, doc_stride,
                                        max_query_length)
    logging.info("***** Running training *****")
    logging.info("  Num orig examples = %d", len(examples))
    logging.info("  Num split examples = %d", num_features)
    logging.info("  Batch size = %d", train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)

    def dataset_fn(batch_size, input_context=None, seed=None):
        return make_dataset(train_file, max_seq_length, True, batch_size, input_context=input_context, seed=seed)

    return trainer.train(dataset_fn, train_batch_size, num_train_steps, num_warmup_steps, seed=shuffle_seed)


def predict(predict_batches, examples, tokenizer, output_dir, max_seq_length, doc_stride, max_query_length,
            predict_batch_size, n_best_size, max_answer_length, do_lower_case, version_2_with_negative=False,
            null_score_diff_threshold=0.0, verbose_logging=False):
    """The original's prediction run: features into output_dir/eval.tf_record, the model over them
    (`predict_batches(dataset)` yields output dicts per batch, e.g. `Trainer.predict`), then predictions.json,
    nbest_predictions.json and (v2) null_odds.json in output_dir. Returns (predictions, nbest, null_odds)."""
    eval_file = os.path.join(output_dir, EVAL_RECORD_FILE)
    features = write_eval_features(examples, tokenizer, eval_file, max_seq_length, doc_stride, max_query_length)
    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(examples))
    logging.info("  Num split examples = %d", len(features))
    logging.info("  Batch size = %d", predict_batch_size)
    dataset = make_dataset(eval_file, max_seq_length, False, predict_batch_size)
    results = raw_results(features, predict_batches(dataset))
    return write_predictions(
        examples, features, results, n_best_size, max_answer_length, do_lower_case,
        os.path.join(output_dir, PREDICTIONS_FILE), os.path.join(output_dir, NBEST_FILE),
        os.path.join(output_dir, NULL_ODDS_FILE), version_2_with_negative, null_score_diff_threshold,
        verbose_logging)


def evaluate_predictions(dataset, predictions, null_odds=None, version_2_with_negative=False):
    """The official evaluation of predictions on a parsed SQuAD file with answers: v2.0 (with null_odds as the
    no-answer probabilities) when version_2_with_negative, else v1.1."""
    if version_2_with_negative:
        return squad_evaluate.evaluate_v2(dataset["data"], predictions, null_odds)
    return squad_evaluate.evaluate_v1(dataset["data"], predictions)
