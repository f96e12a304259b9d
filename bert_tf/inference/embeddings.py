"""Sentence embeddings and semantic search: a BERT's last layer pooled as sentence-transformers pools it.

A text's embedding is the mean of the last layer over its real tokens (or its [CLS] vector), divided by its L2 norm; two
texts are similar by the cosine of their embeddings.

    encoder = SentenceEncoder.from_pretrained("minilm/bert_model.ckpt", max_seq_length=256)
    corpus = encoder.encode(sentences)                       # [N, H] float32
    hits = search(encoder.encode(["a query"]), corpus, top_k=3)  # [[(index, cosine), ...]]

Each text is packed `[CLS] text [SEP]`, truncated at max_seq_length. With `doc_stride` > 0 a longer text is embedded
over its windows (`packing.pack_windows`): mean pooling counts each token once, from its max-context window; [CLS]
pooling averages the windows' [CLS] vectors; normalized after pooling.
"""
import collections
import json

import numpy as np
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.model import heads, task_models
from bert_tf.text import packing, tokenization
from bert_tf.training import devices, prediction

POOLING_MASK = "pooling_mask"  # with doc_stride: 1 at the positions whose vectors make the text's embedding


class SentenceEncoder:
    """Embeds texts with `model` (a `task_models.BertSentenceEncoder`) and `tokenizer`.

    `max_seq_length`: tokens per text, [CLS] and [SEP] included; `batch_size`: texts per batch of max_seq_length tokens
    (`lengths_lib.LengthSorted`); `lengths`: a `lengths_lib.SequenceLengths`; `doc_stride`: 0 cuts a longer text, N > 0
    embeds it over windows N tokens apart.
    """

    def __init__(self, model, tokenizer, max_seq_length=256, batch_size=32, lengths=None, jit_compile=False,
                 doc_stride=0):
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]); got {max_seq_length}.")
        packing.check_doc_stride(doc_stride)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.lengths = lengths or lengths_lib.SequenceLengths.for_run()
        self.jit_compile = jit_compile
        self.doc_stride = doc_stride
        self.names = packing.INPUT_NAMES + ((POOLING_MASK,) if doc_stride else ())
        if doc_stride:  # each window pooled over its pooling_mask, not normalized: `encode` pools the windows
            pool = heads.SentencePooling(model.pooling, normalize_embeddings=False)
            embed = lambda batch: {"embedding": pool(  # noqa: E731
                model.bert({name: batch[name] for name in packing.INPUT_NAMES}, training=False)["sequence_output"],
                batch[POOLING_MASK])}
        else:
            embed = lambda batch: {"embedding": model(batch, training=False)["embedding"]}  # noqa: E731
        self.predictor = prediction.Predictor(embed, use_xla=jit_compile)  # its traces kept for every `encode`

    @classmethod
    def from_pretrained(cls, init_checkpoint, bert_config_file=None, vocab_file=None, do_lower_case=None,
                        max_seq_length=256, pooling="mean", normalize_embeddings=True, batch_size=32, use_xla=False,
                        pad_to_max_seq_length=False, seq_length_multiple=None, doc_stride=0):
        """The encoder of `init_checkpoint` (any format `checkpoints.load_pretrained` reads) with `pooling` ("mean" or
        "cls") and `normalize_embeddings`."""
        loaded = checkpoints.load_pretrained(init_checkpoint, bert_config_file, vocab_file,
                                             do_lower_case, max_seq_length)
        model = loaded.build_model(lambda config, restored: task_models.build_task_model(
            "embedding", config, restored=restored, pooling=pooling,
            normalize_embeddings=normalize_embeddings))
        lengths = lengths_lib.SequenceLengths.for_run(pad_to_max_seq_length, use_xla, seq_length_multiple)
        return cls(model, loaded.tokenizer, max_seq_length, batch_size, lengths, use_xla,
                   doc_stride)

    def pack(self, texts):
        """({input_ids, input_mask, segment_ids}: [rows, max_seq_length] int32, [rows] each row's text) of `texts`: a
        row per text, or per window with `pooling_mask`."""
        rows, owners, cut = [], [], collections.Counter()
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"Text {i} is a {type(text).__name__}, not a str: {text!r}.")
            packed, sources = packing.pack_windows(self.tokenizer.tokenize(text), None, self.max_seq_length,
                                                   self.doc_stride, cut)
            masks = [[int(sources is None)] * len(tokens) for tokens, _ in packed]
            for window, position in sources or ():
                masks[window][position] = 1
            for (tokens, segment_ids), mask in zip(packed, masks):
                rows.append(packing.pad_inputs(self.tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                                               self.max_seq_length) + (mask + [0] * (self.max_seq_length - len(mask)),))
                owners.append(i)
        packing.log_cut(cut, "The texts to embed", self.max_seq_length, packing.DOC_STRIDE_KEEPS)
        return ({name: np.array([row[k] for row in rows], np.int32).reshape(len(rows), self.max_seq_length)
                 for k, name in enumerate(self.names)}, np.array(owners))

    def encode(self, texts):
        """[len(texts), H] float32: the embedding of each text, in input order (with `doc_stride`, of its windows)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.model.bert.config.hidden_size), np.float32)
        inputs, owners = self.pack(texts)
        outputs = prediction.predict_in_order(self.predictor, inputs, self.batch_size, self.lengths, self.names)
        parts = [batch["embedding"] for batch in tqdm(outputs, total=-(-len(owners) // self.batch_size), desc="embed",
                                                      unit="batch", disable=len(owners) <= 4 * self.batch_size)]
        pooled = np.concatenate(parts)
        if not self.doc_stride:
            return pooled
        # Each window's vector weighs as many tokens as it gives the text (mean pooling), else 1.
        weights = inputs[POOLING_MASK].sum(1) if self.model.pooling == "mean" else np.ones(len(owners))
        sums = np.zeros((len(texts), pooled.shape[-1]))
        np.add.at(sums, owners, pooled * weights[:, None])
        embeddings = sums / np.bincount(owners, weights)[:, None]
        return (unit(embeddings) if self.model.normalize_embeddings else embeddings).astype(np.float32)


def unit(x):
    """`x` divided by its L2 norm (at least 1e-12) along the last axis, as `heads.SentencePooling` normalizes."""
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def check_top_k(top_k):
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}.")


def search(queries, corpus, top_k=5):
    """For each query embedding [Q, H], the `top_k` corpus rows [N, H] by cosine (embeddings of any norm):
    [(corpus index, cosine)], best first (ties: lower index)."""
    check_top_k(top_k)
    scores = unit(np.asarray(queries, np.float32)) @ unit(np.asarray(corpus, np.float32)).T
    hits = []
    for row in scores:
        best = np.argsort(-row, kind="stable")[:top_k]
        hits.append([(int(i), float(row[i])) for i in best])
    return hits


def read_lines(path, what):
    """[(line number, text)] of the non-empty, stripped lines of `path`; ValueError naming `what` for a missing or empty
    file."""
    if not fileio.exists(path):
        raise FileNotFoundError(f"{what} {path} does not exist.")
    with fileio.open_file(path, "rb", name="") as f:
        lines = [(number, tokenization.convert_to_unicode(raw).strip()) for number, raw in enumerate(f, 1)]
    lines = [(number, text) for number, text in lines if text]
    if not lines:
        raise ValueError(f"{what} {path} has no text: expected one sentence per line.")
    return lines


def semantic_search(encoder, sentences, queries, top_k=5):
    """For each query, {"query": q, "results": [{"line", "text", "score"}, ...]}: the `top_k` nearest `sentences`,
    nearest first."""
    hits = search(encoder.encode(queries), encoder.encode([text for _, text in sentences]), top_k)
    return [{"query": query, "results": [{"line": sentences[i][0], "text": sentences[i][1], "score": round(score, 6)}
                                         for i, score in found]}
            for query, found in zip(queries, hits)]


def run(input_file, output_file, queries=(), query_file=None, top_k=5, init_checkpoint=None, bert_config_file=None,
        vocab_file=None, do_lower_case=None, max_seq_length=256, pooling="mean", normalize_embeddings=True,
        batch_size=32, use_xla=False, pad_to_max_seq_length=False, seq_length_multiple=None, doc_stride=0):
    """What semantic_search.py does: one JSON line per query to `output_file`; bad input fails before the model loads.
    Returns the results."""
    queries = list(queries) + ([text for _, text in read_lines(query_file, "query_file")] if query_file else [])
    if not queries:
        raise ValueError("No query given: pass --query (repeatable) or --query_file.")
    check_top_k(top_k)
    packing.check_doc_stride(doc_stride)
    sentences = read_lines(input_file, "input_file")
    devices.log_devices(global_batch_size=batch_size, use_xla=use_xla)
    encoder = SentenceEncoder.from_pretrained(init_checkpoint, bert_config_file, vocab_file, do_lower_case,
                                              max_seq_length, pooling, normalize_embeddings, batch_size, use_xla,
                                              pad_to_max_seq_length, seq_length_multiple, doc_stride)
    results = semantic_search(encoder, sentences, queries, top_k)
    with fileio.atomic_write(output_file) as writer:
        for result in results:
            writer.write(json.dumps(result, ensure_ascii=False) + "\n")
    logging.info("Searched %d sentences of %s for %d queries; wrote %s", len(sentences), input_file, len(queries),
                 output_file)
    return results
