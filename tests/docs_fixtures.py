"""Tiny stand-ins for what the documented commands (tests/test_docs_commands.py) name: their placeholders, and the
input a script reads that no earlier command writes, made by the flag that names it (so that a command keeps its
paths as written).

- `$BERT_BASE_DIR`, `$BERT_LARGE_DIR`, `$BERT`, `$BERT_DIR`, `$MINILM`: one tiny random original release (L=1,
  H=16, 512 positions, the uncased vocabulary, bert_model.ckpt with the pretraining heads, as Google's releases);
  for a script in DEEP, the same with more layers (extract_features.py reads the last 4 by default);
  `$MRPC_OUT`, `$OUT`: a run_classifier.py output_dir fine-tuned from it (labels 0 and 1);
- a directory or file a script reads (`INPUTS`): `--data_dir` by task (MRPC's GLUE files, your own tsv, CoNLL-2003,
  SWAG), SQuAD 1.1 / 2.0 json (2.0 where the name or --version_2_with_negative says so), a corpus, text lines;
- a TF Hub BERT a command names by its download's name (`HUB_MODULE`): the release exported by
  export_saved_model.py --format=tfhub, linked there.
"""
import os
import random
import re
import shutil
import sys

import tiny_classifier

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TESTS, "tasks"))  # test_ner's and test_swag's samples
FIXTURES = os.path.join(TESTS, "fixtures")
# $NAME -> a directory under the test's root; LITERALS: shell variables a block sets itself, bound to a value.
PLACEHOLDERS = {"BERT_BASE_DIR": "bert", "BERT_LARGE_DIR": "bert", "BERT": "bert", "BERT_DIR": "bert",
                "MINILM": "bert", "MRPC_OUT": "out", "OUT": "out", "GLUE_DIR": "glue", "SQUAD_DIR": "squad",
                "DATA_DIR": "data", "CONLL_DIR": "conll", "SWAG_DIR": "swag"}
LITERALS = {"THRESH": "-1.0", "TPU_NAME": "local"}
LABELS = ["0", "1"]
HUB_MODULE = re.compile(r"(small_)?bert_\w+_L-\d+_H-\d+_A-\d+(_\d+)?")  # TF Hub's names of its BERTs
ROWS = 8  # rows of each split of a task's data
DEEP = {"extract_features": 4}  # script -> the layers of its release (--layers=-1,-2,-3,-4, its default)


def release(layers):
    """The directory under the test's root of the release of `layers` layers."""
    return "bert" if layers == 1 else f"bert_l{layers}"


def placeholder(name, script):
    """The directory under the test's root that `$name` stands for in a command of `script`."""
    directory = PLACEHOLDERS[name]
    return release(DEEP.get(script, 1)) if directory == release(1) else directory


def write_releases(root):
    """The tiny releases (`release`: 1 layer, and DEEP's) and the tsv data $OUT is fine-tuned on (in the first's
    data/)."""
    from numpy_bert import random_weights, write_tf1_checkpoint

    from bert_tf.model.config import BertConfig

    with open(os.path.join(FIXTURES, "uncased_vocab.txt"), encoding="utf-8") as f:
        vocab = f.read().splitlines()
    for layers in {1, *DEEP.values()}:
        directory = os.path.join(root, release(layers))
        _, config_file = tiny_classifier.write_tiny_model(directory, vocab, max_position_embeddings=512,
                                                          **{**tiny_classifier.L1_H16, "num_hidden_layers": layers})
        weights = random_weights(BertConfig.from_json_file(config_file), seed=2, heads=True)
        write_tf1_checkpoint({name: value for name, value in weights.items()
                              if name.startswith(("bert/", "cls/predictions/", "cls/seq_relationship/"))},
                             os.path.join(directory, "bert_model.ckpt"))
    write_tsv(os.path.join(root, release(1), "data"), random.Random(5))


def write_tsv(directory, rng):
    """Your own tsv data (`id label text_a`, labels LABELS) in `directory`: train, dev and test.tsv."""
    for split in ("train", "dev", "test"):
        tiny_classifier.write_lines(os.path.join(directory, f"{split}.tsv"), ["id\tlabel\ttext_a"] + [
            tiny_classifier.tsv_line(i, LABELS[i % 2], tiny_classifier.random_sentence(rng)) for i in range(ROWS)])


def write_data_dir(directory, script, flags):
    """A `script`'s --data_dir: MRPC or tsv (run_classifier*.py, by --task_name), CoNLL-2003 or SWAG."""
    rng = random.Random(7)
    if script == "run_ner":
        import test_ner
        for name in ("train.txt", "valid.txt", "test.txt"):
            tiny_classifier.write_lines(os.path.join(directory, name), [test_ner.CONLL_SAMPLE])
    elif script == "run_swag":
        import test_swag
        for name in ("train.csv", "val.csv", "test.csv"):
            tiny_classifier.write_lines(os.path.join(directory, name), [test_swag.SWAG_HEADER + "".join(
                test_swag.SWAG_ROWS).rstrip("\n")])
    elif flags.get("task_name", "").lower() == "mrpc":
        tiny_classifier.write_mrpc(directory, rng, train=ROWS, dev=ROWS, test=ROWS)
    else:
        assert flags.get("task_name") == "tsv", f"{script}.py --data_dir={directory}: no fixture for {flags}"
        write_tsv(directory, rng)


def write_squad(path, script, flags):
    """SQuAD json: 2.0 (questions without answers) where the file's name or --version_2_with_negative says so."""
    v2 = "2.0" in os.path.basename(path) or str(flags.get("version_2_with_negative")).lower() == "true"
    copy(os.path.join(FIXTURES, "squad_v2_dev.json" if v2 else "squad_v11_dev.json"), path)


def write_text(path, script, flags):
    """Text lines: the sample corpus (documents apart by blank lines) to pretrain on, sentences with a [MASK] to fill,
    or sentences (pairs `A ||| B` for extract_features.py)."""
    if script == "create_pretraining_data":
        copy(os.path.join(FIXTURES, "sample_text.txt"), path)
    elif script == "predict_masked_lm":
        tiny_classifier.write_lines(path, ["the man went to the [MASK] to buy a gallon of milk .", "[MASK] is red ."])
    else:
        tiny_classifier.write_lines(path, ["the cat sat on the mat", "a dog ran fast ||| it is happy", "good film"])


def copy(source, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(source, path)


# (script, flag) -> writer(path, script, {flag: value}) of that input (0: the first positional argument).
INPUTS = {**{(script, "data_dir"): write_data_dir
             for script in ("run_classifier", "run_classifier_with_tfhub", "run_ner", "run_swag")},
          **{(script, "input_file"): write_text
             for script in ("create_pretraining_data", "extract_features", "predict_masked_lm", "semantic_search")},
          ("run_squad", "train_file"): write_squad, ("run_squad", "predict_file"): write_squad,
          ("evaluate_squad", "data_file"): write_squad, ("evaluate_squad", 0): write_squad}


def write_input(script, name, path, flags):
    """Writes the input `name` (a flag, or 0) of `script` at `path` where INPUTS knows it."""
    if (script, name) in INPUTS:
        INPUTS[script, name](path, script, flags)
