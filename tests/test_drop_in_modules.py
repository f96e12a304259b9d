"""bert_tf.modeling and bert_tf.tokenization: the original modules' public names, for code written against
google-research/bert, are the library's own objects (not copies)."""
import subprocess
import sys

from bert_tf import modeling, tokenization
from bert_tf.model import activations, config, encoder
from bert_tf.text import tokenization as text_tokenization

# The names the original tokenization.py defines and its own tests use (the three private helpers included).
TOKENIZATION_NAMES = ["FullTokenizer", "BasicTokenizer", "WordpieceTokenizer", "load_vocab", "convert_to_unicode",
                      "printable_text", "convert_by_vocab", "convert_tokens_to_ids", "convert_ids_to_tokens",
                      "whitespace_tokenize", "validate_case_matches_checkpoint", "_is_whitespace", "_is_control",
                      "_is_punctuation"]


def test_tokenization_names_are_the_implementation():
    for name in TOKENIZATION_NAMES:
        assert getattr(tokenization, name) is getattr(text_tokenization, name), name


def test_modeling_names_are_the_implementation():
    assert modeling.BertConfig is config.BertConfig
    for name in ("BertModel", "BertEmbeddings", "BertAttention", "TransformerBlock", "BertPooler",
                 "create_initializer", "attention_mask_adder", "build_bert_model", "LAYER_NORM_EPSILON"):
        assert getattr(modeling, name) is getattr(encoder, name), name
    assert modeling.gelu is activations.gelu
    assert modeling.get_activation("gelu") is activations.gelu and modeling.get_activation("relu") is not None


def test_the_python_tokenizer_imports_without_tensorflow():
    code = ("import sys; from bert_tf import tokenization; tokenization.BasicTokenizer().tokenize('Hi there'); "
            "print(sorted(m for m in ('tensorflow', 'keras', 'tensorflow_text') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
