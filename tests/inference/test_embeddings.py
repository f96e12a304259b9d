"""Sentence embeddings (bert_tf.inference.embeddings, --task=embedding, run_scripts/semantic_search.py) against
sentence-transformers' own on the real all-MiniLM-L6-v2 (tests/fixtures/sentence_embeddings_minilm.npz)."""
import json
import os

import numpy as np
import pytest
import script_steps
import tensorflow as tf

from bert_tf.inference import embeddings
from bert_tf.model import task_models

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def golden(data_dir):
    return dict(np.load(os.path.join(data_dir, "sentence_embeddings_minilm.npz")))


def _encoder(release, **options):
    return embeddings.SentenceEncoder.from_pretrained(
        f"{release}/bert_model.ckpt", vocab_file=f"{release}/vocab.txt", max_seq_length=256, batch_size=8, **options)


@pytest.mark.slow
def test_the_embeddings_of_sentence_transformers(minilm_release, golden):
    """40 real sentences through the real all-MiniLM-L6-v2: the model card's embeddings (mean pooling, Normalize),
    and mean or [CLS] pooling without Normalize, as sentence-transformers computes them, to 1e-5 (measured: 2e-6),
    in input order though they run sorted by length; padded to max_seq_length, the same."""
    texts = [str(t) for t in golden["texts"]]
    assert int(golden["max_seq_length"]) == 256
    encoder = _encoder(minilm_release)
    got = encoder.encode(texts)
    assert got.shape == (40, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, golden["mean_normalized"], atol=1e-5)
    np.testing.assert_allclose(_encoder(minilm_release, normalize_embeddings=False).encode(texts), golden["mean"],
                               atol=1e-5)
    np.testing.assert_allclose(_encoder(minilm_release, pooling="cls", normalize_embeddings=False).encode(texts[:8]),
                               golden["cls"][:8], atol=1e-5)
    padded = _encoder(minilm_release, pad_to_max_seq_length=True).encode(texts[:8])
    np.testing.assert_allclose(padded, golden["mean_normalized"][:8], atol=1e-5)
    assert encoder.encode([]).shape == (0, 384)


def test_pooling_counts_the_real_tokens_only(tiny_config):
    """Mean pooling: the mean over input_mask's tokens, whatever follows them; [CLS]: the first token; each
    normalized to norm 1 unless asked not to."""
    tf.keras.utils.set_random_seed(3)
    model = task_models.build_task_model("embedding", tiny_config)
    ids = np.array([[2, 7, 8, 3, 0, 0], [2, 7, 8, 3, 9, 9]], np.int32)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0]], np.int32)
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["embedding"].numpy()
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-6)
    sequence = model.bert({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["sequence_output"].numpy()
    plain = task_models.BertSentenceEncoder(tiny_config, pooling="mean", normalize_embeddings=False, bert=model.bert)
    np.testing.assert_allclose(plain({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["embedding"],
                               sequence[:, :4].mean(1), atol=1e-6)
    cls = task_models.BertSentenceEncoder(tiny_config, pooling="cls", normalize_embeddings=False, bert=model.bert)
    np.testing.assert_allclose(cls({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["embedding"],
                               sequence[:, 0], atol=1e-6)
    config = cls.get_config()
    assert config["pooling"] == "cls" and config["normalize_embeddings"] is False
    with pytest.raises(ValueError, match="Unknown pooling 'max'; expected one of mean, cls"):
        task_models.build_task_model("embedding", tiny_config, pooling="max")
    with pytest.raises(ValueError, match=r"The classifier task takes no option pooling\."):
        task_models.build_task_model("classifier", tiny_config, num_labels=2, pooling="cls")


def test_search_ranks_by_cosine():
    corpus = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 2.0], [-1.0, 0.0]], np.float32)
    hits = embeddings.search(np.array([[2.0, 0.1]]), corpus, top_k=3)
    assert [i for i, _ in hits[0]] == [0, 1, 2]
    assert hits[0][0][1] == pytest.approx(2.0 / np.hypot(2.0, 0.1), abs=1e-6)
    with pytest.raises(ValueError, match="top_k must be at least 1, got 0"):
        embeddings.search(corpus, corpus, top_k=0)


@pytest.mark.slow
def test_semantic_search_script_and_export(minilm_release, golden, child_env, tmp_path):
    """semantic_search.py finds each query's own sentence first (cosine 1) and writes JSON lines, also with
    --doc_stride at a max_seq_length that windows some sentences (its log says so); bad input fails before the model
    loads, naming the file or flag. --task=embedding exports `embedding` through serving_default
    and serving_text, equal to the Python API's (1e-5). Both scripts run in one process (tests/script_steps.py)."""
    texts = [str(t) for t in golden["texts"]]
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("\n".join(texts[:20]) + "\n\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    model_flags = [f"--init_checkpoint={minilm_release}/bert_model.ckpt", f"--vocab_file={minilm_release}/vocab.txt",
                   "--max_seq_length=256"]
    output = tmp_path / "search.jsonl"
    export_dir = tmp_path / "export"
    windowed = tmp_path / "windowed.jsonl"
    (search, exports), logs = script_steps.run([
        (os.path.join(REPO, "run_scripts", "semantic_search.py"), [
            [f"--input_file={corpus}", f"--output_file={output}", f"--query={texts[3]}", f"--query={texts[11]}",
             "--top_k=2", *model_flags],
            [f"--input_file={empty}", f"--output_file={tmp_path / 'none.jsonl'}", "--query=x", *model_flags],
            [f"--input_file={corpus}", f"--output_file={tmp_path / 'none.jsonl'}", *model_flags],
            [f"--input_file={corpus}", f"--output_file={windowed}", f"--query={texts[11]}", "--top_k=1",
             *model_flags[:2], "--max_seq_length=16", "--doc_stride=8", "--verbosity=0"]]),  # INFO: the windows' log
        (os.path.join(REPO, "run_scripts", "export_saved_model.py"), [
            ["--task=embedding", f"--export_dir={export_dir}", *model_flags],
            ["--task=encoder", "--pooling=cls", f"--export_dir={tmp_path / 'no'}", *model_flags]])], REPO, child_env())
    errors = search["errors"]
    assert errors[0] is None and errors[3] is None
    assert "were longer than max_seq_length 16 and were split into" in logs
    (hit,) = json.loads(windowed.read_text(encoding="utf-8"))["results"]
    assert hit["line"] == 12 and hit["score"] == pytest.approx(1.0, abs=1e-5)
    assert errors[1] == f"ValueError: input_file {empty} has no text: expected one sentence per line."
    assert errors[2] == "ValueError: No query given: pass --query (repeatable) or --query_file."
    results = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["query"] for r in results] == [texts[3], texts[11]]
    for result, line in zip(results, (4, 12)):
        assert len(result["results"]) == 2 and result["results"][0]["line"] == line
        assert result["results"][0]["score"] == pytest.approx(1.0, abs=1e-5)
        assert result["results"][1]["score"] < 0.9
    assert not (tmp_path / "none.jsonl").exists()

    errors = exports["errors"]
    assert errors[0] is None, logs[-3000:]
    assert errors[1].startswith("ValueError: --pooling does not apply to --format=serving --task=encoder (its "
                                "options: --text_ops, ")
    import tensorflow_text  # noqa: F401  (the text signature's ops)
    loaded = tf.saved_model.load(str(export_dir / "1"))
    expected = golden["mean_normalized"][:4]
    text = loaded.signatures["serving_text"](text_a=tf.constant(texts[:4]))
    np.testing.assert_allclose(text["embedding"].numpy(), expected, atol=1e-5)
    packed = {name: text[name] for name in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(loaded.signatures["serving_default"](**packed)["embedding"].numpy(), expected,
                               atol=1e-5)
    with open(export_dir / "1" / "assets.extra" / "export_metadata.json") as f:
        meta = json.load(f)
    assert meta["task"] == "embedding" and meta["pooling"] == "mean" and meta["normalize_embeddings"] is True
