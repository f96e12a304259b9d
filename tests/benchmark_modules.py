"""benchmarks/*.py for the tests: the directory is not a package, and each script imports its sibling measure.py as
`measure`."""
import importlib.util
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _execute(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(name):
    """benchmarks/<name>.py as a module; measure.py is loaded once and registered as `measure` first."""
    if "measure" not in sys.modules:
        sys.modules["measure"] = _execute("measure")
    return sys.modules["measure"] if name == "measure" else _execute(name)
