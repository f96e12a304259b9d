import json
import logging
import math
import os
import sys

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier

from bert_tf import checkpoints, fileio
from bert_tf.model.config import BertConfig
from bert_tf.model.task_models import BertSpanLabeler
from bert_tf.tasks import runner, squad
from bert_tf.tasks.squad import evaluate as ev
from bert_tf.tasks.squad import postprocess
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_SQUAD = os.path.join(REPO, "run_scripts", "run_squad.py")
EVALUATE = os.path.join(REPO, "run_scripts", "evaluate_squad.py")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "went", "to", "store", "and", "bought", "a",
         "gallon", "of", "milk", "##s", "what", "did", "he", "buy", "?", "(", ")", "1895", "-", "1943", ".", "john",
         "smith", "born", "year", "was", "who", "steve", "'", "s", "house", "when", "where", "is"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB))
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def _squad(paragraphs, version="1.1"):
    """paragraphs: [(context, [qa dict, ...])]."""
    return {"version": version, "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas} for context, qas in paragraphs]}]}


def _qa(qid, question, answers=(), is_impossible=None):
    qa = {"id": qid, "question": question, "answers": [{"text": t, "answer_start": s} for t, s in answers]}
    if is_impossible is not None:
        qa["is_impossible"] = is_impossible
    return qa


DOC = "the man went to the store and bought a gallon of milk"


# ------------------------------------------------------------------------------------------------------------
# Reading and features
# ------------------------------------------------------------------------------------------------------------

def test_split_paragraph_maps_characters_to_words():
    tokens, offsets = squad.split_paragraph(" ab  c\u202fd\te\n")
    assert tokens == ["ab", "c", "d", "e"]
    assert offsets == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3]


def test_raw_results_pair_features_with_outputs_and_log_as_the_original(caplog):
    features = [squad.InputFeatures(unique_id=1000000000 + i, example_index=i, doc_span_index=0, tokens=[],
                                    token_to_orig_map={}, token_is_max_context={}, input_ids=[], input_mask=[],
                                    segment_ids=[]) for i in range(2001)]
    batches = [{"start_logits": np.full([n, 2], i, np.float32), "end_logits": np.zeros([n, 2], np.float32)}
               for i, n in enumerate((1000, 1001))]
    with caplog.at_level(logging.INFO):
        results = postprocess.raw_results(features, batches)
    assert [(r.unique_id, r.start_logits) for r in results[999:1001]] == [(1000000999, [0.0, 0.0]),
                                                                          (1000001000, [1.0, 1.0])]
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Processing example")] == [
        "Processing example: 0", "Processing example: 1000", "Processing example: 2000"]
    with pytest.raises(ValueError, match="Got 2001 results for 2000 features"):
        postprocess.raw_results(features[:-1], batches)


def test_sliding_windows_and_max_context(tokenizer, caplog):
    # 12 doc tokens; question truncated to 3 tokens; max_seq_length 11 leaves 5 doc tokens per window, stride 3.
    example = squad.SquadExample("q", "what did he buy ?", DOC.split(), "bought", 7, 7)
    features = squad.convert_examples_to_features([example], tokenizer, max_seq_length=11, doc_stride=3,
                                                  max_query_length=3, is_training=True)
    assert [r.getMessage() for r in caplog.records if "cut" in r.getMessage()] == [
        "The questions: 1 of 1 texts (100.0%) were longer than max_query_length 3 and were cut, losing 40.0% of "
        "their tokens; a larger --max_query_length keeps them."]
    assert [f.unique_id for f in features] == [1000000000, 1000000001, 1000000002, 1000000003]
    assert [f.doc_span_index for f in features] == [0, 1, 2, 3]
    words = DOC.split()
    for feature, start in zip(features, [0, 3, 6, 9]):
        n = min(5, 12 - start)
        assert feature.tokens == ["[CLS]", "what", "did", "he", "[SEP]"] + words[start:start + n] + ["[SEP]"]
        assert feature.token_to_orig_map == {5 + i: start + i for i in range(n)}
        assert feature.segment_ids == [0] * 5 + [1] * (n + 1) + [0] * (5 - n)
        assert feature.input_mask == [1] * (n + 6) + [0] * (5 - n)
        assert feature.input_ids == tokenizer.convert_tokens_to_ids(feature.tokens) + [0] * (5 - n)
    # Hand-computed: score = min(left, right) + 0.01 * span length, best span wins.
    assert [list(f.token_is_max_context.values()) for f in features] == [
        [True, True, True, True, False],
        [False, True, True, True, False],
        [False, True, True, True, False],
        [False, True, True]]
    # "bought" (doc token 7) lies in windows 1 and 2; the others point at [CLS].
    assert [(f.start_position, f.end_position) for f in features] == [(0, 0), (9, 9), (6, 6), (0, 0)]


def test_prediction_features_have_no_positions(tokenizer):
    example = squad.SquadExample("q", "what did he buy ?", DOC.split())
    (feature,) = squad.convert_examples_to_features([example], tokenizer, 32, 128, 8, is_training=False)
    assert feature.tokens[:7] == ["[CLS]", "what", "did", "he", "buy", "?", "[SEP]"]
    assert feature.start_position is None and len(feature.input_ids) == 32


def test_improved_answer_span_and_wordpieces(tokenizer):
    context = "john smith was born (1895-1943). milks"
    data = _squad([(context, [_qa("a", "when was he born ?", [("1895", context.index("1895"))]),
                               _qa("b", "what ?", [("milks", context.index("milks"))])])])
    examples, skipped = squad.examples_from_json(data, is_training=True)
    assert skipped == 0
    assert (examples[0].start_position, examples[0].end_position) == (4, 4)  # the word "(1895-1943)."
    features = squad.convert_examples_to_features(examples, tokenizer, 32, 128, 8, is_training=True)
    a, b = features
    # ( 1895 - 1943 ) . -> the answer is exactly "1895", not the whole word.
    assert a.tokens[a.start_position:a.end_position + 1] == ["1895"]
    assert b.tokens[b.start_position:b.end_position + 1] == ["milk", "##s"]
    doc_map = [b.token_to_orig_map[i] for i in sorted(b.token_to_orig_map)]
    assert doc_map == [0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 5, 5]


def test_unrecoverable_answers_are_skipped_and_counted(tmp_path, caplog):
    data = _squad([(DOC, [_qa("ok", "what ?", [("bought", 30)]),
                          _qa("moved", "what ?", [("milk", 4)]),          # points at "man"
                          _qa("outside", "what ?", [("milk", 400)]),      # beyond the paragraph
                          _qa("empty", "what ?", [("", 3)])])])
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    examples = squad.read_squad_examples(str(path), is_training=True)
    assert [e.qas_id for e in examples] == ["ok"]
    assert "Skipped 3 question(s)" in caplog.text
    # Prediction does not look at answers.
    assert len(squad.read_squad_examples(str(path), is_training=False)) == 4


def test_v2_training_examples(tokenizer):
    data = _squad([(DOC, [_qa("no", "who ?", [], is_impossible=True),
                          _qa("yes", "what ?", [("milk", DOC.index("milk"))], is_impossible=False)])], "v2.0")
    examples, _ = squad.examples_from_json(data, is_training=True, version_2_with_negative=True)
    assert [(e.is_impossible, e.start_position, e.orig_answer_text) for e in examples] == [
        (True, -1, ""), (False, 11, "milk")]
    no, yes = squad.convert_examples_to_features(examples, tokenizer, 24, 128, 8, is_training=True)
    assert (no.start_position, no.end_position, no.is_impossible) == (0, 0, True)
    assert yes.tokens[yes.start_position] == "milk"
    with pytest.raises(ValueError, match="exactly 1 answer"):
        squad.examples_from_json(data, is_training=True, version_2_with_negative=False)


def test_bad_squad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="SQuAD file not found: .*nope.json"):
        squad.read_squad_examples(str(tmp_path / "nope.json"), False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n  {"paragraphs": [}\n]}')
    with pytest.raises(squad.SquadFormatError, match=r"bad.json: malformed JSON at line 2, column 19"):
        squad.read_squad_examples(str(bad), False)
    bad.write_text('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "q1"}]}]}]}')
    with pytest.raises(squad.SquadFormatError, match=r"data\[0\].paragraphs\[0\].qas\[0\] has no \"question\""):
        squad.read_squad_examples(str(bad), False)
    bad.write_text('[1, 2]')
    with pytest.raises(squad.SquadFormatError, match="\"data\" list"):
        squad.read_squad_examples(str(bad), False)
    bad.write_text(json.dumps(_squad([(DOC, [])])))
    with pytest.raises(squad.SquadFormatError, match=r"bad.json: no questions to predict"):
        squad.read_predict_file(str(bad))


def test_window_settings_are_checked_up_front(tokenizer):
    with pytest.raises(ValueError, match=r"max_seq_length \(67\) must be greater than max_query_length \(64\) \+ 3"):
        squad.validate_lengths(67, 64, 128)
    squad.validate_lengths(68, 64, 128)
    with pytest.raises(ValueError, match="only trained up to sequence length 512"):
        squad.validate_lengths(513, 64, 128, 512)
    with pytest.raises(ValueError, match="doc_stride"):
        squad.validate_lengths(384, 64, 0)
    with pytest.raises(ValueError, match="must be greater than max_query_length"):
        squad.convert_examples_to_features([], tokenizer, 10, 2, 7, False)


def test_tfrecords_have_the_original_schema_and_are_written_atomically(tokenizer, tmp_path):
    example = squad.SquadExample("q", "what did he buy ?", DOC.split(), "bought", 7, 7)
    path = str(tmp_path / "train.tf_record")
    assert squad.write_train_features([example], tokenizer, path, 11, 3, 3).count == 4
    assert os.listdir(tmp_path) == ["train.tf_record"]  # no temporary left
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    assert sorted(records[1].features.feature) == ["end_positions", "input_ids", "input_mask", "is_impossible",
                                                   "segment_ids", "start_positions", "unique_ids"]
    f = records[1].features.feature
    assert f["unique_ids"].int64_list.value == [1000000001]
    assert (f["start_positions"].int64_list.value, f["end_positions"].int64_list.value) == ([9], [9])
    assert f["is_impossible"].int64_list.value == [0]
    features, labels = next(iter(squad.make_dataset(path, 11, True, batch_size=2, seed=1)))
    assert sorted(features) == ["input_ids", "input_mask", "segment_ids"] and features["input_ids"].shape == (2, 11)
    assert features["input_ids"].dtype == tf.int32 and sorted(labels) == ["end_positions", "start_positions"]

    eval_path = str(tmp_path / "eval.tf_record")
    feats = squad.write_eval_features([example], tokenizer, eval_path, 11, 3, 3)
    record = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(eval_path))).numpy())
    assert sorted(record.features.feature) == ["input_ids", "input_mask", "segment_ids", "unique_ids"]
    batches = list(squad.make_dataset(eval_path, 11, False, batch_size=3))
    assert [b["input_ids"].shape[0] for b in batches] == [3, 1]
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches]),
                                  [f.input_ids for f in feats])

    # A failure while writing leaves neither the file nor the temporary.
    broken = str(tmp_path / "broken.tf_record")
    with pytest.raises(RuntimeError):
        with squad.FeatureWriter(broken, is_training=False) as writer:
            writer.process_feature(feats[0])
            raise RuntimeError("boom")
    assert not os.path.exists(broken) and not [f for f in os.listdir(tmp_path) if fileio.TEMP_MARK in f]


def test_span_loss_is_the_originals():
    rng = np.random.RandomState(0)
    start, end = rng.randn(3, 7).astype(np.float32), rng.randn(3, 7).astype(np.float32)
    sp, ep = np.array([0, 3, 6]), np.array([1, 3, 2])
    loss = squad.span_loss({"start_positions": tf.constant(sp), "end_positions": tf.constant(ep)},
                           {"start_logits": tf.constant(start), "end_logits": tf.constant(end)}).numpy()

    def ce(logits, positions):
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -logp[np.arange(3), positions]
    np.testing.assert_allclose(loss, (ce(start, sp) + ce(end, ep)) / 2, rtol=1e-5)


# ------------------------------------------------------------------------------------------------------------
# Post-processing
# ------------------------------------------------------------------------------------------------------------

def test_helpers():
    assert postprocess._get_best_indexes([0.5, 2.0, -1.0, 2.0, 1.0], 3) == [1, 3, 4]  # ties: lower index first
    assert postprocess._compute_softmax([]) == []
    np.testing.assert_allclose(postprocess._compute_softmax([1.0, 2.0, 3.0]),
                               np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
    assert squad.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad.get_final_text("1895", "(1895-1943).", True) == "1895"
    assert squad.get_final_text("jose", "José's", True) == "José"
    # Alignment fails (accent stripped, cased model): the whole original text.
    assert squad.get_final_text("zzz", "Steve Smith's", True) == "Steve Smith's"


def _steve(tokenizer, n_windows_text="Steve Smith's house."):
    example = squad.SquadExample("q1", "who ?", n_windows_text.split())
    (feature,) = squad.convert_examples_to_features([example], tokenizer, 16, 128, 8, is_training=False)
    # [CLS] who ? [SEP] steve smith ' s house . [SEP] + 5 padding
    assert feature.tokens == ["[CLS]", "who", "?", "[SEP]", "steve", "smith", "'", "s", "house", ".", "[SEP]"]
    return example, feature


def _result(feature, starts, ends):
    start = [-10.0] * 16
    end = [-10.0] * 16
    for i, v in starts.items():
        start[i] = v
    for i, v in ends.items():
        end[i] = v
    return squad.RawResult(feature.unique_id, start, end)


def test_nbest_on_synthetic_logits(tokenizer):
    example, feature = _steve(tokenizer)
    result = _result(feature, {0: 1.0, 4: 3.0, 8: 1.0}, {0: 1.0, 5: 2.0, 9: 1.5})
    preds, nbest, odds = squad.compute_predictions([example], [feature], [result], n_best_size=3,
                                                   max_answer_length=30, do_lower_case=True)
    # Candidates from starts {4, 0, 8} x ends {5, 9, 0}: (4,5)=5.0, (4,9)=4.5, (8,9)=2.5 (others invalid).
    assert preds == {"q1": "Steve Smith"} and odds == {}
    assert [e["text"] for e in nbest["q1"]] == ["Steve Smith", "Steve Smith's house.", "house."]
    assert [(e["start_logit"], e["end_logit"]) for e in nbest["q1"]] == [(3.0, 2.0), (3.0, 1.5), (1.0, 1.5)]
    z = math.exp(0) + math.exp(-0.5) + math.exp(-2.5)
    assert [e["probability"] for e in nbest["q1"]] == pytest.approx([1 / z, math.exp(-0.5) / z, math.exp(-2.5) / z],
                                                                  abs=1e-15)
    assert list(nbest["q1"][0]) == ["text", "probability", "start_logit", "end_logit"]

    # max_answer_length 2 drops (4,9); n_best_size 1 keeps only the top start/end.
    preds, nbest, _ = squad.compute_predictions([example], [feature], [result], 3, 2, True)
    assert [e["text"] for e in nbest["q1"]] == ["Steve Smith", "house."]
    preds, nbest, _ = squad.compute_predictions([example], [feature], [result], 1, 30, True)
    assert [e["text"] for e in nbest["q1"]] == ["Steve Smith"] and nbest["q1"][0]["probability"] == 1.0

    # v2: the null score (2.0 at [CLS]) joins the n-best; predict "" iff null - best non-null > threshold.
    preds, nbest, odds = squad.compute_predictions([example], [feature], [result], 3, 30, True,
                                                   version_2_with_negative=True)
    assert [e["text"] for e in nbest["q1"]] == ["Steve Smith", "Steve Smith's house.", "house.", ""]
    assert odds == {"q1": 2.0 - 5.0} and preds == {"q1": "Steve Smith"}
    preds, _, _ = squad.compute_predictions([example], [feature], [result], 3, 30, True, True,
                                            null_score_diff_threshold=-3.5)
    assert preds == {"q1": ""}


def test_v2_without_any_surviving_span_does_not_crash(tokenizer, tmp_path):
    example, feature = _steve(tokenizer)
    # The top start/end logits all fall in the question or on [CLS]: no non-null span survives.
    result = _result(feature, {0: 2.0, 1: 5.0, 2: 4.0}, {0: 1.0, 1: 5.0, 2: 4.0})
    args = ([example], [feature], [result], 3, 30, True)
    files = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
    preds, nbest, odds = squad.write_predictions(*args, *files, version_2_with_negative=True)
    assert preds == {"q1": ""}
    assert nbest == {"q1": [{"text": "", "probability": 1.0, "start_logit": 2.0, "end_logit": 1.0}]}
    assert odds == {"q1": squad.NO_ANSWER_SCORE_DIFF}
    assert json.load(open(files[2])) == {"q1": sys.float_info.max}  # valid, finite JSON
    # v1 keeps the original's nonce answer.
    preds, nbest, _ = squad.compute_predictions(*args)
    assert preds == {"q1": "empty"} and nbest["q1"][0]["probability"] == 1.0


def test_multiple_windows_use_max_context_and_min_null(tokenizer):
    example = squad.SquadExample("q", "what did he buy ?", DOC.split())
    features = squad.convert_examples_to_features([example], tokenizer, 11, 3, 3, is_training=False)
    results = []
    for f in features:
        start = [0.0] * 11
        end = [0.0] * 11
        start[0], end[0] = 0.5, 0.5 + 0.1 * f.doc_span_index  # null scores 1.0, 1.1, 1.2, 1.3
        start[9] = 5.0  # the last doc token of windows 0-2 (never their max context), padding in window 3
        start[7], end[7] = 3.0, 3.0  # the third doc token of every window, its max context each time
        results.append(squad.RawResult(f.unique_id, start, end))
    preds, nbest, odds = squad.compute_predictions([example], features, results, 5, 30, True, True)
    # Equal scores keep window order: doc tokens 2, 5, 8 and 11, then the null answer.
    assert [e["text"] for e in nbest["q"]] == ["went", "store", "a", "milk", ""]
    assert odds["q"] == 1.0 - 6.0  # the smallest null score (window 0's) minus the best span's
    assert preds["q"] == "went"


# The largest |ours - golden| of the n-best probabilities and logits and the v2 null odds, measured on CPU
# (TF 2.20, float32): 7.2e-6 (v1.1), 9.5e-6 (v2, logits of magnitude ~10); the tolerance is 5x that.
SQUAD_GOLDEN_ATOL = 5e-5


def _assert_matches_squad_golden(out, data_dir, name):
    """predictions.json byte-identical to the golden; the n-best texts equal, their numbers and (v2) the null
    odds within SQUAD_GOLDEN_ATOL."""
    assert (out / "predictions.json").read_text() == open(os.path.join(data_dir, f"{name}_predictions.json")).read()
    golden = json.load(open(os.path.join(data_dir, f"{name}_nbest_predictions.json")))
    ours = json.load(open(out / "nbest_predictions.json"))
    assert list(ours) == list(golden)
    for qid in golden:
        assert [e["text"] for e in ours[qid]] == [e["text"] for e in golden[qid]], qid
    worst = max(abs(g[key] - o[key]) for qid in golden for g, o in zip(golden[qid], ours[qid])
                for key in ("probability", "start_logit", "end_logit"))
    if name == "squad_v2":
        golden = json.load(open(os.path.join(data_dir, "squad_v2_null_odds.json")))
        ours = json.load(open(out / "null_odds.json"))
        assert list(ours) == list(golden)
        worst = max(worst, max(abs(golden[q] - ours[q]) for q in golden))
    else:
        assert not (out / "null_odds.json").exists()
    assert worst <= SQUAD_GOLDEN_ATOL, worst


def test_golden_parity(golden_checkpoint, data_dir, tmp_path):
    """The original run_squad.py's SQuAD 1.1 outputs for the real MiniLM (goldens in tests/fixtures); the 2.0 ones:
    test_script_golden_parity_v2."""
    config = BertConfig.from_json_file(os.path.join(golden_checkpoint, "bert_config.json"))
    model = BertSpanLabeler(config)
    checkpoints.restore(model, os.path.join(golden_checkpoint, "bert_model.ckpt"))
    tokenizer = tokenization.FullTokenizer(os.path.join(golden_checkpoint, "vocab.txt"), True)

    def predict_batches(dataset):
        for batch in dataset:  # eager: quicker than tracing for a few batches
            yield {k: v.numpy() for k, v in model(batch, training=False).items()}

    examples = squad.read_squad_examples(os.path.join(data_dir, "squad_v11_dev.json"), False, False)
    squad.predict(predict_batches, examples, tokenizer, str(tmp_path), max_seq_length=128, doc_stride=64,
                  max_query_length=32, predict_batch_size=8, n_best_size=20, max_answer_length=30,
                  do_lower_case=True, version_2_with_negative=False, null_score_diff_threshold=0.0)
    _assert_matches_squad_golden(tmp_path, data_dir, "squad_v11")


def _golden_v2_runs(golden_checkpoint, data_dir, d):
    """The flags of run_squad.py predicting the SQuAD 2.0 golden questions into `d`."""
    return [[f"--vocab_file={golden_checkpoint}/vocab.txt", f"--bert_config_file={golden_checkpoint}/bert_config.json",
             f"--init_checkpoint={golden_checkpoint}/bert_model.ckpt", "--do_predict",
             f"--predict_file={data_dir}/squad_v2_dev.json", "--version_2_with_negative=True",
             "--null_score_diff_threshold=0.0", "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
             "--n_best_size=20", "--max_answer_length=30", f"--output_dir={d}"]]


def test_script_golden_parity_v2(script_runs, data_dir):
    """The script itself (Trainer, original checkpoint, flags) on the SQuAD 2.0 goldens."""
    tmp_path, errors = script_runs["golden_v2"]
    assert errors == [None]
    _assert_matches_squad_golden(tmp_path, data_dir, "squad_v2")
    metrics = json.load(open(tmp_path / "eval_results.json"))
    assert metrics["total"] == 8 and metrics["HasAns_total"] == 5 and metrics["NoAns_total"] == 3


# ------------------------------------------------------------------------------------------------------------
# Evaluation
# ------------------------------------------------------------------------------------------------------------

def test_normalization_and_scores():
    assert ev.normalize_answer("The  Cat's, a hat!") == "cats hat"
    assert ev.exact_match_score("the Cat", "cat.")
    # pred "black cat sat" vs gold "the cat sat down": common {cat, sat} -> P 2/3, R 2/3 (the dropped).
    assert ev.f1_score_v1("black cat sat", "the cat sat down") == pytest.approx(2 / 3)
    assert ev.f1_score_v1("", "") == 0  # v1.1: no common token
    assert ev.compute_f1("", "") == 1 and ev.compute_f1("a", "x") == 0  # v2.0: both empty agree
    assert ev.compute_f1("cat sat", "cat") == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_evaluate_v1_by_hand():
    data = _squad([("ctx", [_qa("a", "?", [("Denver Broncos", 0), ("the Broncos", 0)]),
                            _qa("b", "?", [("cat sat", 0)]),
                            _qa("c", "?", [("xyz", 0)])])])["data"]
    # a: exact via "the Broncos" -> 1, 1; b: "cat" -> EM 0, F1 2/3; c: missing -> 0, 0.
    result = ev.evaluate_v1(data, {"a": "Broncos", "b": "cat"})
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 * (1 + 2 / 3) / 3)}


def test_evaluate_v2_by_hand():
    data = _squad([("ctx", [_qa("h1", "?", [("blue car", 0)]), _qa("h2", "?", [("red", 0)]),
                            _qa("n1", "?", []), _qa("n2", "?", [])])], "v2.0")["data"]
    preds = {"h1": "blue", "h2": "red", "n1": "", "n2": "green"}
    # Raw: h1 EM 0 F1 2/3; h2 1/1; n1 1/1; n2 0/0.
    result = ev.evaluate_v2(data, preds)
    assert result == {"exact": 50.0, "f1": pytest.approx(100 * (2 / 3 + 2) / 4), "total": 4,
                      "HasAns_exact": 50.0, "HasAns_f1": pytest.approx(100 * (5 / 3) / 2), "HasAns_total": 2,
                      "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                            "NoAns_exact", "NoAns_f1", "NoAns_total"]
    # With no-answer probabilities: above na_prob_thresh (1.0) counts as "no answer" (n2 becomes right, h1 wrong).
    na = {"h1": 2.0, "h2": -1.0, "n1": 0.5, "n2": 3.0}
    result = ev.evaluate_v2(data, preds, na)
    assert result["exact"] == 75.0 and result["f1"] == pytest.approx(75.0)
    # Threshold sweep in na order h2(-1), n1(0.5), h1(2), n2(3) from 2 (both NoAns right):
    # exact: +1 -> 3 @-1, +0 -> 3, +0 -> 3, -1 -> 2: best 75 @ -1.0; f1: 3 @-1, 3, 3 + 2/3 @2.0, 2 + 2/3.
    assert result["best_exact"] == 75.0 and result["best_exact_thresh"] == -1.0
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and result["best_f1_thresh"] == 2.0


def test_evaluate_script(tmp_path):
    data = _squad([("ctx", [_qa("h1", "?", [("blue car", 0)]), _qa("n1", "?", [])])], "v2.0")
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.json").write_text(json.dumps({"h1": "blue car", "n1": "x"}))
    (tmp_path / "o.json").write_text(json.dumps({"h1": -2.0, "n1": 4.0}))
    result = forkserver.run([sys.executable, EVALUATE, str(tmp_path / "d.json"), str(tmp_path / "p.json"),
                             f"--na_prob_file={tmp_path / 'o.json'}", f"--out_file={tmp_path / 'e.json'}"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.load(open(tmp_path / "e.json"))
    assert metrics["exact"] == 100.0 and metrics["best_exact"] == 100.0 and metrics["best_exact_thresh"] == -2.0
    assert json.loads(result.stdout) == metrics
    (tmp_path / "p.json").write_text("{oops")
    result = forkserver.run([sys.executable, EVALUATE, f"--data_file={tmp_path / 'd.json'}",
                             f"--pred_file={tmp_path / 'p.json'}"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1 and "p.json: malformed JSON at line 1, column 2" in result.stderr


# ------------------------------------------------------------------------------------------------------------
# The script
# ------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory, vocab_file):
    """A tiny encoder-only checkpoint (tests/tiny_classifier.py) in the original format, with its config and vocab."""
    out = tmp_path_factory.mktemp("tiny_release")
    tiny_classifier.write_tiny_release(out, VOCAB, seed=3)
    return out, vocab_file


def _bad_input_runs(tiny_release, tmp_path):
    """Bad inputs under `tmp_path` and the flags of the runs of `test_script_rejects_bad_input`."""
    release, vocab = tiny_release
    (tmp_path / "dev.json").write_text(json.dumps(_squad([(DOC, [_qa("d0", "what ?")])])))
    (tmp_path / "bad.json").write_text('{"data": [{"paragraphs": [{"context": "x", "qas": [}]}]}')
    (tmp_path / "empty.json").write_text(json.dumps(_squad([(DOC, [])])))
    train = _squad([(DOC, [_qa("t0", "what ?", [("milk", DOC.index("milk"))])])])
    (tmp_path / "train.json").write_text(json.dumps(train))
    model = [f"--vocab_file={vocab}", f"--bert_config_file={release}/bert_config.json",
             f"--init_checkpoint={release}/bert_model.ckpt", f"--output_dir={tmp_path}/out", "--max_query_length=8"]
    predict = model + ["--do_predict", f"--predict_file={tmp_path}/dev.json", "--max_seq_length=32"]
    return [
        predict[:-1] + ["--max_seq_length=40", "--max_query_length=37"],
        predict[:-1] + ["--max_seq_length=128"],
        model + ["--do_predict", f"--predict_file={tmp_path}/missing.json"],
        model + ["--max_seq_length=32"],
        model + ["--do_train", "--max_seq_length=32"],
        model + ["--do_train", f"--train_file={tmp_path}/bad.json", "--max_seq_length=32"],
        predict,  # an encoder-only checkpoint: no trained span head to predict with
        # A predict_file without questions: an error before training.
        model + ["--do_train", f"--train_file={tmp_path}/train.json", "--do_predict",
                 f"--predict_file={tmp_path}/empty.json", "--max_seq_length=32"],
        # Evaluation while training: the official evaluation of --predict_file's predictions, which need answers.
        model + ["--do_train", f"--train_file={tmp_path}/train.json", "--eval_every_steps=2"],
        predict + ["--do_train", f"--train_file={tmp_path}/train.json", "--eval_every_steps=2"],
    ]


def test_script_rejects_bad_input(script_runs):
    tmp_path, errors = script_runs["bad_input"]
    assert "max_seq_length (40) must be greater than max_query_length (37) + 3" in errors[0]
    assert "only trained up to sequence length 64" in errors[1]
    assert "--predict_file not found" in errors[2]
    assert "At least one of `do_train` or `do_predict`" in errors[3]
    assert "`train_file` must be specified" in errors[4]
    assert "bad.json: malformed JSON at line 1, column 52" in errors[5]
    assert "no trained span head" in errors[6] and "cls/squad/output_weights" in errors[6]
    assert errors[7] == f"SquadFormatError: {tmp_path}/empty.json: no questions to predict (every paragraph's " \
                        "\"qas\" list is empty, or \"data\" is)."
    assert errors[8] == "ValueError: --eval_every_steps evaluates while training: it needs --do_train and --do_predict."
    assert errors[9] == (f"ValueError: --eval_every_steps evaluates the predictions of --predict_file="
                         f"{tmp_path}/dev.json with the official SQuAD evaluation: its questions need answers.")
    assert not (tmp_path / "out" / "train.tf_record").exists() and not (tmp_path / "out" / "predictions.json").exists()


def _assert_answers_are_the_runs(out):
    """bert_tf.load of the trained run in `out`: its predictions.json answers with their n-best probabilities, at
    their place in the context; under SQuAD 2.0 settings with a threshold no answer passes, the empty answer."""
    import bert_tf
    from bert_tf.tasks import answers

    model = bert_tf.load(str(out))
    assert model.settings["doc_stride"] == 4 and model.settings["max_query_length"] == 6
    questions = ["what did he buy ?", "where ?"]
    got = model.predict(questions, [DOC, DOC])
    predictions, nbest = (json.load(open(out / name)) for name in ("predictions.json", "nbest_predictions.json"))
    for answer, qid in zip(got, ["d0", "d1"]):
        assert answer["answer"] == predictions[qid] == DOC[answer["start"]:answer["end"]], (answer, qid)
        assert answer["score"] == pytest.approx(nbest[qid][0]["probability"], abs=1e-5)
    null = answers.SpanAnswerer(model.predictor, model.tokenizer, {
        "max_seq_length": 16, "do_lower_case": True, **model.settings, "version_2_with_negative": True,
        "null_score_diff_threshold": -1e9}, 8).predict(questions, [DOC, DOC])
    assert [(a["answer"], a["start"], a["end"]) for a in null] == [("", None, None)] * 2


def test_answers_lie_where_the_context_holds_them():
    """A SQuAD answer's words joined by single spaces (compute_predictions' answer_spans) found in
    the context as written: runs of spaces and line breaks, accents, no-break spaces (inside a word
    for SQuAD), CJK and emoji."""
    from bert_tf.tasks.answers import _context_span

    context = "  Le  café\u00a0noir\n\t😀 中国  ende"
    words = squad.split_paragraph(context)[0]
    assert words == ["Le", "café\u00a0noir", "😀", "中国", "ende"]
    for first, last, start, end, expected in [(0, 0, 0, 2, "Le"), (1, 2, 2, 11, "fé\u00a0noir\n\t😀"),
                                               (3, 4, 1, 6, "国  end"), (0, 4, 0, 22, context.strip())]:
        begin, stop = _context_span(context, (first, last, start, end))
        assert context[begin:stop] == expected, (first, last, start, end)


def _train_runs(tiny_release, tmp_path):
    """SQuAD files under `tmp_path`; the flags of a run training and predicting into tmp_path/out, then of one
    predicting from it as --init_checkpoint into tmp_path/elsewhere."""
    release, vocab = tiny_release
    train = _squad([(DOC, [_qa(f"t{i}", q, [(a, DOC.index(a))]) for i, (q, a) in enumerate(
        [("what did he buy ?", "milk"), ("who went ?", "the man"), ("where ?", "store"), ("what ?", "gallon")])])])
    (tmp_path / "train.json").write_text(json.dumps(train))
    dev = _squad([(DOC, [_qa("d0", "what did he buy ?", [("milk", DOC.index("milk"))]),
                         _qa("d1", "where ?", [("the store", DOC.index("the store"))])])])
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    common = [f"--vocab_file={vocab}", f"--bert_config_file={release}/bert_config.json",
              f"--predict_file={tmp_path}/dev.json", "--max_seq_length=16", "--doc_stride=4", "--max_query_length=6",
              "--predict_batch_size=3", "--do_predict"]
    return [[*common, f"--init_checkpoint={release}/bert_model.ckpt", "--do_train",
             f"--train_file={tmp_path}/train.json", "--train_batch_size=2", "--num_train_epochs=2",
             "--learning_rate=1e-3", "--seed=1", "--save_checkpoints_steps=2", f"--output_dir={tmp_path / 'out'}"],
            [*common, f"--init_checkpoint={tmp_path / 'out'}", f"--output_dir={tmp_path / 'elsewhere'}"]]


@pytest.fixture(scope="module")
def script_runs(tiny_release, golden_checkpoint, data_dir, tmp_path_factory, run_main):
    """The run_squad.py runs of the tests below, one after the other in one process: `_golden_v2_runs`,
    `_train_runs`, then `_bad_input_runs`. Returns {name: (its directory, its runs' errors)}."""
    dirs = {name: tmp_path_factory.mktemp(name) for name in ("golden_v2", "train", "bad_input")}
    argvs = {"golden_v2": _golden_v2_runs(golden_checkpoint, data_dir, dirs["golden_v2"]),
             "train": _train_runs(tiny_release, dirs["train"]),
             "bad_input": _bad_input_runs(tiny_release, dirs["bad_input"])}
    errors = run_main(RUN_SQUAD, *(argv for runs in argvs.values() for argv in runs))
    done = {}
    for name, runs in argvs.items():
        done[name], errors = (dirs[name], errors[:len(runs)]), errors[len(runs):]
    return done


@pytest.mark.slow
def test_script_trains_and_predicts(tiny_release, script_runs):
    """Trains and predicts; predicts again from output_dir (the fine-tuned model restored, plus the v2 outputs) and,
    in another output_dir, from the output_dir as --init_checkpoint (its span head, which the Trainer's checkpoints
    key only under optimizer/..., restored): the same n-best."""
    release, vocab = tiny_release
    tmp_path, errors = script_runs["train"]
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    assert errors == [None, None]
    for name in ("train.tf_record", "eval.tf_record", "predictions.json", "nbest_predictions.json",
                 "eval_results.json", "checkpoint"):
        assert (out / name).exists(), name
    _assert_answers_are_the_runs(out)
    assert not (out / "null_odds.json").exists()
    predictions = json.load(open(out / "predictions.json"))
    assert list(predictions) == ["d0", "d1"]
    nbest = json.load(open(out / "nbest_predictions.json"))
    metrics = json.load(open(out / "eval_results.json"))
    assert list(metrics) == ["exact_match", "f1"]
    # The official v1.1 scores of these predictions, derived here: lower case, no punctuation or articles, then
    # exact match and token-overlap F1 against the single gold answer of each question.
    gold = {"d0": "milk", "d1": "the store"}

    def words(text):
        return [w for w in "".join(c for c in text.lower() if c.isalnum() or c.isspace()).split()
                if w not in ("a", "an", "the")]

    def f1(pred, ref):
        common = sum(min(pred.count(w), ref.count(w)) for w in set(pred))
        return 2 * common / (len(pred) + len(ref)) if common else 0.0
    assert metrics["exact_match"] == pytest.approx(100 * np.mean([words(predictions[q]) == words(gold[q])
                                                                  for q in gold]))
    assert metrics["f1"] == pytest.approx(100 * np.mean([f1(words(predictions[q]), words(gold[q])) for q in gold]))
    # 4 examples / batch 2 x 2 epochs = 4 steps: checkpoints at 2 and 4.
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-4")
    restored = json.load(open(elsewhere / "nbest_predictions.json"))
    for qid in nbest:
        assert [e["text"] for e in restored[qid]] == [e["text"] for e in nbest[qid]]
        for a, b in zip(restored[qid], nbest[qid]):
            assert abs(a["start_logit"] - b["start_logit"]) < 1e-5 and abs(a["end_logit"] - b["end_logit"]) < 1e-5

    # Predicting again from output_dir restores the fine-tuned model (in this process, as the script runs): the same
    # n-best, plus the v2 outputs.
    runner.run(squad.SquadTask(predict_file=f"{tmp_path}/dev.json", doc_stride=4, max_query_length=6,
                               version_2_with_negative=True),
               runner.RunConfig(vocab_file=vocab, bert_config_file=f"{release}/bert_config.json", max_seq_length=16,
                                predict_batch_size=3, do_predict=True,
                                init_checkpoint=f"{release}/bert_model.ckpt", output_dir=str(out)))
    again = json.load(open(out / "nbest_predictions.json"))
    for qid in nbest:
        non_null = [e for e in again[qid] if e["text"]]
        assert [e["text"] for e in non_null][:3] == [e["text"] for e in nbest[qid]][:3]
        for a, b in zip(non_null[:3], nbest[qid][:3]):
            assert abs(a["start_logit"] - b["start_logit"]) < 1e-4
    assert set(json.load(open(out / "null_odds.json"))) == {"d0", "d1"}
    assert set(json.load(open(out / "eval_results.json"))) >= {"exact", "f1", "HasAns_exact", "best_f1_thresh"}
