"""The official SQuAD evaluation (v1.1 and v2.0 scripts) of a predictions.json.

Examples:
  python run_scripts/evaluate_squad.py --data_file=dev-v1.1.json --pred_file=predictions.json
  python run_scripts/evaluate_squad.py --data_file=dev-v2.0.json --pred_file=predictions.json \
    --na_prob_file=null_odds.json --out_file=eval.json
  python run_scripts/evaluate_squad.py dev-v2.0.json predictions.json      # positional, as the official scripts
  python run_scripts/evaluate_squad.py dev-v2.0.json predictions.json -n null_odds.json -o eval.json -t 0.5

Also takes the official scripts' arguments (positional files, -o, -n, -t; -v has no effect, -p is refused). Prints
the metrics as JSON. --version=auto: v2.0 for a v2.0 data file or with --na_prob_file, else v1.1.
"""
import json
import os
import sys

from absl import app, flags

from bert_tf import fileio
from bert_tf import flags as bert_flags
from bert_tf.tasks.squad import evaluate as squad_evaluate

FLAGS = flags.FLAGS
flags.DEFINE_string("data_file", None, "The SQuAD dataset file with gold answers (e.g. dev-v2.0.json).")
flags.DEFINE_string("pred_file", None, "The predictions file ({question id: answer text}).")
flags.DEFINE_string("na_prob_file", None, "Optional: {question id: no-answer probability}, e.g. null_odds.json "
                    "(v2.0: reports best_exact/best_f1 and their thresholds).")
flags.DEFINE_string("out_file", None, "Optional: write the metrics JSON here.")
flags.DEFINE_float("na_prob_thresh", 1.0, "v2.0: predict 'no answer' when the no-answer probability is above this.",
                   lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_enum("version", "auto", ["auto", "1.1", "2.0"], "Which official evaluation to run.")

# evaluate-v2.0.py's flags -> this script's (None: refused); its --verbose/-v, which changes nothing there, is dropped.
OFFICIAL_FLAGS = {"--out-file": "out_file", "-o": "out_file", "--na-prob-file": "na_prob_file", "-n": "na_prob_file",
                  "--na-prob-thresh": "na_prob_thresh", "-t": "na_prob_thresh", "--out-image-dir": None, "-p": None}
OFFICIAL_SWITCHES = ("--verbose", "-v")


def parse_flags(argv):
    """absl's parsing of `argv` after the official script's flags are renamed to this script's (`-o x` ->
    `--out_file x`, `--na-prob-file=x` -> `--na_prob_file=x`)."""
    renamed = []
    for arg in argv[1:]:
        name, equals, value = arg.partition("=")
        if not equals and arg[:2] in OFFICIAL_FLAGS and len(arg) > 2 and not arg.startswith("--"):
            name, equals, value = arg[:2], "=", arg[2:]  # argparse's glued short form: -t0.5
        if arg in OFFICIAL_SWITCHES:
            continue
        if name in OFFICIAL_FLAGS and OFFICIAL_FLAGS[name] is None:
            sys.exit(f"{os.path.basename(argv[0])}: error: {name} (the official script's precision-recall plots) is "
                     "not supported: this script writes the metrics only.")
        renamed.append(f"--{OFFICIAL_FLAGS[name]}{equals}{value}" if name in OFFICIAL_FLAGS else arg)
    return app.parse_flags_with_usage(argv[:1] + renamed)


def main(argv):
    positional = argv[1:]
    if len(positional) > 2:
        raise app.UsageError(f"Unexpected arguments: {positional[2:]}")
    data_file = FLAGS.data_file or (positional[0] if positional else None)
    pred_file = FLAGS.pred_file or (positional[1] if len(positional) > 1 else None)
    if not data_file or not pred_file:
        raise app.UsageError("Give --data_file and --pred_file (or the two files as arguments).")
    results = squad_evaluate.evaluate_files(data_file, pred_file, FLAGS.na_prob_file, FLAGS.version,
                                            FLAGS.na_prob_thresh)
    text = json.dumps(results, indent=2)
    if FLAGS.out_file:
        fileio.write_text_atomically(FLAGS.out_file, text + "\n")
    print(text)


if __name__ == "__main__":
    bert_flags.run(main, argv=sys.argv, flags_parser=parse_flags)
