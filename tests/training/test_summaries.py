"""TensorBoard summaries on gs:// cost uploads of the order of their size (bert_tf.training.summaries): a training run
of 200 one-update loops (as under several workers) in a child process, through TensorFlow's GCS client and the
emulator of tests/gcs_emulator.py, whose proxy records every request the child sends."""
import os
import sys
from urllib.parse import parse_qs, urlsplit

import forkserver
import pytest
import tensorflow as tf
from gcs_emulator import gcs_emulator_fixture  # noqa: F401 (the gcs_emulator fixture)

STEPS, EVERY = 200, 50
TRAIN = r"""
import sys
sys.path.insert(0, sys.argv[1])
import toy_task
from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer
trainer = Trainer(lambda: BertClassifier(toy_task.config(num_hidden_layers=1), 2), toy_task.loss_fn, sys.argv[2],
                  strategy=distribute.get_strategy("one_device"), iterations_per_loop=1,
                  save_checkpoints_steps=int(sys.argv[4]), keep_checkpoint_max=1)
trainer.train(toy_task.dataset_fn, 16, int(sys.argv[3]), 0)
"""


def _uploaded(requests, prefix):
    """The bytes that `requests` (the proxy's record) uploaded into objects whose names start with `prefix`: the
    bodies of the uploads (POST) and of the resumable uploads' PUTs (whose session URLs the emulator writes with the
    object's name)."""
    return sum(length for method, target, length in requests if method in ("POST", "PUT")
               and "/upload/" in target and parse_qs(urlsplit(target).query).get("name", [""])[0].startswith(prefix))


@pytest.mark.slow
def test_summaries_on_gcs_upload_each_event_once(gcs_emulator, child_env, tmp_path):
    """200 updates on gs://, a checkpoint every 50: the events files' uploads total at most 3 times their final
    size (measured: 1.005 times, 4 files; a writer flushed after each loop uploaded 100 times its size), and they
    hold the loss of every step once."""
    prefix = "summaries/train/events.out.tfevents."
    first = len(gcs_emulator.proxy.requests)
    result = forkserver.run([sys.executable, "-c", TRAIN, os.path.dirname(__file__), f"{gcs_emulator.url}/summaries",
                             str(STEPS), str(EVERY)], capture_output=True, text=True, timeout=300,
                            env=child_env(**gcs_emulator.env))
    assert result.returncode == 0, result.stderr[-3000:]
    names = [name for name in gcs_emulator.object_names() if name.startswith(prefix)]
    steps = []
    for i, name in enumerate(names):
        (tmp_path / str(i)).write_bytes(gcs_emulator.download(name))
        steps += [event.step for event in tf.compat.v1.train.summary_iterator(str(tmp_path / str(i)))
                  for value in event.summary.value if value.tag == "loss"]
    assert sorted(steps) == list(range(1, STEPS + 1))
    size = sum(os.path.getsize(tmp_path / str(i)) for i in range(len(names)))
    uploaded = _uploaded(gcs_emulator.proxy.requests[first:], prefix)
    assert size <= uploaded <= 3 * size, (uploaded, size, names)
