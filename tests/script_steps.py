"""Several run_scripts/ scripts run one after the other in one process (TensorFlow imported once), each through its
absl main once per argv, as tests/test_cloud_paths.py and tests/test_scripts_from_tfhub.py run them (`run`).

    python script_steps.py BASE COPY_IN COPY_OUT STEPS_JSON

BASE: what "{base}" in the flags stands for: the URL every path is under (ram://... or gs://bucket/...), or "-";
COPY_IN: a local directory copied to BASE before the steps, COPY_OUT: one BASE is copied into after them, "-" for
none (ram:// lives only as long as its process: a local mirror carries the inputs in and the outputs out);
STEPS_JSON: a JSON list of [SCRIPT, ARGVS]: a run_scripts/ script and a list of argv lists (flags). Prints
`STEPS <json>`: for each step, the error each run raised (or None) and what the working directory holds after it.
"""
import importlib.util
import json
import os
import sys

import forkserver


def load_script(script, flag_names):
    """The module of `script` (a run_scripts/ file), its flags defined afresh: those defined since `flag_names`
    was taken (by the script loaded before) are deleted first."""
    from absl import flags

    for name in set(flags.FLAGS) - flag_names:
        delattr(flags.FLAGS, name)
    spec = importlib.util.spec_from_file_location("script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the script's flags (it imports bert_tf.flags, which sets the defaults, first)
    return module


def run_argvs(module, base, argvs):
    """Runs `module.main` once per argv; returns the error of each run or None."""
    from absl import flags, logging

    errors = []
    for argv in argvs:
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["script"] + [arg.replace("{base}", base) for arg in argv])
        try:
            module.main(None)
            errors.append(None)
        except Exception as e:  # noqa: BLE001 (reported to the test)
            logging.exception("The run failed")
            errors.append(f"{type(e).__name__}: {e}")
    return errors


def main(base, copy_in, copy_out, steps):
    from absl import flags, logging

    flag_names = set(flags.FLAGS)  # absl's own
    results = []
    for i, (script, argvs) in enumerate(steps):
        module = load_script(script, flag_names)
        if i == 0:
            from bert_tf import fileio  # after the first script's bert_tf.flags, as in a script

            logging.use_absl_handler()
            logging.set_verbosity(logging.INFO)
            if copy_in != "-":
                fileio.copy_tree(copy_in, base)
        results.append({"errors": run_argvs(module, base, argvs), "cwd": sorted(os.listdir("."))})
    if copy_out != "-":
        fileio.copy_tree(base, copy_out)
    print("STEPS " + json.dumps(results))


def run(steps, cwd, env=None, base="-", copy_in="-", copy_out="-"):
    """Runs `steps` ([(script path, [argv, ...])]) in a fresh Python process with the working directory `cwd` (this
    file's `main`); returns for each step {"errors": its runs' errors, "cwd": the working directory's files after
    it}, and the process's stderr (the runs' absl logs)."""
    result = forkserver.run([sys.executable, os.path.abspath(__file__), base, copy_in, copy_out, json.dumps(steps)],
                            cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and "STEPS " in result.stdout, result.stderr[-3000:]
    done = json.loads(result.stdout.split("STEPS ", 1)[1])
    assert len(done) == len(steps), result.stderr[-3000:]
    return done, result.stderr


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
