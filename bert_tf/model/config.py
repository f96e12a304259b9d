"""BertConfig: the original `bert_config.json`, read, validated and written back in the same JSON form."""
import copy
import inspect
import json

from absl import logging

from bert_tf import fileio
from bert_tf.model import activations

# Keys a bert_config.json must give: those that shape the weights (the original silently took its defaults).
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_POSITIVE_INTS = (*REQUIRED, "max_position_embeddings", "type_vocab_size")
_PROBABILITIES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


class BertConfig:
    """Hyper-parameters of a BERT model, with the original's attribute names and defaults; other keys (e.g. a
    Hugging Face config.json's) are kept in `extra` and written back."""

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=16,
                 initializer_range=0.02, **extra):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.extra = dict(extra)
        self.validate()

    def validate(self, source="BertConfig"):
        """Raises ValueError naming `source` and the offending key if the configuration cannot build a model."""
        for key in _POSITIVE_INTS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{source}: `{key}` must be a positive integer, got {value!r}.")
        for key in _PROBABILITIES:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{source}: `{key}` must be a probability in [0, 1), got {value!r}.")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ValueError(f"{source}: `initializer_range` must be positive, got {self.initializer_range!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{source}: hidden_size ({self.hidden_size}) is not a multiple of num_attention_heads "
                f"({self.num_attention_heads}).")
        if not isinstance(self.hidden_act, str) or self.hidden_act.lower() not in activations.NAMES:
            raise ValueError(
                f"{source}: unknown hidden_act {self.hidden_act!r}; expected one of {sorted(activations.NAMES)}.")

    @classmethod
    def from_dict(cls, json_object, source="BertConfig"):
        """Builds a config from a dict with the original's keys; the `REQUIRED` ones must be present."""
        if not isinstance(json_object, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(json_object).__name__}.")
        lacking = [key for key in REQUIRED if key not in json_object]
        if lacking:
            raise ValueError(f"{source}: missing required key {', '.join(f'`{k}`' for k in lacking)} (a "
                             f"bert_config.json must give {', '.join(REQUIRED)}).")
        values = {**DEFAULTS, **json_object}
        unknown = sorted(set(values) - set(DEFAULTS))
        if unknown:
            logging.info("%s: keeping keys the original BertConfig does not use: %s", source, unknown)
        try:
            return cls(**values)
        except ValueError as e:
            if str(e).startswith("BertConfig:"):
                raise ValueError(source + str(e)[len("BertConfig"):]) from None
            raise

    @classmethod
    def from_json_file(cls, json_file):
        """Reads an original `bert_config.json`; errors name the file (and line/column for malformed JSON)."""
        return cls.from_dict(fileio.read_json(json_file, "BERT config file"), source=json_file)

    def to_dict(self):
        """The original's keys (and any extra keys), as a new dict."""
        out = {key: getattr(self, key) for key in DEFAULTS}
        out.update(copy.deepcopy(self.extra))
        return out

    def to_json_string(self):
        """The same JSON form as the original: indent 2, sorted keys, trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file):
        fileio.write_text_atomically(json_file, self.to_json_string())

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig({self.to_dict()})"


# The original's keys with its constructor defaults (vocab_size has none: None), read off BertConfig's signature.
DEFAULTS = {name: None if parameter.default is parameter.empty else parameter.default
            for name, parameter in inspect.signature(BertConfig).parameters.items() if name != "extra"}


def check_max_seq_length(config, max_seq_length):
    """Raises the original scripts' error if max_seq_length exceeds the model's max_position_embeddings."""
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(f"Cannot use sequence length {max_seq_length} because the BERT model was only trained up "
                         f"to sequence length {config.max_position_embeddings}")


def check_exact_vocab_size(config, vocab, vocab_file, written):
    """Raises unless `vocab` has exactly config.vocab_size tokens, as an exported tokenizer needs (`written`: what
    is written, for the message)."""
    size = len(vocab)
    if size != config.vocab_size:
        raise ValueError(f"{vocab_file} has {size} tokens but the model has vocab_size={config.vocab_size} word "
                         f"embeddings: the tokenizer of {written} would give ids the model has no rows for, or "
                         f"leave rows no id reaches; use the vocab.txt the model was trained with.")


def check_vocab_size(config, vocab, vocab_file):
    """Raises if the vocabulary has more tokens than the model has embedding rows; warns if it has fewer."""
    if len(vocab) > config.vocab_size:
        raise ValueError(f"{vocab_file} has {len(vocab)} tokens but bert_config.json says vocab_size="
                         f"{config.vocab_size}: the vocab does not belong to this model.")
    if len(vocab) < config.vocab_size:
        logging.warning("%s has %d tokens, fewer than vocab_size=%d in bert_config.json.", vocab_file, len(vocab),
                        config.vocab_size)
