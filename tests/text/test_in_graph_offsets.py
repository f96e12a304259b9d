"""Tests for the in-graph tokenizers' words with offsets (`tokenize_words_with_offsets`, what the NER export's
entities stand on): each word's wordpiece ids and its start and end in code points equal the Python
`BasicTokenizer.tokenize_with_offsets` words, in TensorFlow Text and in core ops, cased and uncased."""
import pytest
import tensorflow as tf
from test_offsets import _mixed_texts
from test_tokenization import TRICKY, _random_texts

from bert_tf.text import core_ops, in_graph, tokenization

TEXTS = [case[0] for case in TRICKY] + _random_texts(120, seed=53) + _mixed_texts(150)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_words_and_offsets_are_pythons(uncased_vocab_file, do_lower_case):
    python = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=do_lower_case)
    texts = [text.decode("utf-8", "ignore") if isinstance(text, bytes) else text for text in TEXTS]
    expected = [python.basic_tokenizer.tokenize_with_offsets(text) for text in texts]
    for tokenizer in (in_graph.InGraphTokenizer(uncased_vocab_file, do_lower_case=do_lower_case),
                      core_ops.CoreWordpieceTokenizer(uncased_vocab_file, do_lower_case=do_lower_case)):
        ids, starts, ends = (t.to_list() for t in tokenizer.tokenize_words_with_offsets(tf.constant(texts)))  # eager
        for k, (text, words) in enumerate(zip(texts, expected)):
            assert list(zip(starts[k], ends[k])) == [(start, end) for _, start, end in words], repr(text)
            assert ids[k] == [python.convert_tokens_to_ids(python.wordpiece_tokenizer.tokenize(word))
                              for word, _, _ in words], repr(text)
