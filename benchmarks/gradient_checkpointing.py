r"""Gradient checkpointing (--gradient_checkpointing): peak resident memory and step time of a training step with
and without it, BERT-base and BERT-large, each configuration in a process of its own.

A child (this script with --child) trains run_classifier.py's model (BertClassifier, 2 labels) of a released
bert_config.json (configs/; dropout 0.1 as released) from random initial weights with the Trainer
(bert_tf.training.trainer, one device, float32 unless --mixed_precision): each update is the forward with dropout
on, the loss, the backward, clipping and the original's AdamWeightDecay update, one update per loop
(iterations_per_loop 1), on random token ids (batch x --seq_length, no padding). It runs --warmup + --steps updates
and reports each update's loss (the same with and without checkpointing: the same dropout masks), the time of the
last --steps (from the Trainer's log line of one loop to the next's) and the process's peak resident memory at the
last update's log line (VmHWM of /proc/self/status: TensorFlow, the weights, their gradients, the optimizer's two
slots per weight, which checkpointing does not change, and the activations kept for the backward pass, which it
does); the Trainer then writes its final checkpoint, and the child's whole-life peak (ru_maxrss, os.wait4) is
reported beside it.

Configurations: every model of --models (its batch size from --batch_sizes) with checkpointing off and on, and the
models of --xla_models also under --use_xla (the gradient step compiled with XLA). Each runs in its own child,
--rounds times, alternating (benchmarks/measure.py); reported: the median over rounds of the step time (with
min-max) and the largest peak, the highest 1-minute load average at a child's start (other processes on the
machine slow the steps, not the memory), and per model and compilation the memory saved and the time added.

Example (about 12 minutes a round on 2 cores):
  python benchmarks/gradient_checkpointing.py --models base,large --batch_sizes 4,2 --xla_models base
"""
import argparse
import datetime
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import measure

REPO = measure.REPO
MODELS = {"base": "uncased_L-12_H-768_A-12", "large": "uncased_L-24_H-1024_A-16"}
DISTRIBUTIONS = ("tensorflow", "keras", "numpy")
_STEP_LOG = re.compile(r"step \d+/\d+ loss (\S+) ")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="base,large", help=f"Comma-separated, from {', '.join(MODELS)}.")
    p.add_argument("--batch_sizes", default="4,2", help="Comma-separated: the batch size of each of --models.")
    p.add_argument("--xla_models", default="base", help="Models also measured with --use_xla (comma-separated).")
    p.add_argument("--seq_length", type=int, default=512)
    p.add_argument("--warmup", type=int, default=1, help="Untimed updates first (the first one compiles).")
    p.add_argument("--steps", type=int, default=2, help="Timed updates.")
    p.add_argument("--rounds", type=int, default=1, help="Runs of every configuration (alternated).")
    p.add_argument("--mixed_precision", default="float32", choices=("float32", "mixed_float16", "mixed_bfloat16"))
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "gradient_checkpointing_benchmark"),
                   help="Where the logs and the children's output_dirs go.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: the configuration's JSON
    args = p.parse_args(argv)
    if args.child:
        return args
    args.models = [m for m in args.models.split(",") if m]
    args.xla_models = [m for m in args.xla_models.split(",") if m]
    sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    if any(m not in MODELS for m in args.models + args.xla_models) or not set(args.xla_models) <= set(args.models):
        p.error(f"--models, --xla_models: from {', '.join(MODELS)}, the XLA ones among --models")
    if len(sizes) != len(args.models) or min(sizes) < 1:
        p.error("--batch_sizes: one positive batch size per model of --models")
    if args.steps < 1 or args.warmup < 1 or args.rounds < 1:
        p.error("--steps, --warmup and --rounds must be >= 1")
    args.batch_sizes = dict(zip(args.models, sizes))
    return args


def configurations(args):
    """[{"model", "batch_size", "use_xla", "gradient_checkpointing"}, ...]: each model without XLA, the --xla_models
    with it, checkpointing off then on."""
    return [{"model": model, "batch_size": args.batch_sizes[model], "use_xla": xla, "gradient_checkpointing": on}
            for model in args.models for xla in (False, True) if not xla or model in args.xla_models
            for on in (False, True)]


def name(config):
    """A configuration's short name, e.g. 'base xla checkpointing'."""
    return " ".join([config["model"]] + ["xla"] * config["use_xla"] + ["checkpointing"] * config[
        "gradient_checkpointing"])


# --- the child ----------------------------------------------------------------------------------------------------


def peak_rss_mb():
    """This process's peak resident memory so far (VmHWM), in MB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


class StepLog(logging.Handler):
    """Collects the Trainer's per-loop log lines (one update each): the update's loss, its seconds since the
    previous line (the first: since `start`, a time.time()) and the peak resident memory when it was logged."""

    def __init__(self, start):
        super().__init__()
        self.last = start
        self.steps = []

    def emit(self, record):
        match = _STEP_LOG.match(record.getMessage())
        if match:
            self.steps.append({"loss": float(match[1]), "seconds": record.created - self.last,
                               "peak_rss_mb": peak_rss_mb()})
            self.last = record.created


def train_steps(bert_config, batch, seq_length, steps, output_dir, **settings):
    """Trains a BertClassifier (2 labels) of `bert_config` from random weights for `steps` updates on random token
    ids (batch x seq_length, no padding) with the Trainer (one device, one update per loop, `settings`), in a new
    `output_dir`. Returns (the Trainer, its StepLog)."""
    import numpy as np
    import tensorflow as tf
    from absl import logging as absl_logging

    from bert_tf.model.task_models import BertClassifier
    from bert_tf.training import distribute
    from bert_tf.training.trainer import Trainer

    rng = np.random.RandomState(0)
    ids = rng.randint(1000, bert_config.vocab_size, (batch, seq_length)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    labels = {"label_ids": rng.randint(0, 2, batch).astype(np.int32)}

    def dataset_fn(batch_size, ctx=None, seed=None):
        return tf.data.Dataset.from_tensors((features, labels)).repeat()

    def loss_fn(labels, outputs):
        return tf.keras.losses.sparse_categorical_crossentropy(labels["label_ids"], outputs["logits"],
                                                               from_logits=True)

    absl_logging.set_verbosity(absl_logging.INFO)
    tf.keras.utils.set_random_seed(0)
    shutil.rmtree(output_dir, ignore_errors=True)  # a new run, not the resumption of an earlier one
    trainer = Trainer(lambda: BertClassifier(bert_config, 2), loss_fn, output_dir,
                      strategy=distribute.get_strategy("one_device"), iterations_per_loop=1,
                      save_checkpoints_steps=10 ** 9, keep_checkpoint_max=1, **settings)
    log = StepLog(time.time())
    logging.getLogger("absl").addHandler(log)
    trainer.train(dataset_fn, batch, steps, 0, seed=0)
    return trainer, log


def child_main(args):
    from bert_tf.model.config import BertConfig

    config = json.loads(args.child)
    bert_config = BertConfig.from_json_file(os.path.join(REPO, "configs", MODELS[config["model"]],
                                                         "bert_config.json"))
    _, log = train_steps(bert_config, config["batch_size"], args.seq_length, args.warmup + args.steps,
                         os.path.join(args.work_dir, "runs", name(config).replace(" ", "_")),
                         use_xla=config["use_xla"], mixed_precision=args.mixed_precision,
                         gradient_checkpointing=config["gradient_checkpointing"])
    timed = log.steps[args.warmup:]
    measure.emit_result({"losses": [s["loss"] for s in log.steps],
                         "step_seconds": [s["seconds"] for s in timed], "peak_rss_before_save_mb":
                         timed[-1]["peak_rss_mb"], "first_step_seconds": log.steps[0]["seconds"],
                         "threads": measure.thread_info()})


# --- the parent ---------------------------------------------------------------------------------------------------


def run_rounds(args):
    """Each configuration in its own child, --rounds times alternating: {name: [result of each round]}."""
    configs = {name(c): c for c in configurations(args)}
    results = {n: [] for n in configs}
    script = os.path.abspath(__file__)
    common = [f"--seq_length={args.seq_length}", f"--warmup={args.warmup}", f"--steps={args.steps}",
              f"--mixed_precision={args.mixed_precision}", f"--work_dir={args.work_dir}"]

    def run_one(config_name, round_index):
        print(f"round {round_index + 1}: {config_name} ...", file=sys.stderr, flush=True)
        cmd = [sys.executable, script, f"--child={json.dumps(configs[config_name])}", *common]
        results[config_name].append(measure.child_result(measure.run_child(cmd, args.work_dir,
                                                                           config_name.replace(" ", "_"))))

    measure.alternate(list(configs), args.rounds, run_one)
    return configs, results


def summarize(configs, results):
    """One row per configuration: medians over rounds of the step time, the largest peaks (GB)."""
    rows = []
    for config_name, config in configs.items():
        runs = results[config_name]
        medians = [statistics.median(r["step_seconds"]) for r in runs]
        rows.append({**config, "name": config_name, "step_seconds": measure.spread(medians),
                     "peak_gb": max(r["peak_rss_before_save_mb"] for r in runs) / 1024,
                     "peak_with_save_gb": max(r["peak_rss_mb"] for r in runs) / 1024,
                     "first_step_seconds": statistics.median(r["first_step_seconds"] for r in runs),
                     "load": max(r["load"] for r in runs), "losses": runs[0]["losses"]})
    return rows


def savings(rows):
    """Per model and compilation: memory saved (GB, %) and time added (%) by checkpointing."""
    by_key = {(r["model"], r["use_xla"], r["gradient_checkpointing"]): r for r in rows}
    out = []
    for (model, xla, on), row in by_key.items():
        if on:
            off = by_key[(model, xla, False)]
            out.append({"model": model, "use_xla": xla, "saved_gb": off["peak_gb"] - row["peak_gb"],
                        "saved_percent": 100 * (1 - row["peak_gb"] / off["peak_gb"]),
                        "time_percent": 100 * (row["step_seconds"]["median"] / off["step_seconds"]["median"] - 1)})
    return out


def print_report(args, rows, machine, threads):
    print(f"# Gradient checkpointing, {datetime.date.today()}: {measure.describe_machine(machine)}")
    print(f"seq_length {args.seq_length}, {args.mixed_precision}, dropout on, {args.warmup} untimed + {args.steps} "
          f"timed updates per child, {args.rounds} round(s); threads {threads}; "
          f"versions {measure.versions(DISTRIBUTIONS)}\n")
    print("| model | batch x seq | XLA | checkpointing | peak RSS (GB) | peak incl. checkpoint write (GB) | "
          "step (s), median (min-max) | first update, tracing included (s) | load | losses (first round) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["step_seconds"]
        print(f"| {r['model']} | {r['batch_size']} x {args.seq_length} | {'yes' if r['use_xla'] else 'no'} | "
              f"{'on' if r['gradient_checkpointing'] else 'off'} | {r['peak_gb']:.2f} | "
              f"{r['peak_with_save_gb']:.2f} | {s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}) | "
              f"{r['first_step_seconds']:.1f} | {r['load']:.1f} | {' '.join(f'{x:.4f}' for x in r['losses'])} |")
    print("\n| model | XLA | memory saved | step time added |\n|---|---|---|---|")
    for s in savings(rows):
        print(f"| {s['model']} | {'yes' if s['use_xla'] else 'no'} | {s['saved_gb']:.2f} GB "
              f"({s['saved_percent']:.0f}%) | {s['time_percent']:+.0f}% |")


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    configs, results = run_rounds(args)
    rows = summarize(configs, results)
    threads = next(iter(results.values()))[0]["threads"]
    print_report(args, rows, measure.machine_info(), threads)
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "savings": savings(rows), "results": results})
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
