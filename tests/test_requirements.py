"""The requirements bert-tf is installed with (setup.py, as pip recorded them) exclude the versions it must not run
with, and admit the ones installed here."""
import importlib.metadata

import pytest
from packaging.requirements import Requirement


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
