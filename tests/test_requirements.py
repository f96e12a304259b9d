"""The requirements bert-tf is installed with (setup.py, as pip recorded them) exclude the versions it must not run
with, and admit the ones installed here; dev.py says what to install where it cannot make its venv."""
import importlib.metadata
import os
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def requirement(name):
    """The installed bert-tf's requirement on the distribution `name` (an extra's included)."""
    return next(Requirement(text) for text in importlib.metadata.requires("bert-tf")
                if Requirement(text).name == name)


@pytest.mark.parametrize("name, refused", [
    ("keras", ["3.10.0", "3.11.0", "3.11.2"]),  # safe_mode bypasses on the KerasHub preset path, fixed in 3.11.3
    ("tf2onnx", ["1.18.0", "2.0"]),  # portable.py's reading of TF2ONNX_CATCH_ERRORS was checked on 1.17 only
])
def test_refuses_the_versions_bert_tf_must_not_run_with(name, refused):
    specifier = requirement(name).specifier
    assert not [version for version in refused if specifier.contains(version)]
    assert specifier.contains(importlib.metadata.version(name))


@pytest.mark.parametrize("name", ["tensorflow", "tensorflow-text"])
def test_base_install_takes_tensorflow_2_20_and_2_21(name):
    """Only tf-models-official (the compare and ecosystem extras) holds the family at 2.20."""
    assert requirement(name).marker is None  # the base install's, not an extra's
    versions = ["2.19.1", "2.20.0", "2.20.1", "2.21.0", "2.21.1", "2.22.0"]
    assert [v for v in versions if requirement(name).specifier.contains(v)] == versions[1:5]


def test_dev_py_says_what_to_install_without_ensurepip(tmp_path):
    """A Python without ensurepip (Debian's and Ubuntu's until python3.X-venv is installed): dev.py names the package
    and makes no half-made .venv."""
    for name in ("dev.py", "setup.py"):
        shutil.copy(os.path.join(REPO, name), tmp_path)
    code = "import runpy, sys; sys.modules['ensurepip'] = None; runpy.run_path('dev.py', run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code, "setup"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and not os.path.exists(tmp_path / ".venv")
    assert f"sudo apt install python3.{sys.version_info.minor}-venv" in proc.stderr and "Traceback" not in proc.stderr
