"""Tiny model files and data shared by the script tests (tests/tasks, tests/training, tests/test_*.py): a vocabulary
of a few words, an L=2, H=32 BERT config written beside any vocabulary, a random-weights original checkpoint, MRPC
and line writers, and run_classifier.py run in a forked child (tests/forkserver.py)."""
import os
import sys

import forkserver

from bert_tf.model.config import BertConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "run_scripts", "run_classifier.py")

WORDS = ("the a cat dog sat ran on mat fast slow big small red blue happy sad good bad yes no is it "
         "un ##want ##ed runn ##ing").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ",", "?"]
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
L1_H16 = dict(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=24)  # config overrides
MRPC_COLUMNS = ("#1 ID", "#2 ID", "#1 String", "#2 String")


def write_lines(path, lines):
    """Writes `lines` (str each), one per line, creating the directory; returns `path`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def tsv_line(*fields):
    return "\t".join(str(f) for f in fields)


def write_tiny_model(directory, vocab=VOCAB, **config_overrides):
    """vocab.txt of `vocab` and an L=2, H=32 bert_config.json (fields overridable) in `directory`.

    Returns (vocab_file, config_file).
    """
    vocab_file = write_lines(os.path.join(str(directory), "vocab.txt"), vocab)
    config_file = os.path.join(str(directory), "bert_config.json")
    config = dict(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    BertConfig(**{**config, **config_overrides}).to_json_file(config_file)
    return vocab_file, config_file


def model_flags(directory, vocab=VOCAB, **config_overrides):
    """`write_tiny_model`'s files as a run script's --vocab_file and --bert_config_file."""
    vocab_file, config_file = write_tiny_model(directory, vocab, **config_overrides)
    return [f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}"]


def write_tiny_release(directory, vocab=VOCAB, seed=0, heads=False, **config_overrides):
    """`write_tiny_model`'s files and bert_model.ckpt: an original-format checkpoint of random weights (the encoder;
    `heads`: tests/numpy_bert.py's pretraining and task heads too). Returns (vocab_file, config_file, prefix)."""
    from numpy_bert import random_weights, write_tf1_checkpoint

    vocab_file, config_file = write_tiny_model(directory, vocab, **config_overrides)
    weights = random_weights(BertConfig.from_json_file(config_file), seed=seed, heads=heads)
    return vocab_file, config_file, write_tf1_checkpoint(weights, os.path.join(str(directory), "bert_model.ckpt"))


def random_sentence(rng):
    """2 to 7 whole words of VOCAB drawn by `rng` (a random.Random)."""
    return " ".join(rng.choice(WORDS[:22]) for _ in range(rng.randint(2, 8)))


def write_mrpc(directory, rng, **counts):
    """MRPC-format files in `directory`, `counts` lines each (train=12, dev=5, test=3: in that order), of random
    sentence pairs and labels drawn by `rng`; test.tsv has an index column and no labels."""
    for split, count in counts.items():
        first = "index" if split == "test" else "Quality"
        rows = [(i if split == "test" else rng.randint(0, 1), i, i + 1, random_sentence(rng), random_sentence(rng))
                for i in range(count)]
        write_lines(os.path.join(str(directory), f"{split}.tsv"),
                    [tsv_line(first, *MRPC_COLUMNS)] + [tsv_line(*row) for row in rows])


def eval_results(output_dir, convert=str):
    """{key: value} of `output_dir`/eval_results.txt (the original's `key = value` lines), in the file's order."""
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        return {key: convert(value) for key, value in (line.split(" = ") for line in f.read().splitlines())}


def run_script(*args, env=None):
    """Runs run_classifier.py with `args` (and `env` added to the environment) in a subprocess; returns the
    CompletedProcess (text stdout/stderr)."""
    return forkserver.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})})


def tiny_and_pretrained_runs(run_main, tmp_path_factory, script, tiny_run, pretrained_run, minilm_release):
    """`script`'s run on the tiny model, then its run from the real MiniLM, one after the other in one process
    (`tiny_run(directory)`, `pretrained_run(directory, minilm_release)`: their flags). Returns ({"tiny": its
    directory, "pretrained": its}, the process's logs)."""
    dirs = {name: tmp_path_factory.mktemp(name) for name in ("tiny", "pretrained")}
    errors, logs = run_main(script, tiny_run(dirs["tiny"]), pretrained_run(dirs["pretrained"], minilm_release),
                            with_logs=True)
    assert errors == [None, None], (errors, logs[-3000:])
    return dirs, logs
