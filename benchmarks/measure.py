"""Plumbing shared by the benchmarks: what machine they ran on, and each framework in its own process.

Measurement hygiene (issue 10): two frameworks in one process fight over the cores (OpenMP's and TensorFlow's thread
pools spin), so every framework runs in its own child process (`run_child`), the frameworks alternate round by round
(`round_orders`: the order reversed every other round), the 1-minute load average is recorded at each child's start,
and the matmul peak of TensorFlow and of PyTorch is measured, each in its own process (this file run as a script;
the fastest of 30 calls after 5), before the first round and after each (`measure_peaks`). A child reports one JSON
object on a stdout line `RESULT {...}` (`emit_result`, read back by `child_result`).

The host's speed can move by a fifth between rounds minutes apart, more than the batch-1 gaps measured. So the batch-1
latency can also be measured in turns (`latency_in_turns`): every framework's child loaded at once, each timing a few
calls in turn while the others wait idle, many turns in the same minutes, compared turn by turn (`turn_table`).

The benchmarks import this file as a sibling module (`python benchmarks/X.py` puts benchmarks/ on sys.path); it
imports neither TensorFlow nor PyTorch except in the peak child. Every benchmark run as a script imports
`bert_tf.script_setup` first (in its `__main__` block), so that its TensorFlow, in its own process or in the children
it starts (they inherit the environment), has the run scripts' defaults (TF_ENABLE_ONEDNN_OPTS=1, and
TF_CPP_MIN_LOG_LEVEL=1 on a machine with an NVIDIA driver or a TPU, else 3, unless set); importing a benchmark (the
tests do) leaves the process alone.

As a script, one matmul peak (GFLOP/s of an [n, n] x [n, n] product):
  python benchmarks/measure.py --framework tf --size 2048 --dtype float32
"""
import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_PREFIX = "RESULT "
# The /proc/cpuinfo flags that decide TensorFlow's and PyTorch's CPU kernels (TensorFlow turns its oneDNN graph
# rewrites on by itself only with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX).
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16")
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
              "TF_ENABLE_ONEDNN_OPTS", "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "XLA_FLAGS", "OMP_WAIT_POLICY",
              "KMP_BLOCKTIME", "CUDA_VISIBLE_DEVICES",
              # the instruction sets the kernels may use (an AVX2-only CPU emulated on an AVX-512 one)
              "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")
PEAK_FRAMEWORKS = ("tf", "torch")


# --- the machine ------------------------------------------------------------------------------------------------


def parse_cpuinfo(text):
    """The first "model name" of a /proc/cpuinfo text (None if it has none) and which of CPU_FLAGS its first "flags"
    line lists: {"cpu": str or None, "cpu_flags": [flag, ...] in CPU_FLAGS' order}."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    present = set(fields.get("flags", "").split())
    return {"cpu": fields.get("model name"), "cpu_flags": [f for f in CPU_FLAGS if f in present]}


def machine_info():
    """{"cpu": model name, "cpu_flags": [...], "cpus": logical CPUs, "mem_gib": total memory}."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = parse_cpuinfo(f.read())
    except OSError:
        info = {"cpu": None, "cpu_flags": []}
    info["cpu"] = info["cpu"] or platform.processor() or platform.machine()
    info["cpus"] = os.cpu_count()
    info["mem_gib"] = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def describe_machine(mach):
    """One line: 'AMD EPYC (avx2 fma avx512f), 2 CPUs, 24.0 GiB'."""
    flags = " ".join(mach["cpu_flags"]) or f"none of {', '.join(CPU_FLAGS)}"
    return f"{mach['cpu']} ({flags}), {mach['cpus']} CPUs, {mach['mem_gib']} GiB"


def loadavg():
    """The 1-minute load average, or NaN where the system has none (it prints as "nan" in the tables)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def versions(dists):
    """{"python": version, dist: installed version or None} without importing the distributions."""
    out = {"python": platform.python_version()}
    for dist in dists:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def thread_info():
    """The thread pools of the frameworks this process imported, the CPU count and the thread-related environment."""
    info = {}
    if "tensorflow" in sys.modules:
        tf = sys.modules["tensorflow"]
        info["tf_intra_op"] = tf.config.threading.get_intra_op_parallelism_threads()
        info["tf_inter_op"] = tf.config.threading.get_inter_op_parallelism_threads()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch_threads"] = torch.get_num_threads()
        info["torch_interop_threads"] = torch.get_num_interop_threads()
    info["os_cpu_count"] = os.cpu_count()
    info["env"] = {k: os.environ[k] for k in THREAD_ENV if k in os.environ}
    return info


# --- where the time goes ---------------------------------------------------------------------------------------

_TF_OP_EVENT = re.compile(r"^[^:]+:([A-Za-z_][A-Za-z0-9_]*)$")  # "<node name>:<op type>" on the executor threads


def op_profile(framework, fn, calls, logdir):
    """{op type: {"ms": wall ms per call, "count": ops per call}} of `calls` calls of fn() under the framework's
    profiler. TensorFlow (framework "tf"; `tf.profiler`, trace written under logdir): each op's wall time on the
    executor threads (the `tf_Compute` lines: an op's time includes its intra-op workers'; ops that run side by side
    overlap, so the sum can exceed the call's wall time). PyTorch ("torch"; `torch.profiler`): each aten op's self
    CPU time."""
    if framework == "torch":
        import torch

        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(calls):
                fn()
        return {e.key: {"ms": e.self_cpu_time_total / 1e3 / calls, "count": e.count / calls}
                for e in prof.key_averages() if e.self_cpu_time_total > 0}
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(logdir)
    for _ in range(calls):
        fn()
    tf.profiler.experimental.stop()
    paths = [os.path.join(d, f) for d, _, files in os.walk(logdir) for f in files if f.endswith(".xplane.pb")]
    space = xplane_pb2.XSpace()
    with open(max(paths, key=os.path.getmtime), "rb") as f:
        space.ParseFromString(f.read())
    ops = {}
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                match = _TF_OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if match and not match.group(1).startswith("__"):
                    op = ops.setdefault(match.group(1), {"ms": 0.0, "count": 0.0})
                    op["ms"] += event.duration_ps / 1e9 / calls
                    op["count"] += 1 / calls
    return ops


def top_ops_table(profile, top=10):
    """A markdown table of the `top` op types of an op_profile() by time, with their share of all ops' time."""
    total = sum(op["ms"] for op in profile.values()) or 1.0
    ranked = sorted(profile.items(), key=lambda kv: -kv[1]["ms"])[:top]
    rows = [[name, f"{op['ms']:.2f}", f"{100 * op['ms'] / total:.0f}%", f"{op['count']:.0f}"] for name, op in ranked]
    rows.append(["all ops", f"{total:.2f}", "100%", f"{sum(op['count'] for op in profile.values()):.0f}"])
    return markdown_table(["op", "ms per call", "share", "ops per call"], rows, "lrrr")


# --- timing -----------------------------------------------------------------------------------------------------


def call_times(fn, warmup, repeats):
    """Seconds of each of `repeats` timed calls of fn(), after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def spread(values):
    """{"median", "min", "max"} of a non-empty list of numbers."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def matmul_gflops(framework, size, dtype):
    """[size, size] x [size, size] matmul GFLOP/s in `dtype`, the fastest of 30 calls after 5: on TensorFlow's
    default device (a GPU where there is one; run as a script, with the scripts' TensorFlow defaults, as in every
    bert_tf script) or PyTorch's CPU."""
    if framework == "tf":
        import tensorflow as tf
        a, b = (tf.cast(tf.random.normal((size, size), seed=seed), dtype) for seed in (1, 2))
        matmul = tf.function(lambda a, b: tf.matmul(a, b)[:1, :1])
        fn = lambda: matmul(a, b).numpy()
    else:
        import torch
        torch_dtype = getattr(torch, dtype)
        a, b = torch.randn(size, size, dtype=torch_dtype), torch.randn(size, size, dtype=torch_dtype)
        out = torch.empty(size, size, dtype=torch_dtype)
        fn = lambda: torch.matmul(a, b, out=out)
    return 2.0 * size ** 3 / min(call_times(fn, warmup=5, repeats=30)) / 1e9


# --- rounds of child processes ----------------------------------------------------------------------------------------


def round_orders(names, rounds):
    """The order of `names` in each of `rounds` rounds: as given, then reversed, alternately."""
    names = list(names)
    return [names if r % 2 == 0 else names[::-1] for r in range(rounds)]


def alternate(names, rounds, run_one, between_rounds=lambda: None):
    """Calls run_one(name, round_index) for every name in every round, in round_orders' order, and between_rounds()
    before the first round and after each. Returns {name: [run_one's result in each round]}."""
    results = {name: [] for name in names}
    between_rounds()
    for r, order in enumerate(round_orders(names, rounds)):
        for name in order:
            results[name].append(run_one(name, r))
        between_rounds()
    return results


def run_session(names, rounds, run_one, peak_frameworks, work_dir, dists, peak_size=2048, peak_dtype="float32"):
    """A whole benchmark: alternate(names, rounds, run_one) with the matmul peaks of peak_frameworks (none: no
    peak) measured before the first round and after each. Returns {"runs": alternate's result, "peaks":
    {"peak_<framework>": [GFLOP/s, ...]}, "loads": [load average before, after], "machine": machine_info(),
    "versions": versions(dists)}."""
    peaks, loads = {}, [loadavg()]
    runs = alternate(names, rounds, run_one,
                     lambda: measure_peaks(peak_frameworks, peaks, work_dir, peak_size, peak_dtype))
    loads.append(loadavg())
    return {"runs": runs, "peaks": peaks, "loads": loads, "machine": machine_info(), "versions": versions(dists)}


def write_json(path, args, sections, internal=("child", "out_prefix")):
    """Writes {"args": the parsed arguments but the internal ones, **sections} to path."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k not in internal}, **sections}, f, indent=2)


def emit_result(result):
    """A child's report: one stdout line `RESULT {json}` (the last such line counts)."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(cmd, work_dir, name):
    """Runs cmd (from the repository root) to completion, its stdout and stderr going to
    work_dir/logs/<time>_<name>.out and .err. Returns {"stdout", "stderr", "log" (the .err path), "peak_rss_mb"
    (the child's maximum resident set), "load" (1-minute load average at its start), "wall_seconds" (start to
    exit)}; a failure raises RuntimeError with the end of its stderr."""
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    stem = os.path.join(log_dir, f"{time.strftime('%Y%m%d-%H%M%S')}_{name}")
    load, start = loadavg(), time.perf_counter()
    with open(stem + ".out", "w") as out, open(stem + ".err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    with open(stem + ".out", encoding="utf-8") as f:
        stdout = f.read()
    with open(stem + ".err", encoding="utf-8") as f:
        stderr = f.read()
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"{name} failed (log {stem}.err):\n{stderr[-4000:]}")
    return {"stdout": stdout, "stderr": stderr, "log": stem + ".err", "peak_rss_mb": usage.ru_maxrss / 1024,
            "load": load, "wall_seconds": seconds}


def child_result(run, parse=None):
    """What a run_child() run reports: parse(run) where given (e.g. a script's log lines), else its RESULT object;
    with the run's "peak_rss_mb", "load" and "wall_seconds" added."""
    if parse is not None:
        result = parse(run)
    else:
        lines = [line for line in run["stdout"].splitlines() if line.startswith(RESULT_PREFIX)]
        if not lines:
            raise RuntimeError(f"the child printed no {RESULT_PREFIX.strip()} line (log {run['log']})")
        result = json.loads(lines[-1][len(RESULT_PREFIX):])
    result.update({k: run[k] for k in ("peak_rss_mb", "load", "wall_seconds")})
    return result


# --- batch-1 latency in turns ----------------------------------------------------------------------------------------

READY_LINE = "READY"


def _at_least(low):
    def parse(text):
        if not text.lstrip("-").isdigit() or int(text) < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return int(text)
    return parse


def add_turn_arguments(parser, process):
    """A benchmark's flags for `report_turns`: --turns, --turn_calls, and its children's hidden --serve_turns (each
    `process`, e.g. "variant", loaded once and timed in turns)."""
    parser.add_argument("--turns", type=_at_least(0), default=0,
                        help=f"After the rounds, also measure the batch-1 latency in this many turns, every "
                             f"{process}'s process loaded at once (measure.latency_in_turns; 0: not).")
    parser.add_argument("--turn_calls", type=_at_least(1), default=20,
                        help=f"Calls of each batch-1 path in a {process}'s turn.")
    parser.add_argument("--serve_turns", action="store_true", help=argparse.SUPPRESS)  # a child times in turns


def serve_turns(paths, lines=None):
    """A child's end of `latency_in_turns`: paths maps a name to a warmed-up no-argument callable. Prints READY_LINE,
    then for each input line (stdin unless `lines` is given) holding a number n times n calls of each path and
    reports {path: [seconds, ...]} (`emit_result`); returns when the input ends."""
    print(READY_LINE, flush=True)
    for line in sys.stdin if lines is None else lines:
        emit_result({name: call_times(fn, 0, int(line)) for name, fn in paths.items()})


def _read_until(proc, prefix, name, log):
    """The first stdout line of proc that starts with prefix (other lines are skipped); RuntimeError with the end of
    its stderr log if it exits first."""
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.rstrip("\n")
    proc.wait()
    with open(log, encoding="utf-8") as f:
        raise RuntimeError(f"{name} exited ({proc.returncode}) before {prefix.strip()} (log {log}):\n"
                           f"{f.read()[-4000:]}")


def latency_in_turns(commands, turns, calls, work_dir, pause_s=0.5):
    """Batch-1 latency of several children measured in the same minutes, turn by turn (the answer to the host's
    speed moving between the rounds of `alternate`).

    commands maps a name to the command of a child that loads its model, warms it up and calls `serve_turns`. All
    children start and get ready together; then in each of `turns` turns every child in turn (in round_orders'
    order) times `calls` calls of each of its paths while the others wait, blocked on their input. Each turn starts
    `pause_s` after the previous one ends, so that the threads of the child before (OpenMP's and TensorFlow's spin
    when idle) are asleep. Children's stderr goes to work_dir/logs. Returns {name: [{path: [seconds, ...]} per
    turn]}."""
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    stamp, procs, logs = time.strftime("%Y%m%d-%H%M%S"), {}, {}
    try:
        for name, cmd in commands.items():
            logs[name] = os.path.join(log_dir, f"{stamp}_{name}_turns.err")
            with open(logs[name], "w") as err:
                procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                               cwd=REPO, text=True)
        for name, proc in procs.items():
            _read_until(proc, READY_LINE, name, logs[name])
        results = {name: [] for name in commands}
        for order in round_orders(commands, turns):
            for name in order:
                time.sleep(pause_s)
                procs[name].stdin.write(f"{calls}\n")
                procs[name].stdin.flush()
                line = _read_until(procs[name], RESULT_PREFIX, name, logs[name])
                results[name].append(json.loads(line[len(RESULT_PREFIX):]))
        return results
    finally:
        for proc in procs.values():
            with contextlib.suppress(BrokenPipeError):  # a child that already failed
                proc.stdin.close()
            proc.wait()


def turn_table(results, reference, label=lambda name, path: f"{name} {path}"):
    """A markdown table of latency_in_turns() results: per child and path, the p50 over all its calls, the median
    and min-max of its per-turn p50s, and (against the child `reference`, on the same path) the median ratio of the
    per-turn p50s and the turns at or below the reference's p50 of the same turn."""
    rows = []
    for name, turns in results.items():
        for path in turns[0]:
            p50s = [statistics.median(turn[path]) for turn in turns]
            every = [t for turn in turns for t in turn[path]]
            row = [label(name, path), f"{1e3 * statistics.median(every):.1f}",
                   median_range({k: 1e3 * v for k, v in spread(p50s).items()}, ".1f")]
            if name != reference and path in results[reference][0]:
                ref = [statistics.median(turn[path]) for turn in results[reference]]
                row += [f"{statistics.median(a / b for a, b in zip(p50s, ref)):.3f}",
                        f"{sum(a <= b for a, b in zip(p50s, ref))} of {len(ref)}"]
            else:
                row += ["(reference)" if name == reference else "-", "-"]
            rows.append(row)
    return markdown_table(["path", "p50 ms, all calls", "per-turn p50 ms, median (min-max)",
                           f"median ratio to {reference}", f"turns at or below {reference}"], rows, "lrrrr")


def report_turns(commands, turns, calls, work_dir, reference, label):
    """latency_in_turns(commands, turns, calls, work_dir), printed: the load average before and after, and
    turn_table against the child `reference` (label(name, path) names a row). Returns the timings."""
    loads = [loadavg()]
    results = latency_in_turns(commands, turns, calls, work_dir)
    loads.append(loadavg())
    print(f"\nbatch-1 latency in turns: every child loaded at once, {turns} turns of {calls} calls of each path per "
          f"child (the order reversed every other turn); load average {loads[0]:.2f} at the start, {loads[1]:.2f} "
          f"at the end\n")
    print(turn_table(results, reference, label))
    return results


def peak_frameworks(names):
    """The PEAK_FRAMEWORKS that the benchmarked names use: "torch" for "torch", "tf" for all others."""
    return sorted({"torch" if name == "torch" else "tf" for name in names})


def measure_peaks(frameworks, peaks, work_dir, size=2048, dtype="float32"):
    """Measures the matmul peak of each of `frameworks` (from PEAK_FRAMEWORKS) in its own process and appends its
    GFLOP/s to peaks["peak_<framework>"]."""
    for framework in frameworks:
        run = run_child([sys.executable, os.path.abspath(__file__), f"--framework={framework}", f"--size={size}",
                         f"--dtype={dtype}"], work_dir, f"peak_{framework}")
        peaks.setdefault(f"peak_{framework}", []).append(child_result(run)["gflops"])


def describe_peaks(peaks):
    """'peak_tf 310 305; peak_torch 290 301' (GFLOP/s, in the order measured)."""
    return "; ".join(f"{k} {' '.join(f'{v:.0f}' for v in values)}" for k, values in peaks.items())


def save_outputs(prefix, **arrays):
    """Writes each array to <prefix>_<name>.npy (a child's outputs, for the parent to compare)."""
    for name, array in arrays.items():
        np.save(f"{prefix}_{name}.npy", array)


def max_abs_diffs(runs, reference_runs, names):
    """{name: the largest max |a - b| over rounds} between the save_outputs() arrays of runs and those of
    reference_runs in the same rounds (each run a result dict whose "outputs" is its prefix)."""
    diffs = dict.fromkeys(names, 0.0)
    for run, reference in zip(runs, reference_runs):
        for name in names:
            a, b = (np.load(f"{r['outputs']}_{name}.npy") for r in (run, reference))
            diffs[name] = max(diffs[name], float(np.abs(a - b).max()))
    return diffs


def median_range(s, fmt):
    """'79.9 (78.1-80.3)': a spread() as median (min-max), each number in format fmt."""
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"


def markdown_table(header, rows, align):
    """A markdown table: header and rows are lists of cells (strings), align one character per column ('l' or
    'r')."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=PEAK_FRAMEWORKS, required=True)
    p.add_argument("--size", type=int, default=2048, help="Side of the square matmul.")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    args = p.parse_args(argv)
    emit_result({"gflops": matmul_gflops(args.framework, args.size, args.dtype)})
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
