"""Batches cut to their longest text (the default) against the original's max_seq_length
(--pad_to_max_seq_length), script by script, dropout off: the same training (final weights within 1e-5), the same
evaluation results and prediction files. And under --use_xla the training step is traced once, its batches taking
at most max_seq_length / seq_length_multiple lengths."""
import os
import random

import numpy as np
import pytest
import script_steps
import tensorflow as tf
import test_ner
import test_swag
import tiny_classifier
from tiny_training import numbers_and_text

from bert_tf.data import lengths
from bert_tf.tasks import classifier, runner
from bert_tf.training import trainer as trainer_lib
from bert_tf.training import update

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
# L=1, H=16 without dropout: the masks of one layer are those of every layer
MODEL = dict(**tiny_classifier.L1_H16, **tiny_classifier.NO_DROPOUT)


def _classifier(data):
    rng = random.Random(4)
    for name, count in (("train", 24), ("dev", 9), ("test", 7)):
        rows = [tiny_classifier.tsv_line("text_a", "text_b", "label")]
        rows += [tiny_classifier.tsv_line(tiny_classifier.random_sentence(rng),
                                          tiny_classifier.random_sentence(rng) if rng.random() < 0.5 else "",
                                          rng.choice("xyz")) for _ in range(count)]
        tiny_classifier.write_lines(os.path.join(data, f"{name}.tsv"), rows)
    return ("run_classifier.py", tiny_classifier.VOCAB,
            ["--task_name=tsv", f"--data_dir={data}", "--do_eval", "--do_predict", "--num_train_epochs=1",
             "--predict_batch_size=3"],
            ["eval_results.txt", "test_results.tsv", "predictions.tsv"])


def _ner(data):
    for name in ("train.txt", "valid.txt", "test.txt"):
        tiny_classifier.write_lines(os.path.join(data, name), [test_ner.CONLL_SAMPLE])
    return ("run_ner.py", test_ner.VOCAB, [f"--data_dir={data}", "--do_eval", "--do_predict",
                                           "--num_train_epochs=3", "--predict_batch_size=3"],
            ["eval_results.txt", "eval_predictions.txt", "test_results.txt"])


def _swag(data):
    rows = test_swag.SWAG_HEADER + "".join(test_swag.SWAG_ROWS)
    for name in ("train.csv", "val.csv", "test.csv"):
        tiny_classifier.write_lines(os.path.join(data, name), [rows])
    return ("run_swag.py", test_swag.VOCAB, [f"--data_dir={data}", "--do_eval", "--do_predict",
                                             "--num_train_epochs=4", "--predict_batch_size=3"],
            ["eval_results.txt", "test_results.tsv"])


def _pretraining(data):
    records = os.path.join(data, "short.tfrecord")  # every sequence a short one: the batches' lengths vary
    vocab = open(f"{FIXTURES}/uncased_vocab.txt", encoding="utf-8").read().splitlines()
    return ("run_pretraining.py", vocab, [f"--input_file={records}", "--max_predictions_per_seq=4", "--do_eval",
                                          "--num_train_steps=6", "--num_warmup_steps=2", "--max_eval_steps=5"],
            ["eval_results.txt"], ("create_pretraining_data.py", [
                f"--input_file={FIXTURES}/sample_text.txt", f"--output_file={records}",
                f"--vocab_file={FIXTURES}/uncased_vocab.txt", "--max_seq_length=32", "--short_seq_prob=1",
                "--max_predictions_per_seq=4", "--dupe_factor=1"]))


def _variables(output_dir):
    reader = tf.train.load_checkpoint(output_dir)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith("input_iterators/")}


TASKS = {"classifier": _classifier, "ner": _ner, "swag": _swag, "pretraining": _pretraining}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, child_env):
    """Each task of TASKS trained, evaluated and predicted twice, padded then cut, every run in one process
    (tests/script_steps.py; the pretraining records made by create_pretraining_data.py first, in the same process).
    Returns {task: (its directory, holding padded/ and cut/; the output files to compare; the errors of its runs,
    those making its inputs first; the process's logs)}."""
    root = tmp_path_factory.mktemp("batch_lengths")
    steps, tasks = [], {}
    for name, task in TASKS.items():
        data = root / name / "data"
        data.mkdir(parents=True)
        script, vocab, task_flags, outputs, *inputs = task(str(data))
        flags = [*tiny_classifier.model_flags(root / name / "model", vocab, **MODEL), *task_flags, "--do_train",
                 "--train_batch_size=4", "--eval_batch_size=3", "--learning_rate=1e-3", "--seed=5",
                 "--max_seq_length=32"]
        first = len(steps)
        steps += [(os.path.join(REPO, "run_scripts", input_script), [argv]) for input_script, argv in inputs]
        steps.append((os.path.join(REPO, "run_scripts", script),
                      [[*flags, f"--output_dir={root / name / 'padded'}", "--pad_to_max_seq_length"],
                       [*flags, f"--output_dir={root / name / 'cut'}"]]))
        tasks[name] = (root / name, outputs, range(first, len(steps)))
    done, logs = script_steps.run(steps, str(root), child_env())
    return {name: (directory, outputs, [error for i in indices for error in done[i]["errors"]], logs)
            for name, (directory, outputs, indices) in tasks.items()}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(TASKS))
def test_cut_batches_train_and_predict_as_padded_ones(task, runs):
    directory, outputs, errors, logs = runs[task]
    assert errors[-2:] == [None, None] and not any(errors), logs[-3000:]  # its inputs' runs, padded, cut
    padded, cut = directory / "padded", directory / "cut"
    expected, got = _variables(str(padded)), _variables(str(cut))
    assert sorted(got) == sorted(expected)
    assert int(got["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) > 1
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=name)
    for name in outputs:
        (expected_numbers, expected_text), (got_numbers, got_text) = (numbers_and_text(d / name) for d in (padded, cut))
        assert got_text == expected_text, name
        np.testing.assert_allclose(got_numbers, expected_numbers, atol=1e-5, err_msg=name)


class _CountingTrainer(trainer_lib.Trainer):
    """A Trainer that records the examples of each batch it predicts."""
    rows = []

    def predict(self, dataset, with_loss=False):
        for outputs in super().predict(dataset, with_loss):
            type(self).rows.append(len(outputs["logits"]))
            yield outputs


@pytest.mark.slow
def test_under_xla_the_training_step_is_traced_once_over_a_few_lengths(tmp_path, monkeypatch):
    """--use_xla with seq_length_multiple 8 at max_seq_length 32: batches of texts of 4 to 21 tokens come in lengths
    8, 16 and 24 only (each compiles once in XLA), and the step is traced once, with an unknown length. Evaluation
    and prediction run on batches of one size per length (`lengths.budget_rows`)."""
    data = tmp_path / "data"
    _classifier(str(data))
    vocab_file, config_file = tiny_classifier.write_tiny_model(str(tmp_path / "model"), **MODEL)
    run = runner.RunConfig(bert_config_file=config_file, vocab_file=vocab_file, output_dir=str(tmp_path / "out"),
                           do_train=True, train_batch_size=4, num_train_epochs=2, max_seq_length=32, use_xla=True,
                           seq_length_multiple=8, seed=1, do_eval=True, do_predict=True, eval_batch_size=3)
    task = classifier.ClassifierTask("tsv", str(data))
    run, pretrained = runner.prepare(run, task)
    config, tokenizer = pretrained.config, pretrained.tokenizer
    task.read_inputs(run, config)
    traces, _CountingTrainer.rows, original = [], [], update.gradients

    def gradients(model, loss, optimizer, features, labels, totals):  # each trace of the gradient step
        traces.append(features["input_ids"].shape.as_list())
        return original(model, loss, optimizer, features, labels, totals)

    monkeypatch.setattr(update, "gradients", gradients)
    trainer = _CountingTrainer(lambda: task.build_model(config), task.loss, run.output_dir, use_xla=True)
    dataset_fn = task.train_data(run, tokenizer, trainer).dataset_fn
    seen = {int(f["input_ids"].shape[1]) for f, _ in dataset_fn(4).take(30)}
    assert seen and seen <= {8, 16, 24, 32} and len(seen) > 1, seen
    assert dataset_fn(4).element_spec[0]["input_ids"].shape.as_list() == [4, None]
    trainer.train(dataset_fn, 4, 12, 1, seed=1)
    assert traces == [[4, None]]
    assert trainer.step == 12
    assert run.sequence_lengths == lengths.SequenceLengths(multiple=8, compiled=True)
    assert np.isfinite(task.evaluate(run, tokenizer, trainer)[""]["eval_loss"])
    evaluated = _CountingTrainer.rows
    assert set(evaluated) <= {lengths.budget_rows(3, 32, n) for n in (8, 16, 24)}, evaluated
    _CountingTrainer.rows = []
    assert len(task.predict(run, tokenizer, trainer)[""]) == 7
    assert set(_CountingTrainer.rows) <= {lengths.budget_rows(8, 32, n) for n in (8, 16, 24)}, _CountingTrainer.rows
