"""trainer.shared_checkpoint: the checkpoint each worker of a multi-worker run resumes, from the step of every
worker's latest (the workers exchange them when a run starts; tests/training/test_preemption.py runs it across two
worker processes). Checkpoints stand in as their index files: the choice looks at which steps a directory holds."""
import logging

import pytest

from bert_tf.training import trainer


@pytest.fixture
def shared_checkpoint(tmp_path):
    """trainer.shared_checkpoint for a worker whose directory holds ckpt-10 and ckpt-20 (its latest), keeping 2."""
    for step in (10, 20):
        (tmp_path / f"ckpt-{step}.index").touch()
    return lambda latest, steps, worker_index, every: trainer.shared_checkpoint(
        str(tmp_path), latest, steps, worker_index, every, keep_checkpoint_max=2)


def test_workers_at_the_same_step_resume_their_latest(shared_checkpoint, tmp_path):
    latest = str(tmp_path / "ckpt-20")
    assert shared_checkpoint(latest, {0: 20, 1: 20}, 0, 10) == latest
    assert shared_checkpoint(None, {0: 0, 1: 0}, 1, 10) is None


def test_a_worker_ahead_resumes_the_latest_step_every_worker_has(shared_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="absl")
    assert shared_checkpoint(str(tmp_path / "ckpt-20"), {0: 20, 1: 10, 2: 20}, 0, 10) == str(tmp_path / "ckpt-10")
    assert f"Worker 0 resumes from {tmp_path}/ckpt-10: worker(s) 1 have no checkpoint after step 10" in caplog.text


def test_a_worker_killed_before_its_first_checkpoint_makes_the_run_start_afresh(shared_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="absl")
    assert shared_checkpoint(str(tmp_path / "ckpt-20"), {0: 0, 1: 20}, 1, 20) is None
    assert "Worker 1 starts the run afresh: worker(s) 0 have no checkpoint" in caplog.text


def test_checkpoints_more_than_one_apart_are_missing_ones(shared_checkpoint, tmp_path):
    """A worker whose checkpoints are not there (a new host's empty disk) does not take the run back to the start."""
    with pytest.raises(ValueError, match=r"The latest checkpoint of worker\(s\) 0 is of step 0 \(0: none\), another "
                                         r"worker's of step 20: more than one checkpoint apart "
                                         r"\(--save_checkpoints_steps=10\).*rerun every worker with --start_over"):
        shared_checkpoint(str(tmp_path / "ckpt-20"), {0: 0, 1: 20}, 1, 10)


def test_a_step_this_worker_no_longer_keeps_is_an_error(shared_checkpoint, tmp_path):
    (tmp_path / "ckpt-10.index").unlink()
    with pytest.raises(ValueError, match=r"Worker 0 cannot resume step 10, the latest that worker\(s\) 1 have a "
                                         r"checkpoint of: .* no longer holds ckpt-10 .*--keep_checkpoint_max=2\)\. "
                                         r"Rerun every worker with --start_over"):
        shared_checkpoint(str(tmp_path / "ckpt-20"), {0: 20, 1: 10}, 0, 10)
