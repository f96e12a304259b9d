"""Inference with a pre-trained model, without training: `extract_features` (the original extract_features.py:
per-token vectors of chosen layers as JSON lines), `fill_mask` (the masked-LM head's top-k wordpieces for each
[MASK]) and `embeddings` (sentence embeddings as sentence-transformers pools them, and semantic search). Each has a
`run()` that its script calls with the flags' values (predict_masked_lm.py for fill_mask, semantic_search.py for
embeddings)."""
