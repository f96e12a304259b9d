"""A tiny run_classifier.py set-up shared by the script tests (tests/tasks/test_classifier.py,
tests/test_training_flags.py): a vocabulary of a few words, an L=2, H=32 BERT config, TSV writers and the script."""
import os
import sys

import forkserver

from bert_tf.model.config import BertConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "run_scripts", "run_classifier.py")

WORDS = ("the a cat dog sat ran on mat fast slow big small red blue happy sad good bad yes no is it "
         "un ##want ##ed runn ##ing").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ",", "?"]


def write_lines(path, lines):
    """Writes `lines` (str each), one per line, creating the directory; returns `path`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def tsv_line(*fields):
    return "\t".join(str(f) for f in fields)


def write_tiny_model(directory, **config_overrides):
    """vocab.txt of VOCAB and an L=2, H=32 bert_config.json (fields overridable) in `directory`.

    Returns (vocab_file, config_file).
    """
    vocab_file = write_lines(os.path.join(directory, "vocab.txt"), VOCAB)
    config_file = os.path.join(directory, "bert_config.json")
    config = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    BertConfig(**{**config, **config_overrides}).to_json_file(config_file)
    return vocab_file, config_file


def random_sentence(rng):
    """2 to 7 whole words of VOCAB drawn by `rng` (a random.Random)."""
    return " ".join(rng.choice(WORDS[:22]) for _ in range(rng.randint(2, 8)))


def run_script(*args, env=None):
    """Runs run_classifier.py with `args` (and `env` added to the environment) in a subprocess; returns the
    CompletedProcess (text stdout/stderr)."""
    return forkserver.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})})
