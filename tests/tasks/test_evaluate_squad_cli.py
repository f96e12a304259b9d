"""evaluate_squad.py called as the official SQuAD scripts are (evaluate-v2.0.py's positional files and hyphenated
flags) gives the same metrics as with its own flags; unknown flags are still refused."""
import json
import os
import sys

import forkserver

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVALUATE = os.path.join(REPO, "run_scripts", "evaluate_squad.py")

# Runs the script's entry point (bert_flags.run with its flags parser) once per argv in one process; prints the exit
# codes.
_DRIVER = """
import importlib.util, json, sys
from absl import flags
from bert_tf import flags as bert_flags
spec = importlib.util.spec_from_file_location("evaluate_squad", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
codes = []
for argv in json.loads(sys.argv[2]):
    flags.FLAGS.unparse_flags()
    try:
        bert_flags.run(script.main, argv=[sys.argv[1]] + argv, flags_parser=script.parse_flags)
    except SystemExit as e:  # read as the interpreter reads it: a message goes to stderr, with status 1
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        codes.append(1 if isinstance(e.code, str) else e.code or 0)
print("CODES " + json.dumps(codes))
"""


def test_official_calling_convention(tmp_path):
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "a blue car", "qas": [
        {"id": "h1", "question": "?", "answers": [{"text": "blue car", "answer_start": 2}]},
        {"id": "n1", "question": "?", "answers": [], "is_impossible": True}]}]}]}
    files = {"d": data, "p": {"h1": "blue car", "n1": "x"}, "n": {"h1": 0.7, "n1": 4.0}}
    for name, content in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    d, p, n = (str(tmp_path / f"{name}.json") for name in files)
    out = [str(tmp_path / f"e{i}.json") for i in range(4)]
    proc = forkserver.run([sys.executable, "-c", _DRIVER, EVALUATE, json.dumps([
        [d, p, "-n", n, "-o", out[0], "-t", "0.5", "-v"],
        [d, p, f"--na-prob-file={n}", "--out-file", out[1], "--na-prob-thresh=0.5", "--verbose"],
        [f"--data_file={d}", f"--pred_file={p}", f"--na_prob_file={n}", f"--out_file={out[2]}", "--na_prob_thresh=0.5"],
        [d, p, f"-n{n}", f"-o{out[3]}", "-t0.5"],  # argparse's glued short forms
        [d, p, f"--na-prob-files={n}"],
        [d, p, "-n", n, "-p", str(tmp_path / "images")],
    ])], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.split("CODES ", 1)[1]) == [0, 0, 0, 0, 1, 1], proc.stderr[-3000:]
    metrics = [json.load(open(path)) for path in out]
    assert metrics[0] == metrics[1] == metrics[2] == metrics[3]
    # By hand, at threshold 0.5: h1's 0.7 predicts no answer (wrong), n1's 4.0 too (right): exact 50. Best threshold:
    # h1 answered at 0.7 and n1 not: both right.
    assert metrics[0]["exact"] == 50.0 and metrics[0]["NoAns_exact"] == 100.0 and metrics[0]["HasAns_exact"] == 0.0
    assert metrics[0]["best_exact"] == 100.0 and metrics[0]["best_exact_thresh"] == 0.7
    assert "Unknown command line flag 'na-prob-files'" in proc.stderr
    assert "evaluate_squad.py: error: -p (the official script's precision-recall plots) is not supported" in proc.stderr
    assert not os.path.exists(tmp_path / "images")
