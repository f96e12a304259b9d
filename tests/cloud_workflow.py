"""Steps of tests/test_cloud_paths.py: runs bert-tf scripts with their paths on a URL, one after the other in this
process (TensorFlow imported once).

    python cloud_workflow.py BASE COPY_IN COPY_OUT STEPS_JSON

BASE: the URL every path is under (ram://... or gs://bucket/...); COPY_IN: a local directory copied to BASE before
the steps, COPY_OUT: one BASE is copied into after them, "-" for none (ram:// lives only as long as its process: a
local mirror carries the inputs in and the outputs out); STEPS_JSON: a JSON list of [SCRIPT, ARGVS]: a run_scripts/
script and a list of argv lists (flags) with "{base}" standing for BASE, each run through the script's absl main in
turn. Prints `STEPS <json>`: for each step, the error each run raised (or None) and what the working directory holds
after it.
"""
import importlib.util
import json
import os
import sys


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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
