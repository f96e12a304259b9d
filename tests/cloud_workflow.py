"""One step of tests/test_cloud_paths.py: runs a bert-tf script with its paths on a URL, in this process.

    python cloud_workflow.py BASE MIRROR SCRIPT ARGVS_JSON

BASE: the URL every path is under (ram://... or gs://bucket/...); MIRROR: a local directory copied to BASE before
the runs and BASE copied back into it after (ram:// lives only as long as its process: the mirror carries one step's
outputs to the next; "-" copies nothing); SCRIPT: a run_scripts/ script; ARGVS_JSON: a JSON list of argv lists (flags)
with "{base}" standing for BASE, each run through the script's absl main in turn. Prints `ERRORS <json>`: for
each argv None, or the error the main raised.
"""
import importlib.util
import json
import sys


def main(base, mirror, script, argvs):
    spec = importlib.util.spec_from_file_location("script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the script's flags (it imports bert_tf.flags, which sets the defaults, first)
    from absl import flags, logging

    from bert_tf import fileio

    logging.use_absl_handler()
    logging.set_verbosity(logging.INFO)
    if mirror != "-":
        fileio.copy_tree(mirror, base)
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
    if mirror != "-":
        fileio.copy_tree(base, mirror)
    print("ERRORS " + json.dumps(errors))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
