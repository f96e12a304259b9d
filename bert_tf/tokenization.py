"""The original `tokenization.py`'s public names, for code written against google-research/bert.

    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(vocab_file="vocab.txt", do_lower_case=True)

The implementation lives in `bert_tf.text.tokenization`; this module only re-exports it.
"""
from bert_tf.text.tokenization import (  # noqa: F401  (the original's helpers, used by its tests)
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    _is_control,
    _is_punctuation,
    _is_whitespace,
    convert_by_vocab,
    convert_ids_to_tokens,
    convert_to_unicode,
    convert_tokens_to_ids,
    load_vocab,
    printable_text,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

__all__ = [
    "BasicTokenizer", "FullTokenizer", "WordpieceTokenizer", "convert_by_vocab", "convert_ids_to_tokens",
    "convert_to_unicode", "convert_tokens_to_ids", "load_vocab", "printable_text",
    "validate_case_matches_checkpoint", "whitespace_tokenize",
]
