"""Errors a user can read (issue 31): every numeric flag has its range, and a value outside it is refused when the
flags are parsed, before any work, with a message naming the flag and what it allows; bad input ends a script with
one line naming it (the traceback with --verbosity=1); a malformed Hugging Face config.json is named."""
import ast
import dataclasses
import importlib
import inspect
import json
import os
import sys

import forkserver
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "run_scripts")

# script -> [(bad flag, the words of absl's message)]; each script also parses its defaults.
BAD = {
    "run_classifier.py": [
        ("--train_batch_size=0", "0 is not a positive integer"),
        ("--eval_batch_size=-8", "-8 is not a positive integer"),
        ("--predict_batch_size=0", "0 is not a positive integer"),
        ("--save_checkpoints_steps=0", "0 is not a positive integer"),
        ("--iterations_per_loop=0", "0 is not a positive integer"),
        ("--gradient_accumulation_steps=0", "0 is not a positive integer"),
        ("--keep_checkpoint_max=0", "0 is not a positive integer"),
        ("--num_train_epochs=0", "--num_train_epochs must be > 0"),
        ("--learning_rate=-1e-5", "--learning_rate must be > 0"),
        ("--warmup_proportion=1.5", "1.5 is not a number in the range [0.0, 1.0]"),
        ("--max_seq_length=2", "2 is not integer >= 3"),
        ("--seq_length_multiple=0", "0 is not a positive integer"),
        ("--num_cpu_devices=0", "0 is not a positive integer"),
        ("--num_gpus=-1", "-1 is not a non-negative integer"),
        ("--seed=-3", "-3 is not a non-negative integer"),
    ],
    "run_pretraining.py": [
        ("--num_train_steps=0", "0 is not a positive integer"),
        ("--num_warmup_steps=-1", "-1 is not a non-negative integer"),
        ("--max_eval_steps=0", "0 is not a positive integer"),
        ("--max_predictions_per_seq=0", "0 is not a positive integer"),
        ("--masked_lm_prob=1.5", "1.5 is not a number in the range [0.0, 1.0]"),
    ],
    "run_squad.py": [("--doc_stride=0", "0 is not a positive integer"),
                     ("--n_best_size=0", "0 is not a positive integer"),
                     ("--max_answer_length=0", "0 is not a positive integer"),
                     ("--max_query_length=0", "0 is not a positive integer")],
    "create_pretraining_data.py": [("--dupe_factor=0", "0 is not a positive integer"),
                                   ("--max_seq_length=4", "4 is not integer >= 5"),
                                   ("--short_seq_prob=-0.1", "-0.1 is not a number in the range [0.0, 1.0]"),
                                   ("--shard_size=0", "0 is not a positive integer"),
                                   ("--num_workers=-1", "-1 is not a non-negative integer")],
    "extract_features.py": [("--batch_size=0", "0 is not a positive integer")],
    "predict_masked_lm.py": [("--top_k=0", "0 is not a positive integer")],
    "export_saved_model.py": [("--version=0", "0 is not a positive integer"),
                              ("--max_seq_length=2", "2 is not integer >= 3"),
                              ("--num_labels=0", "0 is not a positive integer")],
    "evaluate_squad.py": [("--na_prob_thresh=2", "2.0 is not a number in the range [0.0, 1.0]")],
    "build_vocab.py": [("--vocab_size=0", "0 is not a positive integer")],
    "prepare_corpus.py": [("--num_workers=0", "0 is not a positive integer")],
}

# Loads each script in turn (its flags defined on import), records the defaults of the flags it defines, parses
# each bad value, then removes the script's flags.
_DRIVER = r"""
import importlib.util, json, sys
from absl import app, flags
FLAGS = flags.FLAGS
out = {}
for script, bad in json.loads(sys.argv[1]).items():
    before = set(FLAGS)
    spec = importlib.util.spec_from_file_location(script[:-3], sys.argv[2] + "/" + script)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    FLAGS(["script"])  # the defaults are in range
    FLAGS.unparse_flags()
    out[script] = {"defaults": {name: FLAGS[name].default for name in set(FLAGS) - before}, "messages": []}
    for value in bad:
        try:
            FLAGS(["script", value])
            out[script]["messages"].append(None)
        except flags.IllegalFlagValueError as e:
            out[script]["messages"].append(str(e))
        FLAGS.unparse_flags()
    for name in set(FLAGS) - before:
        delattr(FLAGS, name)
print("RESULT " + json.dumps(out, default=repr))
"""


@pytest.fixture(scope="module")
def loaded_scripts(child_env):
    """Every run script loaded in one process: {script: {"defaults": {flag: default}, "messages": [absl's message
    for each of its BAD values, None where it was accepted]}}."""
    bad = {script: [value for value, _ in BAD.get(script, ())] for script in sorted(os.listdir(SCRIPTS))
           if script.endswith(".py")}
    result = forkserver.run([sys.executable, "-c", _DRIVER, json.dumps(bad), SCRIPTS], capture_output=True,
                            text=True, env=child_env(), cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT ", 1)[1])


@pytest.mark.slow
def test_numeric_flags_out_of_range_are_refused_when_parsed(loaded_scripts):
    for script, cases in BAD.items():
        for (value, words), message in zip(cases, loaded_scripts[script]["messages"]):
            assert message is not None, f"{script} {value} was accepted"
            assert message.startswith(f"flag {value.split('=')[0]}=") and words in message, (script, message)


# Flags whose default is not the default of the argument they feed, and why.
OWN_DEFAULTS = {("create_pretraining_data.py", "num_workers"): "0 is the exact mode, which run_sharded never sees"}


def _library_callee(node, script_imports):
    """The bert_tf function or class that call `node` (an ast.Call of a script) calls, or None."""
    chain, func = [], node.func
    while isinstance(func, ast.Attribute):
        chain.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in script_imports:
        return None
    module, name = script_imports[func.id]
    target = importlib.import_module(module)
    for attribute in [name, *chain]:  # a submodule is imported where its package does not hold it yet
        target = getattr(target, attribute, None) or importlib.import_module(f"{target.__name__}.{attribute}")
    return target


def _flag_arguments(tree):
    """[(call node, argument name, flag name)] of every `argument=FLAGS.<flag>` in a script, also through `**kwargs`
    of a `kwargs = dict(...)`."""
    keywords = {node.targets[0].id: node.value.keywords for node in ast.walk(tree)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "dict" and isinstance(node.targets[0], ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) != "dict":
            for keyword in node.keywords:
                spread = keywords.get(getattr(keyword.value, "id", None), []) if keyword.arg is None else [keyword]
                found += [(node, k.arg, k.value.attr) for k in spread if isinstance(k.value, ast.Attribute)
                          and getattr(k.value.value, "id", None) == "FLAGS"]
    return found


def _script_imports(tree):
    """{name: (module, attribute...)} of a script's `from bert_tf... import` names (anywhere in it), but
    bert_tf.flags (whose import sets the scripts' process defaults)."""
    return {alias.asname or alias.name: (node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bert_tf")
            for alias in node.names if f"{node.module}.{alias.name}" != "bert_tf.flags"}


def _same(a, b):
    return list(a) == list(b) if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) else a == b


@pytest.mark.slow
def test_each_flag_default_is_the_default_of_what_it_sets(loaded_scripts):
    """One fact in one place (issue 41): a shared run flag of a script that calls `bert_flags.run_config` has
    RunConfig's default (but do_lower_case, None there for "not given", and what the script sets with
    FLAGS.set_default); a flag passed as `argument=FLAGS.<flag>` to a bert_tf function or class has that argument's
    default."""
    from bert_tf.tasks import runner

    run_defaults = {f.name: f.default for f in dataclasses.fields(runner.RunConfig) if f.name != "do_lower_case"}
    differing = []
    checked = 0
    for script, loaded in loaded_scripts.items():
        defaults = loaded["defaults"]
        with open(os.path.join(SCRIPTS, script), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        own = {node.args[0].value for node in calls if getattr(node.func, "attr", None) == "set_default"}
        if any(getattr(node.func, "attr", None) == "run_config" for node in calls):
            for name in set(defaults) & set(run_defaults) - own:
                checked += 1
                if not _same(defaults[name], run_defaults[name]):
                    differing.append(f"{script}: --{name} {defaults[name]!r}, RunConfig {run_defaults[name]!r}")
        imports = _script_imports(tree)
        for node, argument, flag in _flag_arguments(tree):
            callee = _library_callee(node, imports)
            parameter = inspect.signature(callee).parameters.get(argument) if callee else None
            if parameter is None or parameter.default is inspect.Parameter.empty or (script, flag) in OWN_DEFAULTS:
                continue
            checked += 1
            if not _same(defaults[flag], parameter.default):
                differing.append(f"{script}: --{flag} {defaults[flag]!r}, {callee.__module__}.{callee.__qualname__}"
                                 f"({argument}={parameter.default!r})")
    assert checked > 150 and not differing, "\n".join(differing)


@pytest.mark.slow
def test_a_bad_value_stops_the_script_before_any_work(tmp_path, child_env):
    """run_classifier.py --train_batch_size=0: absl's one-line error and exit status 1, and no output_dir (the
    original converted train.tf_record, then divided by zero)."""
    out = tmp_path / "out"
    result = forkserver.run([sys.executable, os.path.join(SCRIPTS, "run_classifier.py"), "--task_name=tsv",
                             f"--data_dir={tmp_path}", f"--output_dir={out}", "--do_train", "--train_batch_size=0"],
                            capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=300)
    assert result.returncode == 1
    assert "flag --train_batch_size=0: 0 is not a positive integer" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_bad_input_ends_a_script_with_one_line(tmp_path, child_env):
    """A missing input: `<script>: error: <message>` and status 1, no traceback; --verbosity=1 shows it."""
    command = [sys.executable, os.path.join(SCRIPTS, "extract_features.py"), f"--input_file={tmp_path}/in.txt",
               f"--output_file={tmp_path}/out.jsonl", f"--vocab_file={tmp_path}/vocab.txt",
               f"--bert_config_file={tmp_path}/missing_config.json"]
    quiet = forkserver.run(command, capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=300)
    assert quiet.returncode == 1
    lines = [line for line in quiet.stderr.splitlines() if "error:" in line]
    assert lines == [f"extract_features.py: error: BERT config file not found: {tmp_path}/missing_config.json "
                     f"(--verbosity=1 shows the traceback)"], quiet.stderr[-2000:]
    assert "Traceback" not in quiet.stderr
    loud = forkserver.run(command + ["--verbosity=1"], capture_output=True, text=True, env=child_env(), cwd=REPO,
                          timeout=300)
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "FileNotFoundError" in loud.stderr


def test_bad_run_settings_are_refused_from_python(tmp_path):
    """Without the scripts' flags: RunConfig refuses bad training settings when made, and `runner.run` a missing
    output_dir before any work."""
    from bert_tf.tasks import classifier, runner

    for settings, message in [(dict(gradient_accumulation_steps=0), "gradient_accumulation_steps must be >= 1"),
                              (dict(optimizer="adam"), "Unknown optimizer 'adam': expected one of adamw, lamb"),
                              (dict(optimizer="lamb", adam_bias_correction=True), "applies to --optimizer=adamw")]:
        with pytest.raises(ValueError, match=message):
            runner.RunConfig(**settings)
    with pytest.raises(ValueError, match="^output_dir is required"):
        runner.run(classifier.ClassifierTask("tsv", str(tmp_path / "missing")), runner.RunConfig(do_train=True))


def test_a_malformed_hugging_face_config_is_named(tmp_path):
    from bert_tf.checkpoints import huggingface

    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 384,\n "hidden_act": }')
    with pytest.raises(ValueError, match=rf"^{path}:2:16: malformed JSON in Hugging Face config: "):
        huggingface.bert_config_from_hf(str(path))
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        huggingface.bert_config_from_hf(str(path))
