"""benchmarks/measure.py: the cpuinfo parser, the alternation of the frameworks, child processes and their results,
the op profile, the comparison of saved outputs (no timing is tested)."""
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
