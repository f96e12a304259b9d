r"""The cost of dropout's random masks: bert-tf's `encoder.dropout` against the op of Keras' Dropout
(`tf.nn.experimental.stateless_dropout`, bert-tf's float32 masks before 2026-11), on the attention probabilities
of a BERT layer, in float32 and bfloat16, traced by tf.function and compiled by XLA.

Each call drops --rate of a [batch, heads, seq, seq] tensor (default BERT-base, 8 x 128: [8, 12, 128, 128], 1.6M
values) with the seed a runtime value (read from a variable, as the dropout layers' seed generators give it). Both
ops run alternately in this one process, --rounds rounds of --calls timed calls after 5 untimed; the table gives the
median ms per call over rounds with min-max, and whether the op's masks are the same compiled by XLA or not.

  python benchmarks/dropout_cost.py --rounds 5
"""
import argparse
import datetime
import statistics

import measure


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--shape", default="8,12,128,128", help="The dropped tensor's shape.")
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults)
    measure_ops(args)


def measure_ops(args):
    """Times both ops (module docstring) and prints the table."""
    import tensorflow as tf

    from bert_tf.model import encoder
    ops = {"keras": tf.nn.experimental.stateless_dropout, "bert_tf": encoder.dropout}
    shape = [int(d) for d in args.shape.split(",")]
    seed = tf.Variable([1234, 5], dtype=tf.int32)
    rows = []
    for dtype in ("float32", "bfloat16"):
        x = tf.cast(tf.random.stateless_uniform(shape, [1, 2]), dtype)
        for jit in (False, True):
            fns = {name: tf.function(lambda x, op=op: op(x, args.rate, seed.read_value()), jit_compile=jit)
                   for name, op in ops.items()}
            times = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    call = lambda fn=fn, x=x: fn(x).numpy()
                    times[name].append(statistics.median(measure.call_times(call, 5, args.calls)))
            for name, fn in fns.items():
                same = bool(tf.reduce_all(tf.equal(fn(x) == 0, ops[name](x, args.rate, seed.read_value()) == 0)))
                ms = measure.spread([1e3 * t for t in times[name]])
                rows.append([dtype, "XLA" if jit else "graph", name, measure.median_range(ms, ".2f"),
                             "yes" if same else "no"])
    print(f"{measure.describe_machine(measure.machine_info())}, TensorFlow {tf.__version__}, "
          f"{datetime.date.today()}; shape {shape}, rate {args.rate}")
    print(measure.markdown_table(["dtype", "compiled", "op", "ms per call", "same masks as uncompiled"], rows,
                                 "lllrl"))


if __name__ == "__main__":
    main()
