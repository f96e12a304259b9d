"""Kill and rerun: each training script (fine-tuning and run_pretraining.py), SIGKILLed during --do_train after its
first checkpoint and rerun with the same flags in another process, ends with exactly the checkpoint of the
uninterrupted run (weights, optimizer slots, input position, dropout random state, global step), and the same
evaluations while training (--eval_every_steps, --best_metric: eval_history.jsonl and best/). Dropout is on: the
checkpoint holds its random state, so the comparison is bit for bit. The batches are cut to their longest text (the
default), or grouped by length (--group_by_length). The tiny data sets are the tasks' own test data (tests/tasks)
and, for pretraining, tiny_pretraining's records of varying lengths."""
import json
import os
import random
import sys

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import tiny_classifier
import tiny_pretraining

from bert_tf import fileio

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks"))
import test_ner  # noqa: E402
import test_squad  # noqa: E402
import test_swag  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_STEPS = 12  # every script: 12 steps, a checkpoint every 4
COMMON = ["--do_train", "--train_batch_size=2", "--save_checkpoints_steps=4", "--learning_rate=1e-3", "--seed=3",
          "--max_seq_length=16"]


def evaluating(metric):
    """Evaluation at each checkpoint, the best by `metric` kept: the kill lands before, during or after the first."""
    return ["--eval_every_steps=4", f"--best_metric={metric}"]


def _mrpc_grouped(data):
    """The classifier with --group_by_length: its buckets are part of the input position (the batches cut to their
    longest text: the other scripts')."""
    tiny_classifier.write_mrpc(data, random.Random(0), train=8)
    return "run_classifier.py", tiny_classifier.VOCAB, ["--task_name=MRPC", f"--data_dir={data}",
                                                        "--num_train_epochs=3",  # 8 examples / 2 x 3
                                                        "--group_by_length", "--seq_length_multiple=4"]


def _squad(data):
    doc = test_squad.DOC
    qas = [{"id": f"q{i}", "question": question, "answers": [{"text": answer, "answer_start": doc.index(answer)}]}
           for i, (question, answer) in enumerate([("what did he buy ?", "milk"), ("who went ?", "the man"),
                                                   ("where ?", "store"), ("what ?", "gallon")])]
    (data / "train.json").write_text(json.dumps(
        {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": doc, "qas": qas}]}]}))
    return "run_squad.py", test_squad.VOCAB, [f"--train_file={data / 'train.json'}", "--doc_stride=4",
                                              "--max_query_length=6", "--num_train_epochs=6",  # 4 / 2 x 6
                                              "--do_predict", f"--predict_file={data / 'train.json'}",
                                              *evaluating("f1")]


def _ner(data):
    for split in ("train", "dev"):
        (data / f"{split}.txt").write_text(test_ner.CONLL_SAMPLE)  # 8 windows of 16 tokens
    return "run_ner.py", test_ner.VOCAB, [f"--data_dir={data}", "--num_train_epochs=3",  # 8 / 2 x 3
                                          "--do_eval", *evaluating("eval_f1")]


def _swag(data):
    for split in ("train", "val"):
        (data / f"{split}.csv").write_text(test_swag.SWAG_HEADER + "".join(test_swag.SWAG_ROWS))
    return "run_swag.py", test_swag.VOCAB, [f"--data_dir={data}", "--num_train_epochs=8",  # 3 / 2 x 8
                                            "--do_eval", *evaluating("eval_loss")]


def _pretraining(data):
    vocab = tiny_classifier.VOCAB
    files = tiny_pretraining.write_varying_records(str(data), per_file=8, seq_length=16, predictions=3,
                                                   id_range=(5, len(vocab)))
    return "run_pretraining.py", vocab, [f"--input_file={','.join(files)}", "--max_predictions_per_seq=3",
                                         f"--num_train_steps={NUM_STEPS}", "--num_warmup_steps=4", "--do_eval",
                                         f"--eval_input_file={files[0]}", "--max_eval_steps=2",
                                         *evaluating("masked_lm_accuracy")]


def _command(script, flags, output_dir):
    return [sys.executable, os.path.join(REPO, "run_scripts", script), *flags, f"--output_dir={output_dir}"]


def _latest_step(output_dir):
    latest = tf.train.latest_checkpoint(str(output_dir))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def checkpoint_variables(output_dir):
    """The checkpoint's tensors by name, except the input iterators' states (variant tensors NumPy cannot read;
    the rest of the run depends on them, so equal weights at the end prove they resumed right)."""
    reader = tf.train.load_checkpoint(str(output_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith("input_iterators/")}


@pytest.mark.parametrize("task", [_mrpc_grouped, _squad, _ner, _swag, _pretraining],
                         ids=["classifier_grouped", "squad", "ner", "swag", "pretraining"])
def test_a_killed_run_rerun_ends_as_the_uninterrupted_run(task, tmp_path, run_main):
    """The killed run in a process of its own; the rerun, then the uninterrupted run, in another (`run_main`: the
    rerun first, in a fresh process, as a user's)."""
    data = tmp_path / "data"
    data.mkdir()
    script, vocab, task_flags = task(data)
    flags = COMMON + tiny_classifier.model_flags(tmp_path, vocab, **tiny_classifier.L1_H16) + task_flags
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    pid = forkserver.kill_once_exists(_command(script, flags, killed), os.path.join(killed, "checkpoint"),
                                      tmp_path / "killed.log", cwd=REPO)
    step = _latest_step(killed)
    assert 0 < step < NUM_STEPS, f"killed at step {step}: not mid-run"
    errors, logs = run_main(os.path.join(REPO, "run_scripts", script), [*flags, f"--output_dir={killed}"],
                            [*flags, f"--output_dir={straight}"], with_logs=True)
    assert errors == [None, None], (errors, logs[-3000:])
    assert f"Resuming from {killed}/ckpt-{step} at step {step}" in logs
    expected, got = checkpoint_variables(straight), checkpoint_variables(killed)
    assert int(got["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == NUM_STEPS
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    if task is not _mrpc_grouped:  # the others evaluate while training: the same history and best weights
        history = (straight / "eval_history.jsonl").read_text()
        assert [json.loads(line)["global_step"] for line in history.splitlines()] == [4, 8, 12]
        assert (killed / "eval_history.jsonl").read_text() == history
        expected, got = checkpoint_variables(straight / "best"), checkpoint_variables(killed / "best")
        assert sorted(got) == sorted(expected)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    # The killed run's own temporaries (say, a file an evaluation was writing) wait 24 h (fileio's rule 3).
    assert not [f for f in os.listdir(killed) if (fileio.TEMP_MARK in f and f"-{pid}-" not in f)
                or f.endswith("_temp")]
