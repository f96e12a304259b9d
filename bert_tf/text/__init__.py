"""Text: `tokenization` (the original's Python tokenizer), `packing` (its [CLS]/[SEP] packing, pure Python), `in_graph`
(the tokenizer as TensorFlow Text ops), `preprocessing` (the packing in TensorFlow ops; raw text -> model inputs) and
`core_ops` (both in core TensorFlow ops, for stock TF Serving).
"""
