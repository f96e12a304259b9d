"""The official SQuAD evaluation (v1.1 and v2.0 scripts) of a predictions.json.

Examples:
  python run_scripts/evaluate_squad.py --data_file=dev-v1.1.json --pred_file=predictions.json
  python run_scripts/evaluate_squad.py --data_file=dev-v2.0.json --pred_file=predictions.json \
    --na_prob_file=null_odds.json --out_file=eval.json
  python run_scripts/evaluate_squad.py dev-v2.0.json predictions.json      # positional, as the official scripts

Prints the metrics as JSON (and writes them to --out_file). --version=auto uses the v2.0 evaluation for a v2.0
data file or when --na_prob_file is given, else v1.1.
"""
import json

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
    bert_flags.run(main)
