"""Text: `tokenization` (the original's Python tokenizer), `packing` (its [CLS]/[SEP] packing, pure Python),
`in_graph` (the same tokenizer as TensorFlow Text ops), `preprocessing` (the same packing in TensorFlow ops, and raw
text -> model inputs in graph) and `core_ops` (tokenizer and preprocessor in core TensorFlow ops only, for stock TF
Serving)."""
