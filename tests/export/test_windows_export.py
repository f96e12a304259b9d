"""Exports made with doc_stride (bert_tf.export.saved_model, preprocessing.pack_windows): the in-graph windows against
`packing.pack_windows`; the pooled outputs against the model run on windows built here from token ids and against
run_classifier.py's pooling (classifier tasks), and against `embeddings.SentenceEncoder(doc_stride=...)`
(embedding); the window options' refusals."""
import json
import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier
from saved_model_library import without_grappler  # noqa: F401 (a module fixture)

from bert_tf.export import exporter, saved_model
from bert_tf.inference import embeddings
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks.classifier.task import pool_document
from bert_tf.text import packing, preprocessing, tokenization

CLS_ID, SEP_ID = 2, 3
MAX_LEN, STRIDE = 8, 2  # the exports': a window holds 6 tokens of a single text, 3 beside a text_b of 2
LONG = "the cat sat on the mat fast , the dog ran on the big red mat"  # 16 tokens: 6 windows alone, 8 beside 2
SHORT = ["the dog sat", "", "a cat is happy"]
LABELS = ["x", "y", "z"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tiny_classifier's vocabulary and L=2, H=32 config, its FullTokenizer, and a model of a task with weights drawn
    from RandomState(0): `tiny["model"](task, **options)`."""
    vocab_file, config_file = tiny_classifier.write_tiny_model(tmp_path_factory.mktemp("tiny"))
    config = BertConfig.from_json_file(config_file)

    def model(task, **options):
        built = task_models.build_task_model(task, config, len(LABELS) if task != "embedding" else None, **options)
        rng = np.random.RandomState(0)
        built.set_weights([rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in built.get_weights()])
        return built
    return {"vocab": vocab_file, "model": model,
            "tokenizer": tokenization.FullTokenizer(vocab_file, do_lower_case=True)}


def export(tiny, model, task, directory, **options):
    """The version directory of `model`'s export with doc_stride STRIDE at MAX_LEN (unless `options` say)."""
    options = {"max_seq_length": MAX_LEN, "doc_stride": STRIDE, **options}
    return exporter.export(task, str(directory), model, vocab_file=tiny["vocab"],
                           label_list=LABELS if task != "embedding" else None, **options)


def windows_by_hand(tokenizer, text_a, text_b=""):
    """The inputs of each window of a text, built here: text_a's tokens in run_squad's spans (`packing.doc_spans_for`,
    checked against the original in tests/inference/test_windows.py), text_b whole in each."""
    a, b = tokenizer.tokenize(text_a), tokenizer.tokenize(text_b)
    room = MAX_LEN - (3 + len(b) if b else 2)
    rows = []
    for start, length in packing.doc_spans_for(len(a), room, STRIDE) if len(a) > room else [(0, len(a))]:
        tokens = ["[CLS]", *a[start:start + length], "[SEP]", *(b + ["[SEP]"] if b else [])]
        segments = [0] * (length + 2) + [1] * (len(tokens) - length - 2)
        rows.append(packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens), segments, MAX_LEN))
    return {name: tf.constant([row[i] for row in rows], tf.int32) for i, name in enumerate(packing.INPUT_NAMES)}


def test_in_graph_windows_equal_packing_windows():
    """preprocessing.pack_windows on random batches (lengths, strides, pairs, padding) gives packing.pack_windows'
    windows, row for row, the text of each, and as pooling_mask its sources (each token's max-context window)."""
    rng = random.Random(0)
    for trial in range(40):
        length, stride, pad = rng.randint(3, 14), rng.randint(1, 9), rng.random() < 0.3
        most = 80 if trial % 10 == 0 else 30  # now and then long texts: ties between a full and the last window
        texts_a = [[rng.randint(5, 40) for _ in range(rng.randint(0, most))] for _ in range(rng.randint(0, 5))]
        texts_b = [[rng.randint(5, 40) for _ in range(rng.randint(0, length - 4))] if trial % 2 else []
                   for _ in texts_a]
        rows, owners = [], []
        for i, (a, b) in enumerate(zip(texts_a, texts_b)):
            packed, sources = packing.pack_windows(list(a), list(b), length, stride)
            window_masks = [[int(sources is None)] * len(tokens) for tokens, _ in packed]
            for window, position in sources or ():
                window_masks[window][position] = 1
            for (tokens, segment_ids), mask in zip(packed, window_masks):
                ids = [{"[CLS]": CLS_ID, "[SEP]": SEP_ID}.get(t, t) for t in tokens]
                rows.append(packing.pad_inputs(ids, segment_ids, length) + (mask + [0] * (length - len(mask)),))
                owners.append(i)
        ragged = [tf.RaggedTensor.from_row_lengths(tf.constant([t for text in texts for t in text], tf.int32),
                                                   [len(text) for text in texts]) for texts in (texts_a, texts_b)]
        got, text, num_windows = preprocessing.pack_windows(
            *ragged if trial % 2 else ragged[:1], max_seq_length=length, doc_stride=stride,
            cls_id=CLS_ID, sep_id=SEP_ID, pad_to_max_seq_length=pad, pooling_mask=True)
        width = got["input_ids"].shape[1]
        assert width == (length if pad else max([sum(row[1]) for row in rows], default=1))
        for k, name in enumerate((*packing.INPUT_NAMES, "pooling_mask")):
            expected = np.array([row[k] for row in rows], np.int32).reshape(-1, length)
            assert not expected[:, width:].any()
            np.testing.assert_array_equal(got[name].numpy(), expected[:, :width],
                                          err_msg=f"{trial} {name}")
        np.testing.assert_array_equal(text.numpy(), owners)
        np.testing.assert_array_equal(num_windows.numpy(),
                                      np.bincount(owners, minlength=len(texts_a)))


def max_scaled(probabilities):
    """run_classifier.py's --window_pooling=max of softmax probabilities [windows, labels]: each label's largest,
    scaled to sum to 1."""
    most = probabilities.max(0)
    return most / most.sum()


def test_classifier_export_pools_its_windows(tmp_path, tiny):
    """serving_text(_pair) of a classifier exported with doc_stride and window_pooling=max: a long text's
    probabilities are each label's largest over the model's on the windows built here, scaled to sum to 1 (1e-5),
    logits their logs, predicted_label their argmax; short texts are what serving_default (the export without
    windows) gives on their packed ids, bit for bit; a pair keeps text_b in every window. A request over
    max_windows_per_request (by default WINDOWS_PER_TEXT x max_texts_per_request), or whose text_b leaves text_a no
    room, is refused; the metadata says the settings."""
    tokenizer, model = tiny["tokenizer"], tiny["model"]("classifier")
    most_windows = 3 * saved_model.WINDOWS_PER_TEXT
    path = export(tiny, model, "classifier", tmp_path / "c", window_pooling="max",
                  max_texts_per_request=3)  # windows: 3 x WINDOWS_PER_TEXT
    loaded = tf.saved_model.load(path)
    single, pair = loaded.signatures["serving_text"], loaded.signatures["serving_text_pair"]
    out = single(text_a=tf.constant([LONG, SHORT[0]]))
    by_hand = model(windows_by_hand(tokenizer, LONG), training=False)["probabilities"].numpy()
    assert len(by_hand) == 6 and out["num_windows"].numpy().tolist() == [6, 1]
    np.testing.assert_allclose(out["probabilities"][0], max_scaled(by_hand), atol=1e-5)
    np.testing.assert_allclose(out["logits"][0], np.log(max_scaled(by_hand)), atol=1e-5)
    assert sorted(out) == ["logits", "num_windows", "predicted_label", "probabilities"]
    probabilities = out["probabilities"].numpy()
    assert [s.decode() for s in out["predicted_label"].numpy()] == [LABELS[i] for i in probabilities.argmax(1)]

    short = single(text_a=tf.constant(SHORT))
    packed = {name: tf.concat([windows_by_hand(tokenizer, text)[name] for text in SHORT], 0)
              for name in packing.INPUT_NAMES}
    width = max(len(tokenizer.tokenize(text)) + 2 for text in SHORT)
    direct = loaded.signatures["serving_default"](**{name: t[:, :width] for name, t in packed.items()})
    for name in ("logits", "probabilities", "predicted_label"):
        np.testing.assert_array_equal(short[name], direct[name])

    text_b = "red blue"  # 2 tokens: 3 of text_a per window
    out = pair(text_a=tf.constant([LONG, SHORT[0]]), text_b=tf.constant([text_b, ""]))
    by_hand = model(windows_by_hand(tokenizer, LONG, text_b), training=False)["probabilities"].numpy()
    assert len(by_hand) == 8 and out["num_windows"].numpy().tolist() == [8, 1]
    np.testing.assert_allclose(out["probabilities"][0], max_scaled(by_hand), atol=1e-5)
    np.testing.assert_allclose(out["probabilities"][1], probabilities[1], atol=1e-6)

    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"the texts of the request take 13 windows; this export takes at most {most_windows} (export option "
            "max_windows_per_request)")):
        single(text_a=tf.constant([LONG, LONG, SHORT[0]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            "text 1 of the request: its text_b has 5 tokens, which with [CLS] and two [SEP] leave no room for text_a "
            "within max_seq_length 8")):
        pair(text_a=tf.constant(["the", "the"]), text_b=tf.constant(["", "a a a a a"]))
    with open(os.path.join(path, "assets.extra", "export_metadata.json")) as f:
        meta = json.load(f)
    assert (meta["doc_stride"], meta["window_pooling"], meta["max_windows_per_request"]) == (STRIDE, "max",
                                                                                             most_windows)


def test_every_classifier_task_pools_its_windows_as_run_classifier(tiny):
    """Each classifier task's pooled outputs (the export's `window_outputs`, run eagerly on `pack_windows`), both
    window_poolings, against numpy on the model's outputs on the windows built here (1e-5): softmax probabilities
    the mean, or each label's max scaled to sum to 1, logits their logs; multi-label each label's mean or max, logits
    their log-odds, predicted_labels against the thresholds; regression the mean or max; each what run_classifier.py
    makes of the windows (`pool_document`). A short text: its window's outputs (in another batch: 1e-6)."""
    tokenizer = tiny["tokenizer"]
    texts = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in (LONG, SHORT[0])]
    windows = preprocessing.pack_windows(tf.ragged.constant(texts), max_seq_length=MAX_LEN, doc_stride=STRIDE,
                                         cls_id=tokenizer.vocab["[CLS]"], sep_id=tokenizer.vocab["[SEP]"])
    thresholds = [0.3, 0.5, 0.7]
    for task in ("classifier", "multi_label", "regression"):
        model = tiny["model"](task)
        if task == "multi_label":
            model.thresholds = thresholds
        by_hand = {name: t.numpy() for name, t in model(windows_by_hand(tokenizer, LONG), training=False).items()}
        short = model(windows_by_hand(tokenizer, SHORT[0]), training=False)
        spec = task_models.REGISTRY[task]
        rows = [dict(zip(by_hand, values)) for values in zip(*by_hand.values())]
        for pooling in packing.WINDOW_POOLINGS:
            module = saved_model._ServingModule(model, spec, None, LABELS if spec.labelled else None,
                                                window_pooling=pooling)
            out = module.window_outputs(*windows)
            if task == "regression":
                expected = by_hand["predictions"].max() if pooling == "max" else by_hand["predictions"].mean()
                np.testing.assert_allclose(out["predictions"][0], expected, atol=1e-5)
                np.testing.assert_allclose(out["logits"][0], [expected], atol=1e-5)
            else:
                probabilities = by_hand["probabilities"]
                if task == "classifier":
                    pooled = max_scaled(probabilities) if pooling == "max" else probabilities.mean(0)
                    logits = np.log(pooled)
                    assert out["predicted_label"][0].numpy().decode() == LABELS[pooled.argmax()]
                else:
                    pooled = probabilities.max(0) if pooling == "max" else probabilities.mean(0)
                    logits = np.log(pooled / (1 - pooled))
                    np.testing.assert_array_equal(out["predicted_labels"][0], pooled >= thresholds)
                np.testing.assert_allclose(out["probabilities"][0], pooled, atol=1e-5)
                np.testing.assert_allclose(out["logits"][0], logits, atol=1e-5)
            run = pool_document(rows, np.zeros(3) if task == "multi_label" else 0, pooling, task == "multi_label")
            for name, value in run.items():
                np.testing.assert_allclose(out[name][0], value, atol=1e-5, err_msg=f"{task} {pooling} {name}")
            for name, value in short.items():
                np.testing.assert_allclose(out[name][1], value[0], atol=1e-6)  # (another batch)


def test_embedding_export_equals_the_sentence_encoder(tmp_path, tiny):
    """The embedding export with doc_stride (core ops; the classifier's is tf_text) gives SentenceEncoder(doc_stride=
    ...)'s embeddings, mean pooling each token once from its max-context window, within 1e-5; so does [CLS] pooling
    (the mean of the windows' [CLS]; the export's `window_outputs` run eagerly)."""
    tokenizer, model = tiny["tokenizer"], tiny["model"]("embedding")
    texts = [LONG, LONG + " is it good ?", *SHORT]
    path = export(tiny, model, "embedding", tmp_path / "e", text_ops="core")
    single = tf.saved_model.load(path).signatures["serving_text"]
    got = single(text_a=tf.constant(texts))["embedding"].numpy()
    np.testing.assert_allclose(got, embeddings.SentenceEncoder(model, tokenizer, MAX_LEN, doc_stride=STRIDE).encode(
        texts), atol=1e-5)
    first_window = single(text_a=tf.constant([" ".join(LONG.split()[:MAX_LEN - 2])]))["embedding"].numpy()
    assert not np.allclose(got[0], first_window[0], atol=1e-3)  # LONG is not embedded as if cut

    cls = tiny["model"]("embedding", pooling="cls")
    ids = tf.ragged.constant([tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in texts])
    windows = preprocessing.pack_windows(ids, max_seq_length=MAX_LEN, doc_stride=STRIDE,
                                         cls_id=tokenizer.vocab["[CLS]"], sep_id=tokenizer.vocab["[SEP]"])
    module = saved_model._ServingModule(cls, task_models.REGISTRY["embedding"], None, None)
    got = module.window_outputs(*windows)
    np.testing.assert_allclose(got["embedding"], embeddings.SentenceEncoder(cls, tokenizer, MAX_LEN, doc_stride=STRIDE)
                               .encode(texts), atol=1e-5)


def test_window_options_that_do_not_apply_are_refused(tmp_path, tiny):
    """doc_stride for a format without text signatures, a task that does not pool, or without text signatures;
    window_pooling for the embedding; window options without doc_stride: each refused, nothing written."""
    classifier = tiny["model"]("classifier")
    with pytest.raises(TypeError, match="^--doc_stride does not apply to --format=onnx --task=classifier"):
        export(tiny, classifier, "classifier", tmp_path / "x", format="onnx")
    for task, options, message in (
            ("ner", {}, "--doc_stride windows the raw-text signatures of the classifier, multi_label, regression, "
                        "embedding exports, not the ner task's"),
            ("classifier", {"text_ops": "none"}, "which --text_ops=none leaves out"),
            ("embedding", {"window_pooling": "max"}, "the embedding pools its windows by its --pooling"),
            ("classifier", {"doc_stride": 0, "window_pooling": "max"}, "apply to the windows of --doc_stride"),
            ("classifier", {"max_windows_per_request": 0}, "max_windows_per_request must be a positive integer")):
        model = classifier if task == "classifier" else tiny["model"](task)
        with pytest.raises(ValueError, match=re.escape(message)):
            exporter.export(task, str(tmp_path / "x"), model, vocab_file=tiny["vocab"], max_seq_length=MAX_LEN,
                            label_list=None if task == "embedding" else LABELS,
                            **{"doc_stride": STRIDE, **options})
    assert not (tmp_path / "x" / "1").exists()
