r"""Frozen layers (--freeze_layers): peak resident memory and step time of a training step with the embeddings and
the K lowest transformer layers fixed, each K in a process of its own.

A child (this script with --child=K) trains run_classifier.py's model (BertClassifier, 2 labels) of a released
bert_config.json (--model, dropout as released) from random initial weights with the Trainer (one device, float32,
the original's AdamWeightDecay, one update per loop) on random token ids (--batch_size x --seq_length, no padding),
--warmup + --steps updates, as benchmarks/gradient_checkpointing.py's child does (its StepLog: the seconds of each
update from the Trainer's log lines, the peak resident memory VmHWM at the last one, before the final checkpoint).
It also reports the trainable variables and the optimizer's slot variables (none for a frozen weight).

Example (K = 0: nothing frozen; -1: the whole encoder, only the classifier trains):
  python benchmarks/frozen_layers.py --model uncased_L-12_H-768_A-12 --freeze 0,6,12,-1 --batch_size 8 \
    --seq_length 128
"""
import argparse
import datetime
import os
import statistics
import sys
import tempfile

import gradient_checkpointing
import measure

REPO = measure.REPO


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="uncased_L-12_H-768_A-12", help="A directory of configs/.")
    p.add_argument("--freeze", default="0,6,12,-1", help="Comma-separated --freeze_layers values.")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--seq_length", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1, help="Untimed updates first (the first one traces).")
    p.add_argument("--steps", type=int, default=3, help="Timed updates.")
    p.add_argument("--rounds", type=int, default=1, help="Runs of every K (alternated).")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "frozen_layers_benchmark"))
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)  # internal: the child's K
    return p.parse_args(argv)


def child_main(args):
    from bert_tf.model.config import BertConfig

    bert_config = BertConfig.from_json_file(os.path.join(REPO, "configs", args.model, "bert_config.json"))
    trainer, log = gradient_checkpointing.train_steps(
        bert_config, args.batch_size, args.seq_length, args.warmup + args.steps,
        os.path.join(args.work_dir, "runs", f"freeze_{args.child}"), freeze_layers=args.child)
    timed = log.steps[args.warmup:]
    measure.emit_result({
        "step_seconds": [s["seconds"] for s in timed], "peak_rss_before_save_mb": timed[-1]["peak_rss_mb"],
        "trainable_variables": len(trainer.model.trainable_variables), "variables": len(trainer.model.weights),
        "slot_variables": sum(v.name.endswith(("_adam_m", "_adam_v")) for v in trainer.optimizer.variables),
        "losses": [s["loss"] for s in log.steps], "threads": measure.thread_info()})


def main(argv=None):
    args = parse_args(argv)
    if args.child is not None:
        child_main(args)
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    script = os.path.abspath(__file__)
    common = [f"--model={args.model}", f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}",
              f"--warmup={args.warmup}", f"--steps={args.steps}", f"--work_dir={args.work_dir}"]

    def run_one(k, round_index):
        print(f"round {round_index + 1}: --freeze_layers={k} ...", file=sys.stderr, flush=True)
        run = measure.run_child([sys.executable, script, f"--child={k}", *common], args.work_dir, f"freeze_{k}")
        return measure.child_result(run)

    results = measure.alternate([int(k) for k in args.freeze.split(",")], args.rounds, run_one)
    print(f"# Frozen layers, {datetime.date.today()}: {measure.describe_machine(measure.machine_info())}")
    print(f"{args.model}, batch {args.batch_size} x {args.seq_length}, float32, {args.warmup} untimed + "
          f"{args.steps} timed updates per child, {args.rounds} round(s)\n")
    print("| --freeze_layers | trainable / all variables | optimizer slots | peak RSS (GB) | step (s), median "
          "(min-max) | load |\n|---|---|---|---|---|---|")
    rows = {}
    for k, runs in results.items():
        step = measure.spread([statistics.median(r["step_seconds"]) for r in runs])
        rows[k] = {"step_seconds": step, "peak_gb": max(r["peak_rss_before_save_mb"] for r in runs) / 1024}
        print(f"| {k} | {runs[0]['trainable_variables']} / {runs[0]['variables']} | {runs[0]['slot_variables']} | "
              f"{rows[k]['peak_gb']:.2f} | {step['median']:.2f} ({step['min']:.2f}-{step['max']:.2f}) | "
              f"{max(r['load'] for r in runs):.1f} |")
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "results": results})
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
