"""Inference with a pre-trained model: `extract_features` (the original's per-token vectors as JSON lines),
`fill_mask` (top-k wordpieces for each [MASK]) and `embeddings` (sentence embeddings, semantic search). Each has a
`run()` its script calls with the flags' values."""
