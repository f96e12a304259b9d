"""Inference with a pre-trained model, without training: `extract_features` (the original extract_features.py:
per-token vectors of chosen layers as JSON lines) and `fill_mask` (the masked-LM head's top-k wordpieces for each
[MASK]). Each has a `run()` that its script calls with the flags' values."""
