"""benchmarks/measure.py: the cpuinfo parser, the alternation of the frameworks, child processes and their results,
the op profile, the comparison of saved outputs (no timing is tested)."""
import argparse
import os
import sys

import benchmark_modules
import numpy as np
import pytest

measure = benchmark_modules.load("measure")

# Two processors of an AVX-512 machine without BF16 or AMX (abridged /proc/cpuinfo).
CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu vme sse sse2 avx fma avx2 avx512f avx512dq avx512_vnni avx512_vbmi2
bugs\t\t: spectre_v1

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Other
flags\t\t: fpu avx512_bf16 amx_tile
"""
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n"


def test_parse_cpuinfo_takes_the_first_processor_and_the_kernel_relevant_flags():
    assert measure.parse_cpuinfo(CPUINFO) == {
        "cpu": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
        "cpu_flags": ["avx2", "fma", "avx512f", "avx512_vnni"]}
    assert measure.parse_cpuinfo(ARM_CPUINFO) == {"cpu": None, "cpu_flags": []}
    text = measure.describe_machine({"cpu": "X", "cpu_flags": [], "cpus": 2, "mem_gib": 24.0})
    assert text.startswith("X (none of avx2, fma,") and text.endswith("), 2 CPUs, 24.0 GiB")


def test_alternate_reverses_the_order_every_other_round():
    assert measure.round_orders(["tf", "xla", "torch"], 3) == [
        ["tf", "xla", "torch"], ["torch", "xla", "tf"], ["tf", "xla", "torch"]]
    calls = []
    results = measure.alternate(["a", "b"], 3, lambda name, r: calls.append((name, r)) or f"{name}{r}",
                                lambda: calls.append("peak"))
    assert calls == ["peak", ("a", 0), ("b", 0), "peak", ("b", 1), ("a", 1), "peak", ("a", 2), ("b", 2), "peak"]
    assert results == {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}


def test_a_child_reports_its_result_rss_and_load(tmp_path):
    code = "import sys; print('noise'); print('RESULT {\"x\": 1}'); print('RESULT {\"x\": 2}'); print('log', " \
           "file=sys.stderr)"
    run = measure.run_child([sys.executable, "-c", code], str(tmp_path), "ok")
    result = measure.child_result(run)
    assert result["x"] == 2 and result["peak_rss_mb"] > 1 and result["wall_seconds"] > 0
    assert result["load"] == pytest.approx(os.getloadavg()[0], abs=5)
    assert run["stderr"] == "log\n" and run["log"].endswith("_ok.err") and os.path.exists(run["log"])
    assert measure.child_result(run, lambda run: {"parsed": run["stdout"].count("RESULT")})["parsed"] == 2

    silent = measure.run_child([sys.executable, "-c", "pass"], str(tmp_path), "silent")
    with pytest.raises(RuntimeError, match=r"printed no RESULT line \(log .*_silent\.err\)"):
        measure.child_result(silent)
    with pytest.raises(RuntimeError, match=r"failing failed \(log .*_failing\.err\):\nboom"):
        measure.run_child([sys.executable, "-c", "import sys; sys.exit('boom')"], str(tmp_path), "failing")


def test_max_abs_diffs_is_the_largest_over_rounds(tmp_path):
    rng = np.random.RandomState(0)
    ours, theirs = [], []
    for r in range(2):
        for runs, side in ((ours, "ours"), (theirs, "theirs")):
            prefix = str(tmp_path / f"{side}{r}")
            measure.save_outputs(prefix, pooled_output=rng.randn(3, 4).astype(np.float32))
            runs.append({"outputs": prefix})
    expected = max(np.abs(np.load(f"{a['outputs']}_pooled_output.npy")
                          - np.load(f"{b['outputs']}_pooled_output.npy")).max() for a, b in zip(ours, theirs))
    assert measure.max_abs_diffs(ours, theirs, ["pooled_output"]) == {"pooled_output": pytest.approx(expected)}


def test_spread_and_the_markdown_table():
    s = measure.spread([3.0, 1.0, 10.0, 2.0])
    assert s == {"median": 2.5, "min": 1.0, "max": 10.0}
    assert measure.median_range(s, ".1f") == "2.5 (1.0-10.0)"
    assert measure.markdown_table(["a", "b"], [["x", "1"]], "lr") == "| a | b |\n|---|---:|\n| x | 1 |"


@pytest.mark.cpu_only("op_profile times the ops on TensorFlow's CPU executor threads; with a GPU they run there")
def test_op_profile_counts_the_ops_of_each_call(tmp_path):
    import tensorflow as tf

    a = tf.constant(np.ones((64, 64), np.float32))

    @tf.function
    def two_matmuls_and_a_softmax():
        return tf.nn.softmax(tf.matmul(tf.matmul(a, a), a))

    two_matmuls_and_a_softmax()  # traced outside the profile
    profile = measure.op_profile("tf", two_matmuls_and_a_softmax, 3, str(tmp_path))
    matmuls = {name: op for name, op in profile.items() if "MatMul" in name}  # MatMul or oneDNN's _MklMatMul
    assert sum(op["count"] for op in matmuls.values()) == pytest.approx(2)
    assert sum(op["count"] for name, op in profile.items() if "Softmax" in name) == pytest.approx(1)
    assert all(op["ms"] > 0 for op in profile.values())
    table = measure.top_ops_table(profile, top=1).splitlines()
    assert len(table) == 4 and table[-1].startswith("| all ops |")  # header, rule, the top op, the total


# A child of latency_in_turns: its paths "a" and "b" append each call to a log shared by the children, as
# "<child> <path> <its turn>".
TURN_CHILD = """
import sys
sys.path.insert(0, {benchmarks!r})
import measure
log = open(sys.argv[1], "a")
turn = [0]
def path(name):
    return lambda: log.write(f"{{sys.argv[2]}} {{name}} {{turn[0]}}\\n") and log.flush()
def lines():
    for line in sys.stdin:
        turn[0] += 1
        yield line
print("loading ...", flush=True)  # not the ready line: skipped
measure.serve_turns({{"a": path("a"), "b": path("b")}}, lines())
"""


def test_latency_in_turns_runs_every_child_in_every_turn_in_alternating_order(tmp_path):
    code, log = TURN_CHILD.format(benchmarks=benchmark_modules.BENCHMARKS), tmp_path / "calls.log"
    results = measure.latency_in_turns({name: [sys.executable, "-c", code, str(log), name] for name in ("tf", "torch")},
                                       turns=3, calls=2, work_dir=str(tmp_path), pause_s=0.01)
    assert list(results) == ["tf", "torch"]
    for name in results:
        assert [sorted(turn) for turn in results[name]] == [["a", "b"]] * 3
        assert all(len(times) == 2 and all(t >= 0 for t in times) for turn in results[name] for times in turn.values())
    orders = (["tf", "torch"], ["torch", "tf"], ["tf", "torch"])
    assert log.read_text().split("\n")[:-1] == [f"{name} {path} {turn}" for turn, order in zip((1, 2, 3), orders)
                                                for name in order for path in ("a", "a", "b", "b")]
    # The rows: tf against the reference torch on each path, from the timings as given.
    table = measure.turn_table(results, "torch").splitlines()
    assert [row.split(" | ")[0] for row in table[2:]] == ["| tf a", "| tf b", "| torch a", "| torch b"]
    assert table[4].endswith("| (reference) | - |") and table[2].endswith(" of 3 |")


def test_turn_table_compares_turn_by_turn():
    # tf is faster than torch in turns 1 and 3, slower in turn 2; its p50 over all calls is the middle of 6 values.
    results = {"tf": [{"ids": [0.010, 0.012]}, {"ids": [0.030, 0.030]}, {"ids": [0.011, 0.011]}],
               "torch": [{"ids": [0.020, 0.020]}, {"ids": [0.020, 0.020]}, {"ids": [0.022, 0.022]}]}
    row = measure.turn_table(results, "torch").splitlines()[2]
    assert row == "| tf ids | 11.5 | 11.0 (11.0-30.0) | 0.550 | 2 of 3 |"


def test_latency_in_turns_reports_a_child_that_dies_before_it_is_ready(tmp_path):
    with pytest.raises(RuntimeError, match=r"broken exited \(3\) before READY \(log .*_broken_turns\.err\):\nno model"):
        measure.latency_in_turns({"broken": [sys.executable, "-c", "import sys; sys.stderr.write('no model'); "
                                                                   "sys.exit(3)"]},
                                 turns=1, calls=1, work_dir=str(tmp_path))


@pytest.mark.parametrize("argv, message", [(["--turns=-1"], "argument --turns: expected an integer >= 0, got '-1'"),
                                           (["--turn_calls=0"], "argument --turn_calls: expected an integer >= 1, "
                                                                "got '0'"),
                                           (["--turns=x"], "argument --turns: expected an integer >= 0, got 'x'")])
def test_turn_arguments_reject_bad_counts(capsys, argv, message):
    parser = argparse.ArgumentParser()
    measure.add_turn_arguments(parser, "side")
    assert vars(parser.parse_args(["--turns=3"])) == {"turns": 3, "turn_calls": 20, "serve_turns": False}
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert message in capsys.readouterr().err
