"""Every documented command runs: each `python run_scripts/<script>.py ...` command (also `python3`, `.venv/bin/python`)
of the shell blocks of README.md and docs/*.md (fenced ```bash or unlabelled blocks; continued lines joined,
comments dropped, `bash -c '...'` read inside) and of export_saved_model.py's docstring (its --help), read from those
files (so that an edit of the docs is what gets tested; headings play no part), is parsed by its script's own parser
in this process (a removed or misspelt flag fails), and is then
- NOT_RUN, with its reason, when it names what needs more than this machine (a TPU, a gs:// bucket, Dataflow, a
  cluster); or
- run by the test ELSEWHERE names, which reads README's section that holds it; or else
- run here: its `$NAME`s bound to tiny fixtures (tests/docs_fixtures.py; an unknown one fails), an absolute path
  moved under tmp_path, a relative one under tmp_path/work, the inputs no command writes made there; in ONE process
  (tests/script_steps.py), each after the commands that write its inputs (a path under another's --output_dir,
  --output_file, --export_dir), else in the docs' order. It must end without an error and write what its script's
  docstring says (`written`: a few files, not values). A script with its own argument parser (HERE:
  evaluate_squad.py, which takes the official script's arguments) runs in this process, after them. A command the
  docs give twice runs once. Of the export commands, those exporting by one route (a format; the preprocessing
  model apart) run once, the one naming the most flags, then each naming a flag no run named (tests/export/
  exports every task by each route); each export is loaded back.
So a new command runs on the fixtures, or is listed here with its reason.

A run keeps its command's flags as written, but for OVERRIDES, set for every script that has the flag: the steps
(warmup within them) and the batch sizes, so that each training is a few steps of a few examples (the fixtures'
data has docs_fixtures.ROWS rows a split). `[--flag=...]` (an option) is left out; a bare `...` (the flags "as
above") is AS_ABOVE in an export command, and nothing in another (the scripts mark flags required only when run
as a program: a command not run parses without them).
"""
import ast
import contextlib
import glob
import io
import json
import os
import re
import shlex
import sys

import docs_fixtures
import numpy as np
import pytest
import script_steps
import test_readme_checkpoint_examples as readme

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = "export_saved_model"
DOCS = ["README.md"] + sorted(os.path.relpath(path, REPO) for path in glob.glob(os.path.join(REPO, "docs", "*.md")))
DOCSTRINGS = [f"run_scripts/{EXPORT}.py"]  # scripts whose docstring's commands are documented commands too
SHELL_BLOCKS = ("", "bash", "sh", "shell", "console")
PYTHON = re.compile(r"(\S*/)?python(3(\.\d+)?)?")
# A command naming this (a flag, a value) needs what is not here: its reason.
NOT_RUN = {"--use_tpu": "a Cloud TPU",
           "--distribution_strategy=multi_worker_mirrored": "several hosts in one TF_CONFIG cluster (Slurm)",
           "--runner=DataflowRunner": "Google Cloud Dataflow",
           "--dask_client_address": "a dask.distributed cluster (tests/data/test_beam_dask.py runs the script on "
                                    "a local one)",
           "gs://": "a gs:// bucket (tests/test_cloud_paths.py runs the scripts on an emulated one)"}
# README's sections whose commands another test runs as written -> that test.
ELSEWHERE = {"### Training controls": "tests/tasks/test_training_controls.py",
             "### Your own data": "tests/tasks/test_data_readers.py",
             "#### Multi-label": "tests/tasks/test_multi_label.py",
             "### Long texts": "tests/tasks/test_long_documents.py",
             readme.HF_OUT: "tests/test_readme_checkpoint_examples.py",
             readme.KERAS_HUB: "tests/test_readme_checkpoint_examples.py"}
# The flags a run sets, given or not, where its script has them: a few steps of a few examples.
OVERRIDES = {"num_train_steps": "2", "num_warmup_steps": "1", "num_train_epochs": "1", "max_eval_steps": "2",
             "train_batch_size": "2", "eval_batch_size": "2", "predict_batch_size": "2"}
HERE = ("evaluate_squad",)  # scripts with their own argument parser (script_steps uses absl's): run in this process
OUTPUTS = ("output_dir", "output_file", "export_dir", "out_file")  # the flags naming what a command writes
AS_ABOVE = ["--vocab_file=$BERT/vocab.txt", "--bert_config_file=$BERT/bert_config.json",  # an export's bare `...`
            "--export_dir=/models/as_above"]
TRAIN = ["--task_name=tsv", "--do_train", "--data_dir=$BERT/data", "--vocab_file=$BERT/vocab.txt",  # makes $OUT
         "--bert_config_file=$BERT/bert_config.json", "--init_checkpoint=$BERT/bert_model.ckpt",
         "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1", "--seed=1", "--output_dir=$OUT"]
HUB = ["--format=tfhub", "--task=encoder", "--vocab_file=$BERT/vocab.txt", "--bert_config_file=$BERT/bert_config.json",
       "--init_checkpoint=$BERT/bert_model.ckpt", "--export_dir=/hub_download"]  # a TF Hub BERT, as downloaded


def script_calls(words):
    """[(script, its arguments: up to an operator)] of the `python run_scripts/<script>.py ...` calls in shell
    `words`, those inside a quoted argument (`bash -c '...'`) too."""
    calls = []
    for i, word in enumerate(words):
        script = re.fullmatch(r"run_scripts/(\w+)\.py", words[i + 1]) if i + 1 < len(words) else None
        if PYTHON.fullmatch(word) and script:
            end = next((j for j in range(i + 2, len(words)) if not words[j].strip("();<>|&")), len(words))
            calls.append((script.group(1), words[i + 2:end]))
        elif " " in word and "run_scripts/" in word:
            calls += script_calls(shell_words(word))
    return calls


def shell_words(line):
    """The words of a shell line, comments dropped, an operator (`;`, `&&`, `|`, `>`, ...) a word of its own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def commands_of(text, source):
    """[(source, script, arguments)] of the script commands in the shell text `text` (continued lines joined)."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        if not re.search(r"python\S*\s+run_scripts/", line):
            continue
        out += [(source, script, arguments) for script, arguments in script_calls(shell_words(line))]
    return out


def documented_commands():
    """Every documented command: [(source, script, arguments)], DOCS' blocks then DOCSTRINGS', in their order."""
    out = []
    for source in DOCS:
        with open(os.path.join(REPO, source), encoding="utf-8") as f:
            blocks = readme.fenced_blocks(f.read().splitlines(), *SHELL_BLOCKS)
        out += [command for block in blocks for command in commands_of(block, source)]
    for source in DOCSTRINGS:
        with open(os.path.join(REPO, source), encoding="utf-8") as f:
            out += commands_of(ast.get_docstring(ast.parse(f.read())), source)
    return out


def commands_run_elsewhere():
    """{(script, arguments): the ELSEWHERE test that runs it} of README's sections ELSEWHERE names."""
    return {(script, tuple(arguments)): test for title, test in ELSEWHERE.items()
            for block in readme.fenced_blocks(readme.section(title), *SHELL_BLOCKS)
            for _, script, arguments in commands_of(block, "README.md")}


def not_run_reason(arguments):
    """NOT_RUN's reason for a command with `arguments`, or None."""
    return next((reason for key, reason in NOT_RUN.items() if any(key in argument for argument in arguments)), None)


def bind(argument, root, script=None):
    """`argument` (of a command of `script`) with an absolute path moved under `root` and its placeholders bound
    (docs_fixtures)."""
    def placeholder(match):
        name = match.group(1)
        if name in docs_fixtures.LITERALS:
            return docs_fixtures.LITERALS[name]
        assert name in docs_fixtures.PLACEHOLDERS, (
            f"a documented command uses ${name}, which tests/docs_fixtures.py does not bind (PLACEHOLDERS)")
        return os.path.join(root, docs_fixtures.placeholder(name, script))

    return re.sub(r"\$\{?(\w+)\}?", placeholder, re.sub(r"^(--[\w-]+=)?/(?!/)", rf"\g<1>{root}/", argument))


def bound(script, arguments, root):
    """A command's arguments as this test runs or parses them (module docstring)."""
    given = {argument.split("=")[0] for argument in arguments}
    out = []
    for argument in arguments:
        if argument == "...":
            out += [flag for flag in AS_ABOVE if flag.split("=")[0] not in given] if script == EXPORT else []
        elif not argument.startswith("["):
            out.append(argument)
    return [bind(argument, root, script) for argument in out]


def overridden(arguments, names):
    """`arguments` with OVERRIDES' values for the flags of `names` (the script's) it gives or not."""
    kept = [argument for argument in arguments if argument.lstrip("-").split("=")[0] not in OVERRIDES]
    return kept + [f"--{name}={value}" for name, value in OVERRIDES.items() if name in names]


def flag_values(arguments):
    """{name: value ("true" for a bare boolean)} of a command's --flags; its positional arguments by index."""
    flags, positional = {}, []
    for argument in arguments:
        if argument.startswith("-"):
            name, equals, value = argument.lstrip("-").partition("=")
            flags[name] = value if equals else "true"
        else:
            positional.append(argument)
    return {**flags, **dict(enumerate(positional))}


def true(flags, name):
    return str(flags.get(name, "false")).lower() not in ("false", "0", "no")


def in_process(script, argvs, run=False):
    """Parses each argv (a command's arguments) with `script`'s own parser in this process (absl's, or the script's
    `parse_flags`), and with `run` calls its main; returns the names of the script's flags, the error of each argv
    ("Type: message") or None, and the values it parsed ({flag given: value, index: positional argument}). The
    script's flags are removed after. Flags that modules other than absl defined in this process (Model Garden's
    tools, which other test modules import, define --bert_config_file) are set aside meanwhile."""
    from absl import flags

    others = {flag.name: (module, flag) for module, defined in flags.FLAGS.flags_by_module_dict().items()
              if not module.startswith("absl.") for flag in defined}
    for name in others:
        delattr(flags.FLAGS, name)
    before, errors, values = set(flags.FLAGS), [], []
    try:
        module = script_steps.load_script(os.path.join(REPO, "run_scripts", f"{script}.py"), before)
        names = set(flags.FLAGS) - before
        for argv in argvs:
            flags.FLAGS.unparse_flags()
            stderr, given, error = io.StringIO(), {}, None
            try:
                with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                    parse = getattr(module, "parse_flags", lambda argv: flags.FLAGS(argv))
                    rest = parse([f"{script}.py", *argv])
                    given = {**{name: flags.FLAGS[name].value for name in names if flags.FLAGS[name].present},
                             **dict(enumerate(rest[1:]))}
                    if run:
                        module.main(rest)
            except (Exception, SystemExit) as e:  # noqa: BLE001 (reported to the test)
                error = f"{type(e).__name__}: {e} {stderr.getvalue()[-2000:]}"
            errors.append(error)
            values.append(given)
    finally:
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
        for name, (module, flag) in others.items():
            flags.FLAGS[name] = flag
            flags.FLAGS.register_flag_by_module(module, flag)
        flags.FLAGS.unparse_flags()
    return names, errors, values


def parse(commands):
    """{script: its flag names}, and for each command ((script, bound arguments)) its error or None and its values
    (`in_process`)."""
    names, errors, values = {}, [None] * len(commands), [None] * len(commands)
    for script in sorted({script for script, _ in commands}):
        indices = [i for i, (name, _) in enumerate(commands) if name == script]
        names[script], parsed, parsed_values = in_process(script, [commands[i][1] for i in indices])
        for i, error, value in zip(indices, parsed, parsed_values):
            errors[i], values[i] = error, value
    return names, errors, values


def writes(flags, path):
    """Whether a run with `flags` writes `path` (or a directory above it)."""
    return any(path == str(flags[name]) or path.startswith(str(flags[name]).rstrip("/") + "/")
               for name in OUTPUTS if name in flags)


def run_order(runs):
    """The indices of `runs` ([(script, flags)]) in the order they run: each after those writing its inputs, else
    in the docs' order."""
    reads = [[str(value) for name, value in flags.items() if name not in OUTPUTS] for _, flags in runs]
    after = [{j for j in range(len(runs)) if j != i and any(writes(runs[j][1], path) for path in reads[i])}
             for i in range(len(runs))]
    order = []
    while len(order) < len(runs):
        ready = [i for i in range(len(runs)) if i not in order and after[i] <= set(order)]
        assert ready, f"the documented commands read each other's outputs in a cycle: {runs}"
        order.append(ready[0])
    return order


def write_inputs(runs, order, root, work):
    """Writes each input of the runs (in `order`; a relative path under `work`) that no earlier run writes
    (docs_fixtures), and links each TF Hub BERT a run names to the HUB export's; returns whether one was linked."""
    hub = False
    for k, i in enumerate(order):
        script, flags = runs[i]
        for name, value in flags.items():
            path = os.path.join(work, str(value))
            if name in OUTPUTS or os.path.lexists(path) or any(writes(runs[j][1], path) for j in order[:k]):
                continue
            if docs_fixtures.HUB_MODULE.fullmatch(os.path.basename(path.rstrip("/"))):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(os.path.join(root, "hub_download", "1"), path)
                hub = True
            else:
                docs_fixtures.write_input(script, name, path, flags)
    return hub


def written(script, flags):
    """The files a run of `script` with `flags` wrote, as its docstring says (a glob each): [what is missing]."""
    out = flags.get("output_dir", "")
    files = [f"{out}/ckpt-*.index"] if true(flags, "do_train") else []
    if script in ("run_classifier", "run_classifier_with_tfhub", "run_swag", "run_ner", "run_pretraining"):
        files += [f"{out}/eval_results.txt"] if true(flags, "do_eval") else []
        files += [f"{out}/test_results.{'txt' if script == 'run_ner' else 'tsv'}"] if true(flags, "do_predict") else []
        files += [f"{flags['export_dir']}/*/saved_model.pb"] if "export_dir" in flags else []
        files += [f"{out}/original/bert_model.ckpt.index"] if true(flags, "save_original_checkpoint") else []
    elif script == "run_squad":
        files += [f"{out}/{name}.json" for name in ("predictions", "nbest_predictions", "null_odds")[
            :3 if true(flags, "version_2_with_negative") else 2]] if true(flags, "do_predict") else []
    elif script == "create_pretraining_data":
        files.append(flags["output_file"] + ("-*" if "num_workers" in flags else ""))
    elif script in ("extract_features", "predict_masked_lm", "semantic_search"):
        files.append(flags["output_file"])
    elif script == "convert_checkpoint":
        files.append(f"{out}/*")
    elif script == "evaluate_squad":
        files += [flags["out_file"]] if "out_file" in flags else []
    else:
        assert script == EXPORT, f"{script}.py: this test does not know what it writes (`written`)"
    return [pattern for pattern in files if not glob.glob(pattern)]


def load(version_dir):
    """Loads the export in `version_dir` with its format's runtime; returns its format."""
    with open(os.path.join(version_dir, "assets.extra", "export_metadata.json")) as f:
        fmt = json.load(f)["format"]
    if fmt == "litert":
        from ai_edge_litert.interpreter import Interpreter
        runner = Interpreter(model_path=os.path.join(version_dir, "model.tflite")).get_signature_runner()
        assert runner(input_ids=np.ones((1, 4), np.int32), input_mask=np.ones((1, 4), np.int32),
                      segment_ids=np.zeros((1, 4), np.int32))
    elif fmt == "onnx":
        import onnxruntime
        assert onnxruntime.InferenceSession(os.path.join(version_dir, "model.onnx")).get_inputs()
    else:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (the TF Text ops of the text signatures)
        assert tf.saved_model.load(version_dir).signatures
    return fmt


def export_route(flags):
    """(format, whether it is the preprocessing model) of an export command's flags."""
    return flags.get("format", "serving"), flags.get("task") == "preprocessing"


def picked_exports(exports):
    """The indices of the export commands (`exports`: [(index, flags)]) that run (module docstring)."""
    chosen = {}  # route -> (index, flag names) of its command naming the most flags (the first of those)
    for i, flags in exports:
        if len(flags) > len(chosen.get(export_route(flags), (None, ()))[1]):
            chosen[export_route(flags)] = i, set(flags)
    picked = [i for i, _ in chosen.values()]
    named = set().union(*(names for _, names in chosen.values()))
    for i, flags in exports:  # then each command naming a flag no run named
        if not set(flags) <= named:
            picked.append(i)
            named |= set(flags)
    return sorted(picked)


def missing_input(flags):
    """The error of the first model input of an export command's `flags` that does not exist, or None."""
    from bert_tf import checkpoints

    files = [flags.get(name) for name in ("vocab_file", "bert_config_file")]
    files.append(flags["label_list"] if "/" in flags.get("label_list", "") else None)
    try:
        if "init_checkpoint" in flags:
            checkpoints.resolve_checkpoint(flags["init_checkpoint"])
        return next((f"no file {path}" for path in files if path and not os.path.isfile(path)), None)
    except FileNotFoundError as e:
        return str(e)


def plan(commands, root):
    """Each command's (what is done with it, its bound arguments): "run", "parsed" (an export not picked, or a
    command the docs give again), NOT_RUN's reason, or the ELSEWHERE test."""
    elsewhere, seen = commands_run_elsewhere(), set()
    kinds, arguments = [], []
    for _, script, words in commands:
        arguments.append(bound(script, words, root))
        kinds.append(not_run_reason(words) or elsewhere.get((script, tuple(words))) or
                     ("parsed" if (script, tuple(words)) in seen else "run"))
        seen.add((script, tuple(words)))
    exports = [(i, flag_values(arguments[i])) for i, kind in enumerate(kinds)
               if kind == "run" and commands[i][1] == EXPORT]
    picked = picked_exports(exports)
    return ["parsed" if commands[i][1] == EXPORT and kind == "run" and i not in picked else kind
            for i, kind in enumerate(kinds)], arguments


def describe(command):
    source, script, words = command
    return f"{source}: python run_scripts/{script}.py {shlex.join(words)}"


def steps_of(runs, order, root, hub):
    """script_steps' steps: the fixtures' runs (TRAIN where a run reads $OUT, HUB where one names a TF Hub BERT),
    then `runs` in `order`, a script's consecutive runs one step."""
    trained = bind("$OUT", root)
    steps = [("run_classifier", [bind(flag, root) for flag in TRAIN])] if any(
        (argument.split("=")[-1] + "/").startswith(trained + "/") for _, argv in runs for argument in argv) else []
    steps += [(EXPORT, [bind(flag, root) for flag in HUB])] if hub else []
    grouped = []
    for script, argv in steps + [runs[k] for k in order]:
        path = os.path.join(REPO, "run_scripts", f"{script}.py")
        if grouped and grouped[-1][0] == path:
            grouped[-1][1].append(argv)
        else:
            grouped.append((path, [argv]))
    return grouped, len(steps)


@pytest.mark.slow
def test_documented_commands_run(tmp_path, child_env):
    """Every documented command is parsed by its script; those neither NOT_RUN nor ELSEWHERE run on the fixtures
    without an error and write what their script says; each export loads."""
    root, work = str(tmp_path), str(tmp_path / "work")
    os.makedirs(work)
    commands = documented_commands()
    assert {source for source, _, _ in commands} >= {"README.md", "docs/serving.md"}, commands
    kinds, arguments = plan(commands, root)
    names, errors, parsed = parse([(script, words) for (_, script, _), words in zip(commands, arguments)])
    failed = [f"{describe(command)}\n{error}" for command, error in zip(commands, errors) if error]
    assert not failed, "\n".join(failed)
    docs_fixtures.write_releases(root)
    indices = [i for i, kind in enumerate(kinds) if kind == "run"]
    runs = [(commands[i][1], overridden(arguments[i], names[commands[i][1]])) for i in indices]
    values = [parsed[i] for i in indices]
    order = run_order(list(zip([script for script, _ in runs], values)))
    here = [k for k in order if runs[k][0] in HERE]  # run after the others
    hub = write_inputs(list(zip([script for script, _ in runs], values)), order, root, work)
    steps, fixtures = steps_of(runs, [k for k in order if k not in here], root, hub)
    done, logs = script_steps.run(steps, work, child_env())
    step_errors = [error for step in done for error in step["errors"]]
    assert step_errors[:fixtures] == [None] * fixtures, (step_errors, logs[-3000:])
    ran = dict(zip([k for k in order if k not in here], step_errors[fixtures:]))
    with contextlib.chdir(work):
        for k in here:
            ran[k] = in_process(runs[k][0], [runs[k][1]], run=True)[1][0]
    failed = [f"{describe(commands[indices[k]])}\n{ran[k] or 'wrote no ' + str(written(script, values[k]))}"
              for k, (script, _) in enumerate(runs) if ran[k] or written(script, values[k])]
    failed += [f"{describe(command)}\n{missing_input(flag_values(words))}"
               for command, words, kind in zip(commands, arguments, kinds)
               if command[1] == EXPORT and kind in ("run", "parsed") and missing_input(flag_values(words))]
    assert not failed, "\n".join(failed) + "\n" + logs[-3000:]
    exports = [flags for (script, _), flags in zip(runs, values) if script == EXPORT]
    versions = [os.path.join(base, version) for base in sorted({flags["export_dir"] for flags in exports})
                for version in sorted(os.listdir(base))]
    assert len(versions) == len(exports), versions
    formats = sorted(load(version) for version in versions)
    assert formats == sorted(export_route(flags)[0] for flags in exports), formats


def one_command_doc(tmp_path, monkeypatch, command):
    """The docs made of one bash block holding `command` (a shell line), in place of DOCS and DOCSTRINGS."""
    doc = tmp_path / "doc.md"
    doc.write_text(f"Text.\n\n```bash\n{command}\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", [str(doc)])
    monkeypatch.setattr(sys.modules[__name__], "DOCSTRINGS", [])
    return documented_commands()


def test_a_misspelt_flag_fails_the_parse(tmp_path, monkeypatch):
    """README's first command run here parses as written; with one flag misspelt, its script's parser names that
    flag."""
    commands = documented_commands()
    kinds, _ = plan(commands, str(tmp_path))
    _, script, words = next(command for command, kind in zip(commands, kinds)
                            if command[0] == "README.md" and kind == "run")
    flag = next(i for i, word in enumerate(words) if word.startswith("--"))
    name, equals, value = words[flag].partition("=")
    misspelt = [*words[:flag], f"{name[:-1]}{equals}{value}", *words[flag + 1:]]  # its name's last letter dropped
    for argv, fails in ((words, False), (misspelt, True)):
        commands = one_command_doc(tmp_path, monkeypatch, f"python run_scripts/{script}.py {shlex.join(argv)}")
        _, arguments = plan(commands, str(tmp_path))
        _, (error,), _ = parse([(script, arguments[0])])
        assert (error is not None) == fails and (not fails or name[2:-1] in error), error


def test_b_an_unknown_placeholder_fails(tmp_path, monkeypatch):
    """A `$NAME` the fixtures do not bind fails, named (the command read as the docs write it)."""
    commands = one_command_doc(tmp_path, monkeypatch, "python3 run_scripts/run_squad.py --output_dir=/tmp/squad \\\n"
                                                      "  --vocab_file=$NEW_MODEL/vocab.txt  # a comment")
    assert [(script, words) for _, script, words in commands] == [
        ("run_squad", ["--output_dir=/tmp/squad", "--vocab_file=$NEW_MODEL/vocab.txt"])]
    with pytest.raises(AssertionError, match=r"uses \$NEW_MODEL, which tests/docs_fixtures.py does not bind"):
        plan(commands, str(tmp_path))


def test_c_a_command_that_fails_or_writes_nothing_fails(tmp_path):
    """The run of a command that raises is its error (evaluate_squad.py, run here, on files that are not there);
    a run that did not write its outputs is named; a script this test does not know fails."""
    files = [str(tmp_path / "dev.json"), str(tmp_path / "predictions.json")]
    _, (error,), _ = in_process("evaluate_squad", [files], run=True)
    assert error and "dev.json" in error, error
    flags = {"output_dir": str(tmp_path), "do_train": "true", "do_predict": "true"}
    assert written("run_squad", flags) == [f"{tmp_path}/ckpt-*.index", f"{tmp_path}/predictions.json",
                                           f"{tmp_path}/nbest_predictions.json"]
    with pytest.raises(AssertionError, match="build_vocab.py: this test does not know what it writes"):
        written("build_vocab", {})



def test_readme_faq_word_alignment_runs_and_shows_its_values(uncased_vocab_file):
    """README's FAQ snippet (words to wordpieces, the original README's example) runs on the bert-base-uncased
    vocabulary, and each line `expression  # value` shows what the expression gives."""
    (snippet,) = readme.fenced_blocks(readme.section("## FAQ"), "python")
    snippet = re.sub(r'vocab_file="[^"]+"', f"vocab_file={uncased_vocab_file!r}", snippet)
    lines, namespace, shown = snippet.splitlines(), {}, 0
    for statement in ast.parse(snippet).body:
        value = lines[statement.lineno - 1].partition("  # ")[2]
        if isinstance(statement, ast.Expr) and value[:1] in ("[", "("):
            assert eval(compile(ast.Expression(statement.value), "README", "eval"), namespace) == \
                ast.literal_eval(value), lines[statement.lineno - 1]
            shown += 1
        else:
            exec(compile(ast.Module([statement], []), "README", "exec"), namespace)
    assert shown == 3
