r"""The XLA training step of run_pretraining.py --use_xla: timed on this CPU, and dumped as HLO for a GPU.

The step is built as the Trainer builds it: run_pretraining's model and loss (`PretrainingTask`: BertPretrainer,
masked-LM + next-sentence loss), the Trainer's optimizer (`update.build_optimizer`: the original's AdamWeightDecay,
warmup then linear decay) and its update step (`update.Update`, one replica, --precision), on a random batch of
--batch_size x --max_seq_length with --max_predictions_per_seq masked positions (every token real). Three ways of
compiling it (--modes; `update.xla_programs`):
  whole      the whole update in one XLA program, as --use_xla runs it on one GPU: forward with dropout, losses,
             backward, global norm, clipping, loss scaling and the optimizer's update
  gradients  only the gradients in XLA (forward, losses, backward), the norm, clipping and the optimizer's update
             outside, as --use_xla runs it on the CPU
  replicas   the gradients in one program and the optimizer's update in another (`BertOptimizer.jit_update`), the
             norm and clipping outside: the programs --use_xla runs on each of several GPU replicas, here on one
             (without the all-reduce between them)
and --dropout: `config` (the bert_config's rates) and/or `0` (no dropout: what its random numbers cost).

--time: each mode and dropout in a process of its own (this script with --child), --rounds times, alternated; a
child compiles, runs --warmup steps, then times --steps steps (one tf.function loop over them, as the Trainer's
training loop) and reports ms per step, in wall and in CPU time (the process's, all threads: steadier where other
work shares the cores). The table gives the median over rounds with min-max, and the peak RSS.
--optimizer_only: time only the optimizer's update of modes gradients (TensorFlow's ops) and replicas (one XLA
program), on fixed random gradients (no loss: "-").

--dump_dir DIR: writes each mode's program for each --dropout as
DIR/<config>_<batch>x<seq>_<program>[_dropout0].train.pb, a serialized HloModuleProto before XLA's optimizations,
with a .txt copy and a .json of its shapes and model sizes, for compiling on a machine without TensorFlow (e.g. with
jaxlib's XLA on a GPU; BENCHMARKS.md, "The XLA training step on GPUs"). The program is the mode's, but for
`replicas`, which writes its two: `gradients` (the gradients mode's program) and `optimizer_update` (its arguments:
the variables, the optimizer's state, the clipped gradients and the learning rate; no model FLOPs, so the proxy's MFU
means nothing for it).

  python benchmarks/xla_step.py --time --bert_config_file=configs/uncased_L-4_H-256_A-4/bert_config.json \
      --batch_size=16 --max_seq_length=128
  python benchmarks/xla_step.py --dump_dir=/tmp/hlo \
      --bert_config_file=configs/uncased_L-24_H-1024_A-16/bert_config.json --batch_size=256 \
      --max_seq_length=128 --precision=mixed_bfloat16
"""
import argparse
import json
import os
import sys
import time

import measure

MODES = ("whole", "gradients", "replicas")
DEFAULT_CONFIG = os.path.join(measure.REPO, "configs", "uncased_L-4_H-256_A-4", "bert_config.json")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bert_config_file", default=DEFAULT_CONFIG)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=None, help="Default: 20 x max_seq_length / 128.")
    p.add_argument("--precision", default="float32", choices=("float32", "mixed_float16", "mixed_bfloat16"))
    p.add_argument("--modes", default=",".join(MODES), help=f"Comma-separated, from {MODES}.")
    p.add_argument("--dropout", default="config,0", help="Comma-separated: config (its rates) and/or 0.")
    p.add_argument("--time", action="store_true", help="Time the modes on this CPU.")
    p.add_argument("--optimizer_only", action="store_true", help="Time the optimizer's update alone.")
    p.add_argument("--dump_dir", default=None, help="Write each mode's HLO here.")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--work_dir", default="/tmp/xla_step_benchmark")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: "<mode>:<dropout>"
    args = p.parse_args(argv)
    args.max_predictions_per_seq = args.max_predictions_per_seq or max(1, 20 * args.max_seq_length // 128)
    args.modes = args.modes.split(",")
    if set(args.modes) - set(MODES):
        p.error(f"--modes: expected some of {MODES}, got {args.modes}")
    if args.optimizer_only and "whole" in args.modes:
        p.error("--optimizer_only: the whole mode has no optimizer's update of its own (--modes=gradients,replicas)")
    return args


def build_step(args, mode, dropout):
    """(the Update of `mode`, its inputs (features, labels), the model's BertConfig) for `dropout` ("config" or
    "0")."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.tasks.pretraining import PretrainingTask
    from bert_tf.training import distribute, losses, update
    from bert_tf.training.config import RunConfig

    tf.keras.utils.set_random_seed(0)  # the same weights and dropout masks in every process
    config = BertConfig.from_json_file(args.bert_config_file)
    if dropout == "0":
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    distribute.set_precision(args.precision)
    strategy = distribute.get_strategy("one_device")
    task = PretrainingTask(input_file="unused", max_predictions_per_seq=args.max_predictions_per_seq)
    with strategy.scope():
        model = task.build_model(config)
    settings = RunConfig(mixed_precision=args.precision, use_xla=True)
    optimizer = update.build_optimizer(strategy, model, settings, 1000, 100)
    loss = losses.as_batch_loss(task.loss)
    step = update.Update(strategy, model, loss, optimizer, use_xla=True, programs=mode)
    rng = np.random.default_rng(0)
    b, s, p = args.batch_size, args.max_seq_length, args.max_predictions_per_seq
    features = {"input_ids": tf.constant(rng.integers(0, config.vocab_size, (b, s)), tf.int32),
                "input_mask": tf.ones((b, s), tf.int32),
                "segment_ids": tf.constant(np.repeat([[0] * (s // 2) + [1] * (s - s // 2)], b, 0), tf.int32),
                "masked_lm_positions": tf.constant(rng.integers(1, s, (b, p)), tf.int32)}
    labels = {"masked_lm_ids": tf.constant(rng.integers(0, config.vocab_size, (b, p)), tf.int32),
              "masked_lm_weights": tf.ones((b, p), tf.float32),
              "next_sentence_labels": tf.constant(rng.integers(0, 2, (b, 1)), tf.int32)}
    return strategy, step, (features, labels), config


def time_child(args, mode, dropout):
    """Times `mode` in this process: ms per step (or optimizer's update) over --steps after --warmup."""
    import tensorflow as tf

    strategy, step, inputs, _ = build_step(args, mode, dropout)
    variables = step.model.trainable_variables
    grads = [tf.random.stateless_normal(v.shape, (0, i), stddev=1e-3) for i, v in enumerate(variables)]

    def replica_step():
        if args.optimizer_only:
            step.optimizer.apply_gradients(zip(grads, variables))
            return tf.constant(float("nan"))
        shares, _ = step.replica_step(inputs)
        return shares["loss"]

    @tf.function(autograph=False)
    def loop(steps):
        def body(i, loss):
            return i + 1, strategy.reduce("SUM", strategy.run(replica_step), axis=None)
        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), tf.constant(0.0)))[1]

    start = time.perf_counter()
    loop(tf.constant(args.warmup)).numpy()
    first = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), time.process_time()
    loss = float(loop(tf.constant(args.steps)).numpy())
    ms = (time.perf_counter() - start) / args.steps * 1e3
    cpu_ms = (time.process_time() - cpu_start) / args.steps * 1e3
    measure.emit_result({"ms_per_step": ms, "cpu_ms_per_step": cpu_ms, "warmup_seconds": first, "loss": loss})


def compiler_ir(function, *call_args):
    """(the serialized HloModuleProto, its text) of the tf.function `function` on `call_args`."""
    ir = function.experimental_get_compiler_ir(*call_args)
    return ir(stage="hlo_serialized"), ir(stage="hlo")


def dump(args):
    """Writes the HLO of each mode and --dropout into --dump_dir."""
    os.makedirs(args.dump_dir, exist_ok=True)
    for mode in args.modes:
        for dropout in args.dropout.split(","):
            dump_one(args, mode, dropout)


def dump_one(args, mode, dropout):
    """Writes the HLO of `mode`'s programs with `dropout` ("config" or "0") into --dump_dir, in a fresh build of the
    step (each mode and dropout its own model, as in its own process)."""
    import tensorflow as tf

    from bert_tf.training import losses

    strategy, step, inputs, config = build_step(args, mode, dropout)
    if mode == "whole":
        programs = {"whole": (step.compiled_step, (inputs,))}
    else:
        programs = {"gradients": (tf.function(step.gradients_fn, jit_compile=True, autograph=False),
                                  (*inputs, losses.sums(step.loss, step.loss.weights(inputs[1]))))}
    if mode == "replicas":  # dense gradients, as clipping gives them; the learning rate of the first update
        optimizer = getattr(step.optimizer, "inner_optimizer", step.optimizer)
        variables = step.model.trainable_variables
        programs["optimizer_update"] = (optimizer.device_update(variables),
                                        ([tf.zeros_like(v) for v in variables], optimizer.learning_rate))
    for program, (function, call_args) in programs.items():
        hlo = strategy.run(compiler_ir, args=(function, *call_args))  # traced in the replica's context
        write_hlo(args, hlo, program, dropout, step.model, config)


def write_hlo(args, hlo, program, dropout, model, config):
    """Writes `hlo` ((serialized, text)) of `program` and its .json into --dump_dir."""
    import numpy as np

    name = os.path.basename(os.path.dirname(os.path.abspath(args.bert_config_file)))
    suffix = "_dropout0" if dropout == "0" else ""
    stem = os.path.join(args.dump_dir, f"{name}_{args.batch_size}x{args.max_seq_length}_{program}{suffix}")
    with open(stem + ".train.pb", "wb") as f:
        f.write(hlo[0])
    with open(stem + ".train.txt", "w") as f:
        f.write(hlo[1])
    params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    with open(stem + ".json", "w") as f:
        json.dump({"config": args.bert_config_file, "mode": program, "dropout": dropout, "batch": args.batch_size,
                   "seq": args.max_seq_length, "preds": args.max_predictions_per_seq, "precision": args.precision,
                   "trainable_params": params, **config.to_dict()}, f, indent=1)
    print(f"wrote {stem}.train.pb ({program}, dropout {dropout})")


def time_modes(args):
    """Runs each (mode, dropout) in its own process, --rounds times alternated; prints the table."""
    runs = [f"{mode}:{dropout}" for mode in args.modes for dropout in args.dropout.split(",")]

    def run_one(run, _):
        cmd = [sys.executable, __file__, f"--child={run}", *sys.argv[1:]]
        return measure.child_result(measure.run_child(cmd, args.work_dir, run.replace(":", "_")))

    print(f"# {measure.describe_machine(measure.machine_info())}; {args.bert_config_file}, "
          f"{args.batch_size}x{args.max_seq_length}, {args.max_predictions_per_seq} predictions, {args.precision}, "
          f"{time.strftime('%Y-%m-%d')}")
    results = measure.alternate(runs, args.rounds, run_one)
    def cell(run, key):
        return measure.median_range(measure.spread([r[key] for r in results[run]]), ".1f")

    rows = [[run, cell(run, "ms_per_step"), cell(run, "cpu_ms_per_step"),
             f"{max(r['peak_rss_mb'] for r in results[run]):.0f}",
             f"{results[run][-1]['loss']:.3f}".replace("nan", "-")] for run in runs]
    what = "optimizer's update" if args.optimizer_only else "step"
    print(measure.markdown_table(["mode:dropout", f"ms/{what} (median, min-max)", f"CPU ms/{what}", "peak RSS MB",
                                  "last loss"], rows, "lrrrr"))


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        time_child(args, *args.child.split(":"))
    elif args.dump_dir:
        dump(args)
    if args.time and not args.child:
        time_modes(args)
    if not (args.time or args.dump_dir or args.child):
        print("Nothing to do: pass --time and/or --dump_dir.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
