"""The original `tokenization.py`'s public names, for code written against google-research/bert.

    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(vocab_file="vocab.txt", do_lower_case=True)

The implementation lives in `bert_tf.text.tokenization`; this module only re-exports it.
"""
from bert_tf.text.tokenization import *  # noqa: F403
from bert_tf.text.tokenization import __all__, _is_control, _is_punctuation, _is_whitespace  # noqa: F401  (its tests')
