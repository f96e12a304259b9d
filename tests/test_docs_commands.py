"""The documented export commands run: every `python run_scripts/export_saved_model.py ...` command of
docs/serving.md, README.md and the script's docstring (its --help), read from those files, so that an edit of the
docs is what gets tested.

Their placeholders become tiny fixtures under tmp_path:
- `$BERT`, `$BERT_BASE_DIR`, `$MINILM`: a tiny random original release (L=1, H=16, 512 positions; bert_model.ckpt
  with the pretraining heads, as Google's releases, bert_config.json, vocab.txt of tests/tiny_classifier.py's
  vocabulary);
- `$MRPC_OUT`, `$OUT`: the output_dir of a run_classifier.py run fine-tuned from it (labels 0 and 1);
- an absolute path (`/models/mrpc`, `/hub/encoder`, `/tmp/hub_encoder`): the same path under tmp_path;
- a bare `...` (the flags "as above"): the release's --vocab_file and --bert_config_file and an --export_dir,
  where not given;
  `[--flag=...]` (an option) is left out.
Every command's inputs (--init_checkpoint, --vocab_file, --bert_config_file, a --label_list file) must exist; of the
commands that export by one route (a format; the preprocessing model apart) the one naming the most flags runs, then
each command that names a flag no run named, so that every route and every documented flag runs once; the others
differ in task and settings, which tests/export/ exports by the same route (each export costs seconds). The scripts
run in one process (tests/script_steps.py): run_classifier.py, then the exports; each export is loaded back once (a
SavedModel by tf.saved_model.load, model.tflite by LiteRT's interpreter, model.onnx by onnxruntime).
"""
import json
import os
import random
import re
import shlex

import numpy as np
import pytest
import script_steps
import tiny_classifier

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = "run_scripts/export_saved_model.py"
SOURCES = ("docs/serving.md", "README.md", SCRIPT)
# The fixture each placeholder stands for: a directory under tmp_path.
PLACEHOLDERS = {"BERT": "bert", "BERT_BASE_DIR": "bert", "MINILM": "bert", "MRPC_OUT": "out", "OUT": "out"}
AS_ABOVE = ["--vocab_file=$BERT/vocab.txt", "--bert_config_file=$BERT/bert_config.json",  # a bare `...`
            "--export_dir=/models/as_above"]
LABELS = ["0", "1"]
TRAIN = ["--task_name=tsv", "--do_train", "--data_dir=$BERT/data", "--vocab_file=$BERT/vocab.txt",
         "--bert_config_file=$BERT/bert_config.json", "--init_checkpoint=$BERT/bert_model.ckpt",
         "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1", "--seed=1", "--output_dir=$OUT"]


def documented_commands(source):
    """The export commands of the file `source` (relative to the repository; continued lines joined, comments
    dropped), each a list of its arguments."""
    with open(os.path.join(REPO, source), encoding="utf-8") as f:
        lines = f.read().replace("\\\n", " ").splitlines()
    command = f"python {SCRIPT} "
    return [shlex.split(line.strip()[len(command):], comments=True) for line in lines
            if line.strip().startswith(command)]


def runnable(arguments, root):
    """A documented command's arguments, run as this test runs them (module docstring)."""
    given = {argument.split("=")[0] for argument in arguments}
    out = []
    for argument in arguments:
        if argument == "...":
            out += [flag for flag in AS_ABOVE if flag.split("=")[0] not in given]
        elif not argument.startswith("["):
            out.append(argument)
    return [bind(argument, root) for argument in out]


def bind(argument, root):
    """`argument` with its absolute path moved under `root`/abs and its placeholders bound to the fixtures."""
    def placeholder(match):
        assert match.group(1) in PLACEHOLDERS, f"a documented command uses ${match.group(1)}, unknown to this test"
        return os.path.join(root, PLACEHOLDERS[match.group(1)])

    return re.sub(r"\$(\w+)", placeholder, re.sub(r"^(--\w+=)/", rf"\g<1>{root}/abs/", argument))


def flag_values(arguments):
    """{name: value} of a command's --name=value arguments."""
    return dict(argument.lstrip("-").split("=", 1) for argument in arguments if "=" in argument)


def export_route(arguments):
    """(format, whether it is the preprocessing model) of a command."""
    flags = flag_values(arguments)
    return flags.get("format", "serving"), flags.get("task") == "preprocessing"


def missing_input(flags):
    """The error of the first input of a command's `flags` that does not exist, or None."""
    from bert_tf import checkpoints

    files = [flags.get(name) for name in ("vocab_file", "bert_config_file")]
    files.append(flags["label_list"] if "/" in flags.get("label_list", "") else None)
    try:
        if "init_checkpoint" in flags:
            checkpoints.resolve_checkpoint(flags["init_checkpoint"])
        return next((f"no file {path}" for path in files if path and not os.path.isfile(path)), None)
    except FileNotFoundError as e:
        return str(e)


def write_fixtures(root):
    """The tiny release and its tsv data (labels LABELS)."""
    from numpy_bert import random_weights, write_tf1_checkpoint

    from bert_tf.model.config import BertConfig

    release = os.path.join(root, "bert")
    _, config_file = tiny_classifier.write_tiny_model(release, max_position_embeddings=512, **tiny_classifier.L1_H16)
    weights = random_weights(BertConfig.from_json_file(config_file), seed=2, heads=True)
    write_tf1_checkpoint({name: value for name, value in weights.items()
                          if name.startswith(("bert/", "cls/predictions/", "cls/seq_relationship/"))},
                         os.path.join(release, "bert_model.ckpt"))
    rng = random.Random(5)
    tiny_classifier.write_lines(os.path.join(release, "data", "train.tsv"), ["id\tlabel\ttext_a"] + [
        tiny_classifier.tsv_line(i, LABELS[i % 2], tiny_classifier.random_sentence(rng)) for i in range(8)])


def load(version_dir):
    """Loads the export in `version_dir` with its format's runtime; returns its format."""
    with open(os.path.join(version_dir, "assets.extra", "export_metadata.json")) as f:
        fmt = json.load(f)["format"]
    if fmt == "litert":
        from ai_edge_litert.interpreter import Interpreter
        runner = Interpreter(model_path=os.path.join(version_dir, "model.tflite")).get_signature_runner()
        assert runner(input_ids=np.ones((1, 4), np.int32), input_mask=np.ones((1, 4), np.int32),
                      segment_ids=np.zeros((1, 4), np.int32))
    elif fmt == "onnx":
        import onnxruntime
        assert onnxruntime.InferenceSession(os.path.join(version_dir, "model.onnx")).get_inputs()
    else:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (the TF Text ops of the text signatures)
        assert tf.saved_model.load(version_dir).signatures
    return fmt


@pytest.mark.slow
def test_documented_export_commands_run_and_load(tmp_path, child_env):
    """Every documented export command's inputs exist; the commands picked (module docstring) run without an
    error, and what each wrote loads."""
    root = str(tmp_path)
    documented = {source: documented_commands(source) for source in SOURCES}
    assert all(documented.values()), {source: len(commands) for source, commands in documented.items()}
    listed = [(source, arguments, {argument.split("=")[0] for argument in arguments if argument.startswith("--")})
              for source, commands in documented.items() for arguments in commands]
    chosen = {}  # route -> its command naming the most flags (the first of those)
    for source, arguments, flags in listed:
        route = export_route(arguments)
        if len(flags) > len(chosen.get(route, (None, None, ()))[2]):
            chosen[route] = source, arguments, flags
    picked = list(chosen.values())
    named = set().union(*(flags for _, _, flags in picked))
    for source, arguments, flags in listed:  # then each command naming a flag no run named
        if not flags <= named:
            picked.append((source, arguments, flags))
            named |= flags
    write_fixtures(root)
    runs = [runnable(arguments, root) for _, arguments, _ in picked]
    steps = [(os.path.join(REPO, "run_scripts", "run_classifier.py"), [[bind(flag, root) for flag in TRAIN]]),
             (os.path.join(REPO, SCRIPT), runs)]
    (trained, exported), logs = script_steps.run(steps, REPO, child_env())
    assert trained["errors"] == [None], logs[-3000:]
    for source, commands in documented.items():
        for arguments in commands:
            error = missing_input(flag_values(runnable(arguments, root)))
            assert error is None, f"{source}: python {SCRIPT} {' '.join(arguments)}\n{error}"
    for (source, arguments, _), error in zip(picked, exported["errors"]):
        assert error is None, f"{source}: python {SCRIPT} {' '.join(arguments)}\n{error}\n{logs[-3000:]}"
    export_dirs = sorted({flag.split("=", 1)[1] for run in runs for flag in run if flag.startswith("--export_dir=")})
    versions = [os.path.join(base, version) for base in export_dirs for version in sorted(os.listdir(base))]
    assert len(versions) == len(runs), versions
    formats = sorted(load(version) for version in versions)
    assert formats == sorted(export_route(arguments)[0] for _, arguments, _ in picked), formats
