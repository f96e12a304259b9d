"""The official SQuAD evaluation: v1.1 (exact match and F1) and v2.0 (plus HasAns/NoAns and best thresholds), answers
normalized the official way (lower case; punctuation, a/an/the and extra whitespace removed), each prediction scoring
its best over the gold answers.

* v1.1 (`evaluate_v1`): percent over every question; unanswered scores 0; F1 is 0 without a shared token.
* v2.0 (`evaluate_v2`): gold answers normalizing to "" are dropped, a question without any has the gold answer "", and
  F1 of two empty answers is 1; a prediction whose no-answer probability (`na_probs`) exceeds `na_prob_thresh` counts
  as "no answer". Questions without a prediction are left out (the official script crashes on them).

No TensorFlow for local files.
"""
import collections
import json
import re
import string

from absl import logging

from bert_tf import fileio

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s):
    """Lower case, drop punctuation, the articles a/an/the and extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def get_tokens(s):
    return normalize_answer(s).split() if s else []


# v1.1

def f1_score_v1(prediction, ground_truth):
    """v2.0's `compute_f1`, but 0 where either answer normalizes to nothing."""
    if not (get_tokens(prediction) and get_tokens(ground_truth)):
        return 0
    return compute_f1(ground_truth, prediction)


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate_v1(dataset, predictions):
    """The official v1.1 evaluate(): `dataset` is the "data" list, `predictions` {qid: text}."""
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    logging.warning("Unanswered question %s will receive score 0.", qa["id"])
                    continue
                ground_truths = [answer["text"] for answer in qa["answers"]]
                if not ground_truths:
                    logging.warning("Question %s has no gold answer; it scores 0.", qa["id"])
                    continue
                prediction = predictions[qa["id"]]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score_v1, prediction, ground_truths)
    if total == 0:
        raise ValueError("The dataset has no questions.")
    return collections.OrderedDict([("exact_match", 100.0 * exact_match / total), ("f1", 100.0 * f1 / total)])


# v2.0

def make_qid_to_has_ans(dataset):
    return {qa["id"]: bool(qa["answers"]) for article in dataset for p in article["paragraphs"] for qa in p["qas"]}


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, F1 is 1 if they agree, 0 otherwise.
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset, preds):
    """({qid: exact}, {qid: f1}) for the questions that have a prediction."""
    exact_scores = {}
    f1_scores = {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                # A question without an answer: the only correct prediction is the empty string.
                gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
                if qid not in preds:
                    logging.warning("Missing prediction for %s", qid)
                    continue
                a_pred = preds[qid]
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s for qid, s in scores.items()}


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    qid_list = list(exact_scores) if qid_list is None else qid_list
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total),
    ])


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval[f"{prefix}_{k}"] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """(best score in percent, threshold): predicting "no answer" above the threshold, best over thresholds."""
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    """The official v2.0 evaluation. `dataset`: the "data" list; `preds` {qid: text}; `na_probs` {qid: float} (optional;
    needed for best_*)."""
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    exact_raw, f1_raw = get_raw_scores(dataset, preds)
    if not exact_raw:
        raise ValueError("No question of the dataset has a prediction.")
    given_na_probs = na_probs is not None
    if not given_na_probs:
        na_probs = dict.fromkeys(preds, 0.0)
    missing = [qid for qid in exact_raw if qid not in na_probs]
    if missing:
        raise ValueError(f"The no-answer probabilities lack {len(missing)} question(s), e.g. {missing[0]!r}.")
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v and k in exact_raw]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v and k in exact_raw]
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids), "HasAns")
    if no_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids), "NoAns")
    if given_na_probs:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            out_eval[f"best_{name}"], out_eval[f"best_{name}_thresh"] = find_best_thresh(preds, raw, na_probs,
                                                                                      qid_to_has_ans)
    return out_eval


# Files

def _load_json(path, what):
    raw = fileio.read_bytes(path, what)
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (byte offset {e.start}).") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno} (char {e.pos}): "
                         f"{e.msg}") from None


def _check_mapping(obj, path, what):
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a JSON object mapping question ids to {what}.")
    return obj


def detect_version(dataset_json):
    """"2.0" for a SQuAD 2.0 file (version "v2.0" or questions with is_impossible), else "1.1"."""
    if str(dataset_json.get("version", "")).lstrip("v").startswith("2"):
        return "2.0"
    v2 = any("is_impossible" in qa for article in dataset_json.get("data", []) for p in article.get("paragraphs", [])
             for qa in p.get("qas", []))
    return "2.0" if v2 else "1.1"


def evaluate_files(data_file, pred_file, na_prob_file=None, version="auto", na_prob_thresh=1.0):
    """Evaluates a predictions file against a SQuAD file; -> the metrics. `version`: "1.1", "2.0" or "auto" (2.0 for a
    v2 file or with a na_prob_file)."""
    dataset_json = _load_json(data_file, "SQuAD data file")
    if not isinstance(dataset_json, dict) or not isinstance(dataset_json.get("data"), list):
        raise ValueError(f"{data_file}: expected a JSON object with a \"data\" list (the SQuAD format).")
    preds = _check_mapping(_load_json(pred_file, "Predictions file"), pred_file, "answer texts")
    na_probs = None
    if na_prob_file:
        na_probs = _check_mapping(_load_json(na_prob_file, "No-answer probability file"), na_prob_file,
                                  "no-answer probabilities")
    if version == "auto":
        version = "2.0" if na_probs is not None else detect_version(dataset_json)
    if version == "1.1":
        if na_probs is not None:
            raise ValueError("A na_prob_file needs the v2.0 evaluation.")
        return evaluate_v1(dataset_json["data"], preds)
    if version == "2.0":
        return evaluate_v2(dataset_json["data"], preds, na_probs, na_prob_thresh)
    raise ValueError(f"Unknown SQuAD evaluation version {version!r}; expected 1.1, 2.0 or auto.")
