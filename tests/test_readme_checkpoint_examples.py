"""README's checkpoint-format examples, run as README.md writes them (read from it, so that this fails when they change
or break): the bash commands and the Python snippet of "### Hugging Face out" and "### KerasHub presets" (its table's
commands included) and the commands of the "Where BERTs live" table in "## Using original checkpoints".

Their placeholders become tiny fixtures under tmp_path:
- `$BERT_BASE_DIR`: a tiny random original release (L=2, H=32; bert_model.ckpt, bert_config.json, vocab.txt of
  tests/tiny_classifier.py's vocabulary);
- `/models/bert_kh_preset`, `/models/bert_kh_classifier`: a BertBackbone and a 2-class BertTextClassifier preset that
  KerasHub's own code made (random weights, the same vocabulary, lower-cased), as a user downloads them;
- `/tmp/NAME`: tmp_path/tmp/NAME. `/tmp/mrpc_output` is the output_dir of README's own `run_classifier.py ...
  --do_train --save_keras_hub_preset` run, whose `...` is TRAIN: a tiny tsv task fine-tuned from $BERT_BASE_DIR;
- `--flag=...`: VALUES[flag]; the table's commands, which leave `--output_dir` out, get /tmp/table_<i>.

The scripts run in ONE subprocess (tests/script_steps.py: TensorFlow imported once): run_classifier.py's commands,
then convert_checkpoint.py's (README's order; the "Where BERTs live" table's last, its `--hf_model_dir=...` being the
Hugging Face directory the Hugging Face section wrote), then extract_features.py's. Each output is then loaded:
a release or Model Garden checkpoint restored by bert-tf, a Hugging Face directory's config.json (its architectures,
id2label), a preset by KerasHub's from_preset, predictions and features read. The `python -c "import transformers..."`
lines need torch: test_transformers_lines, marker `compare`.
"""
import json
import os
import random
import re
import shlex
import sys

import forkserver
import keras
import numpy as np
import pytest
import script_steps
import tiny_classifier

from bert_tf import checkpoints
from bert_tf.model import encoder
from bert_tf.model.config import BertConfig

keras_hub = pytest.importorskip("keras_hub")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_OUT, KERAS_HUB, FORMATS = "### Hugging Face out", "### KerasHub presets", "## Using original checkpoints"
RUN_ORDER = ("run_classifier", "convert_checkpoint", "extract_features")  # each script's inputs made by those before
NOT_RUN = {"export_saved_model": "tests/export/test_tfhub.py"}  # scripts these sections name, tested elsewhere
LABELS = ["neg", "pos"]
CLASSIFIER_SOURCES = ("/tmp/mrpc_output", "/tmp/mrpc_hf")  # the fine-tuned classifier; it written for transformers
VALUES = {"--init_checkpoint": "$BERT_BASE_DIR", "--hf_model_dir": "/tmp/mrpc_hf", "--task_name": "tsv",
          "--data_dir": "/tmp/data", "--output_dir": "/tmp/predictions", "--input_file": "/tmp/sentences.txt",
          "--output_file": "/tmp/features.jsonl"}
TRAIN = ["--task_name=tsv", "--data_dir=/tmp/data", "--vocab_file=$BERT_BASE_DIR/vocab.txt",
         "--bert_config_file=$BERT_BASE_DIR/bert_config.json", "--init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt",
         "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1", "--seed=1",
         "--output_dir=/tmp/mrpc_output", "--save_original_checkpoint"]
KH_CONFIG = dict(num_layers=4, num_heads=4, hidden_dim=32, intermediate_dim=37, max_sequence_length=128)
# (4 layers, 128 positions: extract_features.py's default --layers=-1,-2,-3,-4 and --max_seq_length=128)


def section(title):
    """The lines of README's section headed `title` (e.g. "### KerasHub presets") up to the next heading of any
    level; `#` lines inside fenced blocks are no headings."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    out, fenced = None, False
    for line in lines:
        fenced ^= line.startswith("```")
        heading = not fenced and line.startswith("#")
        if heading and out is not None:
            break
        if out is not None:
            out.append(line)
        elif heading and line == title:
            out = []
    assert out, f"README.md has no section {title!r} (or it is empty)"
    return out


def fenced_blocks(lines, *languages):
    """The bodies of the fenced blocks in `lines` whose language is one of `languages` ("" for an unlabelled block),
    each one string, in their order."""
    blocks, current, language = [], None, None
    for line in lines:
        if current is None and line.startswith("```"):
            current, language = [], line[3:].strip()
        elif current is not None and line.strip() == "```":
            blocks += ["\n".join(current)] if language in languages else []
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def bash_commands(lines):
    """The commands of the bash blocks in `lines` (continued lines joined, comments dropped), each shlex-split."""
    return [shlex.split(command) for block in fenced_blocks(lines, "bash")
            for command in block.replace("\\\n", " ").splitlines() if command.strip() and not command.startswith("#")]


def table_commands(lines):
    """The backquoted script commands (`python run_scripts/x.py ...` or `x.py ...`) in the table rows of `lines`."""
    spans = [span for line in lines if line.startswith("|") for span in re.findall(r"`([^`]+)`", line)]
    return [shlex.split(span) for span in spans if re.match(r"(python )?(run_scripts/)?\w+\.py ", span)]


def script_of(command):
    """(script name, its flags) of a run_scripts/ command, or None for another command (`python -c ...`)."""
    words = command[1:] if command[0] == "python" else command
    script = re.fullmatch(r"(?:run_scripts/)?(\w+)\.py", words[0])
    return (script.group(1), words[1:]) if script else None


def readme_examples():
    """{script name: [its commands' flags, README's order]}, [the `python -c` codes], the KerasHub Python snippet:
    the Hugging Face section's commands, the KerasHub section's (bash blocks and table), the formats table's."""
    hf, kh, formats = section(HF_OUT), section(KERAS_HUB), section(FORMATS)
    listed = [(command, False) for command in bash_commands(hf) + bash_commands(kh) + table_commands(kh)]
    listed += [(command, True) for command in table_commands(formats)]
    scripts, codes = {name: [] for name in RUN_ORDER}, []
    for i, (command, in_formats_table) in enumerate(listed):
        found = script_of(command)
        if found is None:
            assert command[:2] == ["python", "-c"], f"README.md: a command neither a script nor python -c: {command}"
            codes.append(command[2])
            continue
        name, flags = found
        assert name in RUN_ORDER or name in NOT_RUN, f"README.md names {name}.py here, which this test does not know"
        if in_formats_table and not any(flag.startswith("--output_dir=") for flag in flags):
            flags = [*flags, f"--output_dir=/tmp/table_{i}"]
        if name in RUN_ORDER:
            scripts[name].append(flags)
    snippets = fenced_blocks(kh, "python")
    assert len(snippets) == 1, f"README.md's {KERAS_HUB!r} has {len(snippets)} Python blocks, not the one expected"
    return scripts, codes, snippets[0]


def substitute(text, root, tmp="tmp"):
    """`text` (a flag, or code) with README's placeholders replaced by the fixtures' paths under `root` (/tmp/NAME:
    root/`tmp`/NAME)."""
    text = re.sub(r"(?<![\w.])/(tmp|models)/(\w+)",
                  lambda m: os.path.join(root, tmp if m.group(1) == "tmp" else "models", m.group(2)), text)
    return text.replace("$BERT_BASE_DIR", os.path.join(root, "base"))  # last: root may be under /tmp


def runnable(flags, root):
    """README's flags of one run: a bare `...` -> TRAIN, `--flag=...` -> VALUES[flag], placeholders -> paths."""
    out = []
    for flag in flags:
        name, _, value = flag.partition("=")
        out += TRAIN if flag == "..." else [f"{name}={VALUES[name]}"] if value == "..." else [flag]
    return [substitute(flag, root) for flag in out]


def classifier_command(title, root):
    """(flags, {name: value}) of the one run_classifier.py command of README's section `title`, its placeholders
    replaced by paths under `root` (`substitute`)."""
    (command,) = bash_commands(section(title))
    script, flags = script_of(command)
    assert script == "run_classifier", command
    flags = [substitute(flag, root) for flag in flags]
    return flags, flag_values(flags)


def flag_values(flags):
    """{"name": value (True for a bare boolean flag)} of a run's flags."""
    return {flag.lstrip("-").split("=")[0]: flag.split("=", 1)[1] if "=" in flag else True for flag in flags}


def write_fixtures(root):
    """$BERT_BASE_DIR, the tsv data (train/dev/test, labels LABELS), an output_dir holding the labels for the
    predict-only run, the sentences to extract features of, and the two presets KerasHub itself makes."""
    vocab_file, _, _ = tiny_classifier.write_tiny_release(os.path.join(root, "base"), seed=2)
    rng = random.Random(4)
    for split in ("train", "dev", "test"):
        tiny_classifier.write_lines(os.path.join(root, "tmp", "data", f"{split}.tsv"), ["id\tlabel\ttext_a"] + [
            tiny_classifier.tsv_line(i, rng.choice(LABELS), tiny_classifier.random_sentence(rng)) for i in range(16)])
    tiny_classifier.write_lines(os.path.join(root, "tmp", "predictions", "label_list.txt"), LABELS)
    tiny_classifier.write_lines(os.path.join(root, "tmp", "sentences.txt"),
                                [tiny_classifier.random_sentence(rng) for _ in range(3)])
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=True, strip_accents=True)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(tiny_classifier.VOCAB), **KH_CONFIG)
    backbone.save_to_preset(os.path.join(root, "models", "bert_kh_preset"))
    tokenizer.save_to_preset(os.path.join(root, "models", "bert_kh_preset"))
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    keras_hub.models.BertTextClassifier(backbone, len(LABELS), preprocessor=preprocessor).save_to_preset(
        os.path.join(root, "models", "bert_kh_classifier"))


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, child_env):
    """README's script commands run on the fixtures: (root, {script: [(its run's flags, its error or None)]})."""
    root = str(tmp_path_factory.mktemp("readme"))
    write_fixtures(root)
    scripts, _, _ = readme_examples()
    steps = [(os.path.join(REPO, "run_scripts", f"{name}.py"), [runnable(flags, root) for flags in runs])
             for name, runs in scripts.items() if runs]
    done, logs = script_steps.run(steps, REPO, child_env())
    return root, {os.path.basename(script)[:-3]: list(zip(argvs, step["errors"]))
                  for (script, argvs), step in zip(steps, done)}, logs


def assert_release_loads(directory, head=None):
    """An original release in `directory` restores into bert-tf's encoder (and into a classifier, `head` labels),
    missing nothing."""
    from bert_tf.model import task_models
    config = BertConfig.from_json_file(os.path.join(directory, "bert_config.json"))
    model = task_models.BertClassifier(config, head) if head else encoder.BertModel(config)
    report = checkpoints.restore(model, directory, ("classifier",) if head else (), strict=True)
    assert report.missing == [], (directory, report.missing)


def logits(classifier, texts):
    """A KerasHub text classifier's logits for raw `texts`, called eagerly (`predict` would trace it first)."""
    return keras.ops.convert_to_numpy(classifier(classifier.preprocessor(texts)))


def assert_preset_loads(directory, classifier):
    """KerasHub's own from_preset loads `directory`: a BertTextClassifier of LABELS' classes that runs on raw text,
    or a BertBackbone."""
    if classifier:
        assert logits(keras_hub.models.BertTextClassifier.from_preset(directory), ["the cat sat"]).shape == (
            1, len(LABELS)), directory
    else:
        assert keras_hub.models.BertBackbone.from_preset(directory).vocabulary_size == len(tiny_classifier.VOCAB)


def check_convert(flags, root):
    """The output of a convert_checkpoint.py run, by --to: loads, with the classifier head where the input (the
    training run's output_dir) had one."""
    source = flags.get("init_checkpoint", flags.get("hf_model_dir"))
    classifier = source in [substitute(path, root) for path in CLASSIFIER_SOURCES]
    out, to = flags["output_dir"], flags.get("to", "original")
    if to == "huggingface":
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        assert config["architectures"] == ["BertForSequenceClassification" if classifier else "BertModel"], out
        assert config.get("id2label") in (None, {str(i): label for i, label in enumerate(LABELS)}) and (
            "id2label" in config) == classifier, config
        assert os.path.isfile(os.path.join(out, "model.safetensors")), out
    elif to == "keras_hub":
        assert_preset_loads(out, classifier)
    else:
        assert to in ("original", "model_garden"), to
        assert_release_loads(out, len(LABELS) if classifier else None)


def check_classifier(flags, root):
    """A run_classifier.py run's outputs: the predictions (probabilities over LABELS, a row per test example), or
    the fine-tuned model's label list, preset and original release."""
    out = flags["output_dir"]
    if flags.get("do_predict"):
        probabilities = np.loadtxt(os.path.join(out, "test_results.tsv"), delimiter="\t")
        assert probabilities.shape == (16, len(LABELS))
        np.testing.assert_allclose(probabilities.sum(1), 1, atol=1e-5)
    if flags.get("do_train"):
        with open(os.path.join(out, "model_metadata.json")) as f:
            assert json.load(f)["labels"] == LABELS
        assert flags.get("save_keras_hub_preset") and flags.get("save_original_checkpoint")
        assert_preset_loads(os.path.join(out, "keras_hub"), classifier=True)
        assert_release_loads(os.path.join(out, "original"), len(LABELS))


def check_features(flags, root):
    """An extract_features.py run's JSON lines: one per input line, with 4 layers of H=32 values per token."""
    with open(flags["input_file"]) as f:
        count = len(f.read().splitlines())
    with open(flags["output_file"]) as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == count and all(len(layer["values"]) == KH_CONFIG["hidden_dim"] for line in lines
                                       for token in line["features"] for layer in token["layers"])


CHECKS = {"convert_checkpoint": check_convert, "run_classifier": check_classifier, "extract_features": check_features}


@pytest.mark.slow
def test_readme_commands_run_and_their_outputs_load(readme_run):
    """Every run_classifier.py, convert_checkpoint.py and extract_features.py command of the sections runs without
    an error, and what it wrote loads."""
    root, runs, logs = readme_run
    to = sorted(flag_values(flags).get("to", "original") for flags, _ in runs["convert_checkpoint"])
    assert to == ["huggingface", "huggingface", "keras_hub", "keras_hub", "keras_hub", "model_garden", "original",
                  "original", "original"], to  # what the sections hold: each format written and read back
    assert [len(runs[name]) for name in RUN_ORDER] == [2, 9, 1]
    for name in RUN_ORDER:
        for flags, error in runs[name]:
            assert error is None, f"README.md: {name}.py {' '.join(flags)}\n{error}\n{logs[-3000:]}"
            CHECKS[name](flag_values(flags), root)


@pytest.mark.slow
def test_readme_python_snippet(readme_run):
    """The KerasHub section's Python snippet, run in this process: the preset KerasHub made, restored through
    bert-tf's loader and written back as a preset, gives KerasHub the logits of the one it was made from."""
    root, _, _ = readme_run
    _, _, snippet = readme_examples()
    exec(compile(substitute(snippet, root, tmp="snippet"), f"README.md {KERAS_HUB!r}", "exec"), {})
    texts = ["the cat sat on the mat", "a big red dog ran fast"]
    written = keras_hub.models.BertTextClassifier.from_preset(substitute("/tmp/bert_kh", root, tmp="snippet"))
    source = keras_hub.models.BertTextClassifier.from_preset(substitute("/models/bert_kh_classifier", root))
    np.testing.assert_allclose(logits(written, texts), logits(source, texts), atol=1e-5)


@pytest.mark.compare
def test_transformers_lines(readme_run, child_env):
    """The Hugging Face section's `python -c "import transformers; ..."` lines load what its commands wrote."""
    root, _, _ = readme_run
    _, codes, _ = readme_examples()
    assert codes, f"README.md's {HF_OUT!r} has no python -c line"
    for code in codes:
        result = forkserver.run([sys.executable, "-c", substitute(code, root)], capture_output=True, text=True,
                                env=child_env(), timeout=300)
        assert result.returncode == 0, f"README.md: python -c {code!r}\n{result.stderr[-3000:]}"
