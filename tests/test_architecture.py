"""The structure the code keeps: which layer may import which, no cycles, no private names across modules,
TensorFlow-free data and text modules, scripts on top of the library (each setting the scripts' defaults before
TensorFlow), a library whose import changes nothing in the process, and the indexes that describe it (each package
docstring and CONTRIBUTING.md's layout name every module, and only modules).

Reads the imports with `ast` (nothing is imported but `bert_tf` itself, in a fresh process). Run it as a script to
print the import graph:

    python tests/test_architecture.py            # package-level edges with counts, then cycles (if any)
    python tests/test_architecture.py --modules  # every module-level edge
"""
import ast
import collections
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Packages of bert_tf from the bottom up: a module may import its own package and the ones below it, never above.
LAYERS = {
    "fileio": -1,
    "text": 0,
    "data": 1, "resources": 1,
    "model": 2,
    "checkpoints": 3,
    "training": 4,
    "export": 5, "inference": 5,
    "tasks": 6,
}
# The drop-in modules for users of the original code, and the scripts' flags and start-up defaults: nothing inside
# the library uses them.
TOP_LEVEL_ONLY = {"bert_tf.modeling", "bert_tf.tokenization", "bert_tf.flags", "bert_tf.script_setup"}
# Third-party packages that import TensorFlow (a script imports bert_tf.flags before any of them).
TENSORFLOW_PACKAGES = ("tensorflow", "keras", "tf_keras", "tensorflow_text", "tensorflow_hub", "official")
# Modules that must import without TensorFlow (worker processes, tokenization users, bert_tf.script_setup before
# TensorFlow starts): no top-level tensorflow.
TF_FREE = ["bert_tf.text.tokenization", "bert_tf.text.packing", "bert_tf.fileio", "bert_tf.data.corpus",
           "bert_tf.data.vocab", "bert_tf.data.pretraining.instances", "bert_tf.data.pretraining.wire",
           "bert_tf.data.pretraining.shards", "bert_tf.training.machine", "bert_tf.training.peers"]


# Only bert_tf.fileio touches files, so that every user path may be a URL (gs://, ram://): elsewhere in the library
# no builtin open, no os / os.path call that reads, writes or tests a path, no shutil, glob, tempfile, io.open,
# gzip.open, bz2.open or tf.io.gfile. Modules that read files local by nature, and which:
LOCAL_BY_NATURE = {
    "bert_tf.resources": "the data files of installed PyPI packages (site-packages)",
    "bert_tf.training.devices": "/proc/cpuinfo",
    "bert_tf.training.machine": "the NVIDIA driver's and the TPU's device files",
}
FILE_FUNCTIONS = {
    "os": {"makedirs", "mkdir", "replace", "rename", "renames", "remove", "unlink", "rmdir", "removedirs", "listdir",
           "walk", "scandir", "stat", "lstat", "access", "chmod", "open", "fspath_open"},
    "os.path": {"exists", "lexists", "isfile", "isdir", "islink", "getsize", "getmtime", "getctime", "getatime",
                "abspath", "realpath", "samefile"},
    "io": {"open"}, "gzip": {"open"}, "bz2": {"open"},
}
FILE_MODULES = ("shutil", "glob", "tempfile", "tf.io.gfile")


def module_name(path):
    rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def python_files(*folders):
    for folder in folders:
        for root, _, names in os.walk(os.path.join(REPO, folder)):
            yield from (os.path.join(root, n) for n in sorted(names) if n.endswith(".py"))


Import = collections.namedtuple("Import", ["source", "target", "names", "line", "top_level"])


def imports_of(path):
    """Every `import bert_tf...` / `from bert_tf... import ...` in a file (also inside functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    source = module_name(path)
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [a.name for a in node.names]
            base = node.module
            if base == "bert_tf" or base.startswith("bert_tf."):
                # `from bert_tf.x import y` imports module bert_tf.x.y when y is a module
                targets = [f"{base}.{n}" if is_module(f"{base}.{n}") else base for n in names]
                for target, name in zip(targets, names):
                    found.append(Import(source, target, [name] if target == base else [], node.lineno,
                                        id(node) in top))
            else:
                found.append(Import(source, base, names, node.lineno, id(node) in top))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(source, alias.name, [], node.lineno, id(node) in top))
    return found


def is_module(name):
    path = os.path.join(REPO, *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def library_imports():
    return [i for path in python_files("bert_tf") for i in imports_of(path)]


def layer(module):
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def internal_edges(imports):
    return [i for i in imports if i.target.startswith("bert_tf.") and i.target != i.source
            and not i.source.startswith(i.target + ".")]  # a package's modules may import its __init__


def find_cycles(edges):
    graph = collections.defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "active"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "active":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_module_imports_a_higher_layer():
    upward = [f"{i.source} (layer {layer(i.source)}) imports {i.target} (layer {layer(i.target)}), line {i.line}"
              for i in internal_edges(library_imports())
              if layer(i.source) is not None and layer(i.target) is not None and layer(i.target) > layer(i.source)]
    assert not upward, "\n".join(upward)


def test_every_library_package_has_a_layer():
    unplaced = sorted({m for m in map(module_name, python_files("bert_tf"))
                       if m.count(".") >= 1 and layer(m) is None and m not in TOP_LEVEL_ONLY})
    assert not unplaced, f"place these in LAYERS (tests/test_architecture.py): {unplaced}"


def _dotted(node):
    """'a.b.c' for the attribute chain a.b.c, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id] + parts[::-1]) if isinstance(node, ast.Name) else None


def file_calls(path):
    """The calls in `path` that touch files (FILE_FUNCTIONS, FILE_MODULES, builtin open): [(line, call)]."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else _dotted(node.func)
        owner, _, function = (name or "").rpartition(".")
        if name == "open" or function in FILE_FUNCTIONS.get(owner, ()) or owner.startswith(FILE_MODULES):
            found.append((node.lineno, name))
    return found


def test_only_fileio_touches_files():
    """Every user path may be a URL: outside bert_tf.fileio nothing opens, tests, lists or moves a path."""
    bad = [f"{module_name(path)}:{line}: {call}" for path in python_files("bert_tf", "run_scripts")
           if module_name(path) not in ("bert_tf.fileio", *LOCAL_BY_NATURE) for line, call in file_calls(path)]
    assert not bad, "use bert_tf.fileio:\n" + "\n".join(bad)


def test_no_import_cycles():
    edges = {(i.source, i.target) for i in internal_edges(library_imports())}
    assert not find_cycles(edges)


def test_library_does_not_use_the_drop_in_modules_or_flags():
    bad = [f"{i.source} imports {i.target}, line {i.line}" for i in library_imports()
           if (i.target in TOP_LEVEL_ONLY or i.target.startswith("absl.flags") or "flags" in i.names
               and i.target == "absl") and i.source not in TOP_LEVEL_ONLY]
    assert not bad, "\n".join(bad)


def test_no_private_names_across_modules():
    bad = []
    for path in list(python_files("bert_tf")) + list(python_files("run_scripts")):
        source = module_name(path)
        tree = ast.parse(open(path, encoding="utf-8").read())
        aliases = {}
        for i in imports_of(path):
            bad += [f"{source}: from {i.target} import {n}, line {i.line}" for n in i.names
                    if n.startswith("_") and i.target.startswith("bert_tf") and i.target != source
                    and i.source not in TOP_LEVEL_ONLY]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bert_tf"):
                aliases.update({a.asname or a.name: a.name for a in node.names})
            elif isinstance(node, ast.Import):
                aliases.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("bert_tf")})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                bad.append(f"{source}: {node.value.id}.{node.attr}, line {node.lineno}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", TF_FREE)
def test_data_and_text_modules_do_not_import_tensorflow_at_top_level(module):
    path = os.path.join(REPO, *module.split(".")) + ".py"
    heavy = [i for i in imports_of(path) if i.top_level and i.target.split(".")[0] in ("tensorflow", "keras",
                                                                                          "tensorflow_text")]
    assert not heavy, f"{module} imports {[i.target for i in heavy]} at the top"
    transitive = [i.target for i in imports_of(path) if i.top_level and i.target.startswith("bert_tf.")
                  and i.target not in TF_FREE and i.target not in ("bert_tf", "bert_tf.data", "bert_tf.text",
                                                                   "bert_tf.data.pretraining")]
    assert not transitive, f"{module} imports {transitive}, which are not TensorFlow-free"


def test_scripts_use_only_the_library_and_the_library_not_the_scripts():
    script_imports = [i for path in python_files("run_scripts") for i in imports_of(path)]
    assert not [i for i in script_imports if i.target.startswith("run_scripts")]
    assert not [i for i in library_imports() if i.target.startswith(("run_scripts", "benchmarks", "tests"))]


def test_scripts_import_bert_tf_flags_before_tensorflow():
    """bert_tf.flags applies the scripts' defaults (bert_tf.script_setup), which TensorFlow reads when it is
    imported: in every run script it comes before any other bert_tf module (but the TensorFlow-free ones) and any
    package that imports TensorFlow."""
    late = []
    for path in python_files("run_scripts"):
        first = sorted((i for i in imports_of(path) if i.top_level), key=lambda i: i.line)
        order = [i.target for i in first if i.target.startswith("bert_tf.") and i.target not in TF_FREE
                 or i.target.split(".")[0] in TENSORFLOW_PACKAGES]
        if not order or order[0] != "bert_tf.flags":
            late.append(f"{module_name(path)}: {order[:3]}")
    assert not late, "\n".join(late)


def test_importing_bert_tf_changes_nothing_in_the_process(child_env):
    """No environment variable, import hook or exit handler: those are the scripts' (bert_tf.script_setup)."""
    code = ("import atexit, os, sys\n"
            "state = lambda: (dict(os.environ), list(sys.meta_path), atexit._ncallbacks())\n"
            "before = state()\n"
            "import bert_tf\n"
            "after = state()\n"
            "print(sorted(set(after[0].items()) ^ set(before[0].items())), after[1:] == before[1:])\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.strip() == "[] True", result.stdout + result.stderr[-2000:]


def main(argv):
    imports = internal_edges(library_imports())
    if "--modules" in argv:
        for source, target in sorted({(i.source, i.target) for i in imports}):
            print(f"{source} -> {target}")
    else:
        def package(m):
            return ".".join(m.split(".")[:2])
        counts = collections.Counter((package(i.source), package(i.target)) for i in imports
                                     if package(i.source) != package(i.target))
        for (source, target), n in sorted(counts.items()):
            print(f"{source} -> {target} ({n})")
    cycles = find_cycles({(i.source, i.target) for i in imports})
    print(f"{len(cycles)} import cycles" + "".join(f"\n  {' -> '.join(c)}" for c in cycles))


if __name__ == "__main__":
    main(sys.argv[1:])


def test_the_runner_calls_tasks_through_their_contract():
    """The runner calls a Task's methods and reads its attributes (bert_tf.tasks.task.Task gives the defaults and
    declares evaluate / predict): no hasattr / getattr probing of what a task has; every task subclasses Task and
    defines the method of each mode it has; a task that lacks one is refused when its class is defined."""
    import ast
    import inspect

    from bert_tf.tasks import classifier, ner, pretraining, runner, squad, swag
    from bert_tf.tasks.task import Task

    probes = [node.lineno for node in ast.walk(ast.parse(inspect.getsource(runner)))
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("hasattr", "getattr")
              and node.args and getattr(node.args[0], "id", None) == "task"]
    assert probes == [], f"runner.py probes the task at lines {probes}"
    for task in (classifier.ClassifierTask, ner.NerTask, pretraining.PretrainingTask, squad.SquadTask,
                 swag.SwagTask):
        assert issubclass(task, Task), task
    assert Task.__abstractmethods__ == {"spec", "train_data"}  # a task without them cannot be made
    for task in (classifier.ClassifierTask, ner.NerTask, pretraining.PretrainingTask, squad.SquadTask,
                 swag.SwagTask):  # the method of each mode a task has is its own, and only those
        assert {mode for mode, method in (("do_eval", "evaluate"), ("do_predict", "predict"))
                if getattr(task, method) is not getattr(Task, method)} == set(task.modes) - {"do_train"}, task
    with pytest.raises(TypeError, match=r"NoEval: its modes \('do_train', 'do_eval'\) need evaluate"):
        type("NoEval", (Task,), {"modes": ("do_train", "do_eval")})


# --- indexes: the package docstrings and CONTRIBUTING.md's layout name every module, and only modules ----------

def packages():
    """{package dotted name: sorted names of its modules and subpackages} of bert_tf."""
    found = {}
    for root, dirs, names in os.walk(os.path.join(REPO, "bert_tf")):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(root, d, "__init__.py")))
        found[module_name(os.path.join(root, "__init__.py"))] = sorted(
            [n[:-3] for n in names if n.endswith(".py") and n != "__init__.py"] + dirs)
    return found


def index_errors(listed, actual):
    """{package: its unlisted modules and listed names that are no module} where `listed` ({package: names}) differs
    from `actual` (`packages()`)."""
    return {package: {"unlisted": sorted(set(modules) - set(listed[package])),
                      "not a module": sorted(set(listed[package]) - set(modules))}
            for package, modules in actual.items() if listed[package] != modules}


def outside_parentheses(text):
    """`text` without what stands inside parentheses (nested too; a `quoted` span is kept whole)."""
    kept, depth, quoted = [], 0, False
    for char in text:
        quoted ^= char == "`"
        if not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif depth == 0:
            kept.append(char)
    return "".join(kept)


def docstring_listing(package):
    """The modules a package's docstring lists: the `quoted` lowercase names outside parentheses of its paragraph
    that starts with "Modules", else of its first paragraph."""
    path = os.path.join(REPO, *package.split("."), "__init__.py")
    with open(path, encoding="utf-8") as f:
        paragraphs = [p.strip() for p in (ast.get_docstring(ast.parse(f.read())) or "").split("\n\n")]
    listing = next((p for p in paragraphs if p.startswith("Modules")), paragraphs[0])
    return sorted(set(re.findall(r"`([a-z_][a-z0-9_]*)`", outside_parentheses(listing))))


def test_each_package_docstring_lists_its_modules():
    """Every bert_tf package's docstring names each of its modules and subpackages, and nothing else, as `name`."""
    actual = packages()
    assert not index_errors({package: docstring_listing(package) for package in actual}, actual)


def readme_layout():
    """{package: listed module names} of CONTRIBUTING.md's "## Layout" block: bert_tf's entries (`name.py` or
    `name/`, the package's listing a comma/semicolon-separated list whose items start with a module's name,
    descriptions in parentheses), and each `sub/ (...)` item's list."""
    with open(os.path.join(REPO, "CONTRIBUTING.md"), encoding="utf-8") as f:
        block = f.read().split("## Layout", 1)[1].split("```")[1]
    entries, listing = {}, {}
    for line in block.split("bert_tf/\n", 1)[1].splitlines():
        if not line.startswith(" "):
            break
        entry = re.match(r"  ((?:[\w.]+(?:\.py|/))(?:, [\w.]+(?:\.py|/))*)\s+(.*)", line)
        if entry:
            names = entry.group(1).split(", ")
            entries.update({name.removesuffix(".py").removesuffix("/"): "" for name in names})
            current = names[0].removesuffix("/") if names[0].endswith("/") else None
            line = entry.group(2)
        if current:
            entries[current] += " " + line.strip()
    listing["bert_tf"] = sorted(entries)

    def items(text):
        return [item.split()[0].rstrip(":") for item in re.split(r"[,;]", outside_parentheses(text)) if item.strip()]

    for package, text in entries.items():
        if not text:
            continue
        listing[f"bert_tf.{package}"] = sorted(name.rstrip("/") for name in items(text))
        for sub, inner in re.findall(r"(\w+)/ \(([^()]*)\)", text):
            listing[f"bert_tf.{package}.{sub}"] = sorted(items(inner))
    return listing


def test_readme_layout_lists_every_module():
    """CONTRIBUTING.md's layout names each module and subpackage of bert_tf and of each package, and nothing else."""
    listed, actual = readme_layout(), packages()
    assert sorted(listed) == sorted(actual)
    assert not index_errors(listed, actual)
