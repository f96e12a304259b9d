"""No half-replaced files (issue 31): a child process replacing an export version (`fileio.staged_directory`, as
`exporter.export` commits every format) or a release (`original.write_release`, what export_original and the
converters write) is SIGKILLed after each of its renames in turn (os.replace wrapped in the child: the real code
runs; the children are forked from one process that imported the modules once). A reader then finds the old or the
new version (every file and its bytes; other files kept), or none (no key file); the next write replaces it whole,
and its clean-up removes the killed writer's staging directory once that is stale."""
import collections
import json
import os
import shutil
import signal
import sys
import time

import forkserver
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import original
from bert_tf.model.config import BertConfig

# A child: `python -c _CHILD <replacement> <version> <target>...` imports this module once, then forks a process per
# target: the k-th writes `version` of the replacement over the k-th target and SIGKILLs itself once k renames are
# done (0: before the first). Prints `STATUSES <json>`: each one's exit status as subprocess gives it (-9: killed).
_CHILD = """
import json, os, signal, sys, traceback
import test_atomic_replacement
name, version, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def write_killed_after(kill_after, target):
    renames, rename = 0, os.replace

    def replace(source, dest):
        nonlocal renames
        if renames < kill_after:
            rename(source, dest)
            renames += 1
        if renames == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace
    test_atomic_replacement.REPLACEMENTS[name].write(target, version)

pids = []
for kill_after, target in enumerate(targets):
    sys.stderr.flush()  # nothing buffered is written twice
    pid = os.fork()
    if pid == 0:
        try:
            write_killed_after(kill_after, target)
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
    pids.append(pid)
statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
print("STATUSES " + json.dumps(statuses))
"""


def _vocab_file(directory, version):
    """A vocab file of `version` (its own tokens) in `directory`; returns its path."""
    path = os.path.join(directory, f"vocab_{version}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"[PAD]\ntoken_{version}\n")
    return path


def write_export(export_dir, version):
    """Overwrites export_dir/1 as the export does (`fileio.staged_directory`, saved_model.pb last), with files of
    `version` (names and contents of its own) instead of a SavedModel."""
    with fileio.staged_directory(os.path.join(export_dir, "1"), key="saved_model.pb") as out:
        os.makedirs(os.path.join(out, "variables"))
        for name in ("saved_model.pb", f"variables/only_in_{version}", f"only_in_{version}/x"):
            os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
            with open(os.path.join(out, name), "w") as f:
                f.write(f"version {version}")


def _tensors(version):
    return {"bert/a": np.full((2, 3), version, np.float32), "bert/b": np.arange(4, dtype=np.float32) + version}


def write_release(output_dir, version):
    """`original.write_release` of tensors, config and vocab of `version`."""
    config = BertConfig(vocab_size=10 + version, hidden_size=4, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8)
    original.write_release(_tensors(version), config, output_dir, _vocab_file(os.path.dirname(output_dir), version))


def write_sharded_release(output_dir, version):
    """`write_release`, its checkpoint then rewritten in two shards (a tensor each, as a sharded TF1 Saver writes):
    a new one-shard checkpoint must not leave them behind."""
    write_release(output_dir, version)
    prefix = os.path.join(output_dir, "bert_model.ckpt")
    for name in (f"{prefix}.index", f"{prefix}.data-00000-of-00001"):
        os.remove(name)
    parts = [os.path.join(f"{prefix}_parts", f"part-{i}") for i in range(2)]
    for part, (name, value) in zip(parts, sorted(_tensors(version).items())):
        tf.raw_ops.SaveV2(prefix=part, tensor_names=[name], shape_and_slices=[""], tensors=[tf.constant(value)])
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=parts, destination_prefix=prefix)  # removes the parts
    assert sorted(f for f in os.listdir(output_dir) if ".data-" in f) == [
        "bert_model.ckpt.data-00000-of-00002", "bert_model.ckpt.data-00001-of-00002"]


Replacement = collections.namedtuple("Replacement", "write_old write key")  # key: relative to the target
REPLACEMENTS = {
    "export": Replacement(write_export, write_export, "1/saved_model.pb"),
    "release": Replacement(write_sharded_release, write_release, "bert_model.ckpt.index"),
}


def _tree(directory):
    """Every directory and file under `directory` by relative path (files -> their bytes, directories -> None), but
    for temporaries."""
    tree = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = [name for name in dirs if fileio.TEMP_MARK not in name]
        for name in dirs:
            tree[os.path.relpath(os.path.join(root, name), directory)] = None
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                tree[os.path.relpath(os.path.join(root, name), directory)] = f.read()
    return tree


def _target(parent):
    """A new target directory `parent/target` holding a file of the user's (which every replacement keeps)."""
    target = os.path.join(parent, "target")
    os.makedirs(target)
    with open(os.path.join(target, "notes.txt"), "w") as f:
        f.write("the user's own file")
    return target


def _count_renames(monkeypatch, write, target, version):
    """Runs `write(target, version)` here, counting its renames."""
    calls, rename = [], os.replace
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", lambda source, dest: calls.append(dest) or rename(source, dest))
        write(target, version)
    return len(calls)


def _kill_after_each_rename(name, targets, version, env):
    """Writes `version` of replacement `name` over each of `targets` in a child process of its own, the k-th killed
    after k renames (_CHILD: one Python start for all); returns their exit statuses and the stderr."""
    child = forkserver.run([sys.executable, "-c", _CHILD, name, str(version), *targets], env=env, capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0 and "STATUSES " in child.stdout, child.stderr[-3000:]
    return json.loads(child.stdout.split("STATUSES ", 1)[1]), child.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REPLACEMENTS))
def test_a_replacement_killed_after_any_rename_is_old_none_or_new(name, tmp_path, monkeypatch, child_env):
    replacement = REPLACEMENTS[name]
    pristine = _target(tmp_path / "old")
    replacement.write_old(pristine, 1)
    expected = {}
    for version in (2, 3):  # written into a fresh directory: nothing of version 1 left
        replacement.write(_target(tmp_path / f"fresh_{version}"), version)
        expected[version] = _tree(tmp_path / f"fresh_{version}" / "target")
    counted = shutil.copytree(pristine, tmp_path / "counted" / "target")
    renames = _count_renames(monkeypatch, replacement.write, str(counted), 2)
    assert _tree(counted) == expected[2] and renames >= 2
    targets = [str(shutil.copytree(pristine, tmp_path / f"killed_{k}" / "target")) for k in range(renames + 1)]
    env = child_env(PYTHONPATH=os.path.dirname(os.path.abspath(__file__)), TF_CPP_MIN_LOG_LEVEL="3",
                    TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    statuses, stderr = _kill_after_each_rename(name, targets, 2, env)
    old, outcomes, order = _tree(pristine), [], ["old", "none", "new"]
    for k, (target, status) in enumerate(zip(targets, statuses)):
        assert status == -signal.SIGKILL, f"the child was to be killed after {k} renames: {stderr[-2000:]}"
        tree = _tree(target)
        assert replacement.key not in tree or tree in (old, expected[2]), f"killed after {k} renames: a mix"
        outcomes.append("none" if replacement.key not in tree else "new" if tree == expected[2] else "old")
        replacement.write(target, 3)
        assert _tree(target) == expected[3], f"killed after {k} renames: the next replacement"
        left = [os.path.join(target, f) for f in os.listdir(target) if fileio.TEMP_MARK in f]
        long_ago = time.time() - fileio.STALE_AFTER_S - 60
        for path in left:  # the killed writer's staging directory: young, kept until it is stale
            for root, _, files in os.walk(path):
                for below in [root, *(os.path.join(root, f) for f in files)]:
                    os.utime(below, (long_ago, long_ago))
        assert fileio.remove_stale_temporaries(target) == sorted(left), f"killed after {k} renames"
    assert outcomes[-1] == "new" and "none" in outcomes and outcomes == sorted(outcomes, key=order.index), outcomes


def test_a_release_loads_its_new_tensors_after_a_replacement(tmp_path):
    target = _target(tmp_path)
    write_sharded_release(target, 1)
    write_release(target, 2)
    reader = tf.train.load_checkpoint(os.path.join(target, "bert_model.ckpt"))
    for tensor, value in _tensors(2).items():
        np.testing.assert_array_equal(reader.get_tensor(tensor), value)
    assert sorted(os.listdir(target)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                          "bert_model.ckpt.index", "checkpoint", "notes.txt", "vocab.txt"]


def test_a_write_that_fails_leaves_the_old_release(tmp_path):
    target = _target(tmp_path)
    write_release(target, 1)
    before = _tree(target)
    with pytest.raises(RuntimeError, match="writer failed"):
        with original.staged_checkpoint(os.path.join(target, "bert_model.ckpt")) as staged:
            with open(staged + ".index", "w") as f:
                f.write("half written")
            raise RuntimeError("writer failed")
    assert _tree(target) == before
