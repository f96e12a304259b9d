"""SQuAD post-processing, as the original write_predictions: each example's n-best spans across its windows, mapped back
to the original text (`get_final_text`), softmaxed and (v2) compared with the null score, written as the original's JSON
files.

One deliberate difference: with version_2_with_negative, when no non-null span survives the filters the original
crashes; here the prediction is "", its n-best list [""], and its null odds the largest finite float.
"""
import collections
import json
import math
import sys

import numpy as np
from absl import logging

from bert_tf import fileio
from bert_tf.text import tokenization

NO_ANSWER_SCORE_DIFF = sys.float_info.max  # the null odds of an example without a non-null candidate
PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def raw_results(features, output_batches):
    """Pairs features (in written order) with per-batch model outputs -> [RawResult] (Python floats)."""
    rows = [row for outputs in output_batches for row in zip(np.asarray(outputs["start_logits"], np.float32),
                                                              np.asarray(outputs["end_logits"], np.float32))]
    if len(rows) != len(features):
        raise ValueError(f"Got {len(rows)} results for {len(features)} features.")
    for count in range(0, len(rows), 1000):  # the original's progress log
        logging.info("Processing example: %d", count)
    return [RawResult(feature.unique_id, start.tolist(), end.tolist()) for feature, (start, end) in zip(features, rows)]


_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])


_NbestPrediction = collections.namedtuple("NbestPrediction", ["text", "start_logit", "end_logit", "span"],
                                          defaults=(None,))


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
    """Projects the normalized `pred_text` ("steve smith") back onto `orig_text` ("Steve Smith's") -> "Steve Smith";
    `orig_text` where the alignment fails."""
    start, end = final_span(pred_text, orig_text, do_lower_case, verbose_logging)
    return orig_text[start:end]


def final_span(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """`get_final_text`'s answer as (start, end) in `orig_text` (all of it where the alignment fails)."""
    tokenizer = _BASIC_TOKENIZERS.get(do_lower_case)
    if tokenizer is None:
        tokenizer = _BASIC_TOKENIZERS[do_lower_case] = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(tokenizer.tokenize(orig_text))

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return 0, len(orig_text)
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text, tok_ns_text)
        return 0, len(orig_text)

    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}

    orig_start_position = None
    if start_position in tok_s_to_ns_map:
        orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map[start_position])
    if orig_start_position is None:
        if verbose_logging:
            logging.info("Couldn't map start position")
        return 0, len(orig_text)

    orig_end_position = None
    if end_position in tok_s_to_ns_map:
        orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map[end_position])
    if orig_end_position is None:
        if verbose_logging:
            logging.info("Couldn't map end position")
        return 0, len(orig_text)

    return orig_start_position, orig_end_position + 1


def _span_text(example, feature, pred, do_lower_case, verbose_logging):
    """(the original text of a non-null candidate span, its place: (first word, last word) of the
    example's doc_tokens, (start, end) of the text in those words joined by single spaces)."""
    tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
    # Undo the WordPiece split, then normalize whitespace.
    tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_text = " ".join(orig_tokens)
    start, end = final_span(tok_text, orig_text, do_lower_case, verbose_logging)
    return orig_text[start:end], (orig_doc_start, orig_doc_end, start, end)


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
                        version_2_with_negative=False, null_score_diff_threshold=0.0, verbose_logging=False,
                        answer_spans=None):
    """The original write_predictions without the files -> (predictions, nbest, null_odds) by qas_id: the answer text,
    the n-best dicts, (v2) null minus best non-null score.
    `answer_spans` gets each (`_span_text`'s place or None, probability)."""
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
                final_text, span = _span_text(example, features[pred.feature_index], pred, do_lower_case,
                                              verbose_logging)
                if final_text in seen_predictions:
                    continue
                seen_predictions[final_text] = True
            else:
                final_text, span = "", None
                seen_predictions[final_text] = True
            nbest.append(_NbestPrediction(text=final_text, start_logit=pred.start_logit,
                                          end_logit=pred.end_logit, span=span))

        # Include the empty answer in a v2 n-best list if it is not there yet.
        if version_2_with_negative and "" not in seen_predictions:
            nbest.append(_NbestPrediction(text="", start_logit=null_start_logit, end_logit=null_end_logit))
        # Should no span be valid at all, a nonce prediction.
        if not nbest:
            nbest.append(_NbestPrediction(text="empty", start_logit=0.0, end_logit=0.0))

        probs = _compute_softmax([entry.start_logit + entry.end_logit for entry in nbest])
        best_non_null_entry = next((entry for entry in nbest if entry.text), None)
        nbest_json = [{"text": entry.text, "probability": probability, "start_logit": entry.start_logit,
                       "end_logit": entry.end_logit} for entry, probability in zip(nbest, probs)]

        predicted = nbest[0]
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
            predicted = next(entry for entry in nbest if entry.text == all_predictions[example.qas_id])
        if answer_spans is not None:
            answer_spans[example.qas_id] = (predicted.span, probs[nbest.index(predicted)])

        all_nbest_json[example.qas_id] = nbest_json

    return all_predictions, all_nbest_json, scores_diff_json


def write_json(obj, path):
    """JSON as the original writes it (indent 4, trailing newline), atomically."""
    fileio.write_text_atomically(path, json.dumps(obj, indent=4) + "\n")


def write_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
                      output_prediction_file, output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0, verbose_logging=False):
    """The original write_predictions: writes predictions.json, the n-best file and (v2) the null log-odds file; ->
    (predictions, nbest, null_odds)."""
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
