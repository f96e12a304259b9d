"""run_pretraining.py (bert_tf/tasks/pretraining.py): the original's loss and streaming eval metrics against NumPy,
continued pretraining from an original checkpoint with its cls/ heads and back to the original names, the "No NSP"
ablation, phase 2, dynamic masking, and every bad input the issue names (a corrupt record past a file's first
included)."""
import collections
import json
import os
import re
import types

import numpy as np
import numpy_bert
import pytest
import tensorflow as tf
import tiny_classifier

from bert_tf import checkpoints, resources
from bert_tf.data.pretraining import dataset, instances
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import pretraining
from bert_tf.training import losses

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "run_scripts", "run_pretraining.py")
SEQ, PREDS = 128, 20  # the golden records' flags (tests/fixtures/README.md)
Runs = collections.namedtuple("Runs", "out phase_errors bad_inputs")  # the `runs` fixture
EVAL_KEYS = ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
             "next_sentence_loss"]


@pytest.fixture(scope="module")
def release(tmp_path_factory, data_dir):
    """A tiny original-format release (random NumPy weights under the original names, with the cls/ heads) whose
    vocabulary is the golden records' (bert-base-uncased), and the run flags naming it and the golden records."""
    path = tmp_path_factory.mktemp("release")
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=SEQ, type_vocab_size=2)
    weights = numpy_bert.random_weights(config, seed=4, heads=True)
    numpy_bert.write_tf1_checkpoint(weights, str(path / "bert_model.ckpt"))
    config.to_json_file(str(path / "bert_config.json"))
    flags = [f"--input_file={data_dir}/pretraining_sample_text_seed12345.tfrecord",
             f"--bert_config_file={path}/bert_config.json", f"--init_checkpoint={path}/bert_model.ckpt",
             f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}", "--eval_batch_size=8"]
    return path, config, weights, flags


def _records(data_dir, count):
    path = os.path.join(data_dir, "pretraining_sample_text_seed12345.tfrecord")
    decode = dataset.decoder(SEQ, PREDS)
    parsed = [decode(r) for r in tf.data.TFRecordDataset(path).take(count)]
    return {name: np.stack([p[name].numpy() for p in parsed]) for name in parsed[0]}


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _numpy_batch(weights, config, r):
    """NumPy, float64: per-prediction and per-example (nll, correct) of the masked LM and next sentence heads."""
    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    out = numpy_bert.forward(w64, config, r["input_ids"], r["input_mask"], r["segment_ids"])
    mlm = _log_softmax(numpy_bert.masked_lm_logits(w64, config, out["sequence_output"], r["masked_lm_positions"]))
    nsp = _log_softmax(out["pooled_output"] @ w64["cls/seq_relationship/output_weights"].T
                       + w64["cls/seq_relationship/output_bias"])
    ids, labels = r["masked_lm_ids"], r["next_sentence_labels"][:, 0]
    return (-np.take_along_axis(mlm, ids[..., None], -1)[..., 0], (mlm.argmax(-1) == ids).astype(float),
            -nsp[np.arange(len(labels)), labels], (nsp.argmax(-1) == labels).astype(float))


def test_the_loss_terms_are_the_originals(release, data_dir):
    """One batch through BertPretrainer and PretrainingLoss: masked-LM sum(w*nll)/(sum(w)+1e-5), NSP mean, total
    their sum, the accuracies, all against NumPy."""
    path, config, weights, _ = release
    model = task_models.BertPretrainer(config)
    checkpoints.restore(model, str(path / "bert_model.ckpt"), required_heads=("masked_lm", "next_sentence"))
    r = _records(data_dir, 6)
    features, labels = dataset.split({k: tf.constant(v) for k, v in r.items()})
    loss = pretraining.PretrainingLoss()
    got = losses.shares(loss, labels, model(features), losses.sums(loss, loss.weights(labels)))
    nll, correct, nsp_nll, nsp_correct = _numpy_batch(weights, config, r)
    w = r["masked_lm_weights"].astype(np.float64)
    expected = {"masked_lm_loss": (w * nll).sum() / (w.sum() + 1e-5), "masked_lm_accuracy": (w * correct).sum()
                / w.sum(), "next_sentence_loss": nsp_nll.mean(), "next_sentence_accuracy": nsp_correct.mean()}
    expected["loss"] = expected["masked_lm_loss"] + expected["next_sentence_loss"]
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert float(got[name]) == pytest.approx(value, rel=2e-5), name
    assert 0 < w.sum() < w.size  # the batch has padded predictions, which the weights leave out


def _phase_runs(release, out, vocab_file, data_dir):
    """Phase 1 at seq 64 (records made from sample_text.txt as create_pretraining_data.py makes them), then phase 2
    at seq 128 from phase 1's output_dir, without NSP (--next_sentence=false) and exported as a SavedModel."""
    path, _, _, flags = release
    short = str(out / "seq64.tfrecord")
    instances.run_exact(f"{data_dir}/sample_text.txt", short, vocab_file, max_seq_length=64,
                        max_predictions_per_seq=10, dupe_factor=1)
    common = [f"--bert_config_file={path}/bert_config.json", "--do_train", "--train_batch_size=4",
              "--num_warmup_steps=0", "--seed=2"]
    phase1 = common + [f"--input_file={short}", f"--init_checkpoint={path}/bert_model.ckpt", "--max_seq_length=64",
                       "--max_predictions_per_seq=10", "--num_train_steps=4", f"--output_dir={out / 'p1'}"]
    phase2 = common + [flags[0], f"--init_checkpoint={out / 'p1'}", f"--max_seq_length={SEQ}",
                       f"--max_predictions_per_seq={PREDS}", "--num_train_steps=3", "--do_eval",
                       f"--output_dir={out / 'p2'}", "--next_sentence=false", f"--export_dir={out / 'p2_export'}",
                       f"--vocab_file={vocab_file}"]
    return [phase1, phase2]


BAD_INPUTS = [
    ("--max_seq_length=64", r"feature 'input_ids' is a int64 feature of length 128; expected a int64 feature of "
                            r"shape \[64\]"),
    ("--max_predictions_per_seq=10", r"feature 'masked_lm_positions' is a int64 feature of length 20; expected a "
                                     r"int64 feature of shape \[10\]"),
    ("--input_file=/nonexistent/*.tfrecord", r"/nonexistent/\*\.tfrecord"),
]


def _bad_input_runs(release, runs_dir):
    """The runs of `test_bad_input_is_an_error_naming_it`, after `_phase_runs` (they resume and start over its phase
    1 with another config), their inputs written under runs_dir/bad_inputs: [(argv, the error it must raise as a
    regular expression, or None for a run that succeeds)]."""
    path, config, _, flags = release
    out = runs_dir / "bad_inputs"
    out.mkdir()
    (out / "small.json").write_text(json.dumps({**config.to_dict(), "vocab_size": 1000}))
    (out / "wide.json").write_text(json.dumps({**config.to_dict(), "hidden_size": 32}))
    (out / "deep.json").write_text(json.dumps({**config.to_dict(), "num_hidden_layers": 2}))
    with tf.io.TFRecordWriter(str(out / "classifier.tfrecord")) as writer:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * SEQ))})).SerializeToString())
    output = f"--output_dir={out / 'out'}"
    runs = [([flags[0], *(f for f in flags[1:] if not f.startswith(bad.split("=")[0])), bad, "--do_eval", output],
             match) for bad, match in BAD_INPUTS]
    runs.append((flags + [f"--input_file={out / 'classifier.tfrecord'}", "--do_eval", output],
                 r"classifier.tfrecord, first record: no feature 'input_mask'"))
    runs.append((flags + [f"--bert_config_file={out / 'small.json'}", "--do_eval", output],
                 r"pretraining_sample_text_seed12345.tfrecord, first record: input_ids holds id \d+, but the "
                 r"model's vocab_size is 1000"))
    runs.append((flags + [f"--bert_config_file={out / 'wide.json'}", "--do_eval", output], r"hidden_size"))
    runs.append((flags + [f"--bert_config_file={out / 'deep.json'}", "--do_eval", output], r"bert/encoder/layer_1"))
    train = ["--do_train", "--num_train_steps=4", "--num_warmup_steps=0", "--train_batch_size=4",
             "--save_checkpoints_steps=2", "--iterations_per_loop=1"]
    phase1, deep = f"--output_dir={runs_dir / 'p1'}", f"--bert_config_file={out / 'deep.json'}"
    runs.append((flags + train + [deep, phase1],  # phase 1's run resumed with another config
                 r"holds checkpoints of a run with another bert_config \(num_hidden_layers 1 -> 2\).*--start_over"))
    # --start_over runs (deleting phase 1's checkpoints) into a loss that overflows
    runs.append((flags + train + [deep, "--start_over", "--init_checkpoint=", "--learning_rate=1e30",
                                  "--save_checkpoints_steps=1", phase1],
                 r"FloatingPointError: The loss is (nan|inf) at step (\d+): stopped without saving. The last good "
                 r"checkpoint: .*p1/ckpt-\d"))
    # 8 updates of 4 and the shuffle buffer (100) read more than either file's 60 records: both files are read
    corrupt = _corrupt_copy(flags[0].split("=", 1)[1], str(out / "corrupt.tfrecord"), record=1)
    runs.append((flags + train + [f"{flags[0]},{corrupt}", "--num_train_steps=8", f"--output_dir={out / 'corrupt'}"],
                 r"ValueError: .*corrupt\.tfrecord: a corrupt record after its first 1 record\(s\) \(corrupted "
                 r"record at \d+\): the file is damaged; replace it"))
    return runs


def _corrupt_copy(source, target, record):
    """A copy of the TFRecord file `source` at `target` whose record number `record` fails its checksum (a byte of
    its data flipped); the records before it are intact."""
    data = bytearray(open(source, "rb").read())
    offset = 0
    for _ in range(record):  # each record: its length (8 bytes), their CRC (4), the data, its CRC (4)
        offset += 16 + int.from_bytes(data[offset:offset + 8], "little")
    data[offset + 12 + 5] ^= 0xFF
    with open(target, "wb") as f:
        f.write(data)
    return target


@pytest.fixture(scope="module")
def runs(release, run_main, tmp_path_factory, uncased_vocab_file, data_dir, minilm_with_heads):
    """Every run_pretraining.py run of the tests below, in one process (TensorFlow imported once): eval of the
    original checkpoint; continued pretraining + eval + the original format; the real MiniLM's demo
    (`_minilm_demo_runs`); phase 1 and 2, the latter without NSP (`_phase_runs`); the bad inputs
    (`_bad_input_runs`). Returns Runs: the output directory, the phase runs' errors and each bad input's (error,
    expected match)."""
    path, _, _, flags = release
    out = tmp_path_factory.mktemp("runs")
    train = ["--do_train", "--num_train_steps=12", "--num_warmup_steps=2", "--learning_rate=3e-2",
             "--train_batch_size=8", "--save_checkpoints_steps=6", "--iterations_per_loop=3", "--seed=1"]
    continued = [flags + ["--do_eval", f"--output_dir={out / 'before'}"],
                 flags + train + ["--do_eval", "--save_original_checkpoint", f"--output_dir={out / 'after'}"],
                 *_minilm_demo_runs(minilm_with_heads, out, data_dir)]
    phases = _phase_runs(release, out, uncased_vocab_file, data_dir)
    bad_inputs = _bad_input_runs(release, out)
    errors = run_main(SCRIPT, *continued, *phases, *(argv for argv, _ in bad_inputs))
    n, m = len(continued), len(continued) + len(phases)
    assert errors[:n] == [None] * n, errors
    return Runs(out, errors[n:m], list(zip(errors[m:], (match for _, match in bad_inputs))))


def test_eval_is_the_originals_streaming_metrics(runs, release, data_dir):
    """--do_eval alone evaluates init_checkpoint: eval_results.txt holds the original's keys, sorted, with the
    original's streaming metrics over the batches read in file order. max_eval_steps (100) is more than the data
    holds (60 records: 7 full batches of 8), so the 56 records of those batches are evaluated."""
    path, config, weights, _ = release
    results = tiny_classifier.eval_results(runs.out / "before", float)
    keys = list(results)
    assert keys == EVAL_KEYS
    r = _records(data_dir, 56)
    nll, correct, nsp_nll, nsp_correct = _numpy_batch(weights, config, r)
    w = r["masked_lm_weights"].astype(np.float64)
    batch = lambda x: x.reshape(7, 8, *x.shape[1:])  # noqa: E731
    batch_losses = ((batch(w * nll).sum((1, 2)) / (batch(w).sum((1, 2)) + 1e-5)) + batch(nsp_nll).mean(1))
    expected = {"global_step": 0, "loss": batch_losses.mean(), "masked_lm_loss": (w * nll).sum() / w.sum(),
                "masked_lm_accuracy": (w * correct).sum() / w.sum(), "next_sentence_loss": nsp_nll.mean(),
                "next_sentence_accuracy": nsp_correct.mean()}
    for key, value in expected.items():
        assert results[key] == pytest.approx(value, rel=2e-5, abs=1e-7), key


def test_continued_pretraining_learns_and_writes_the_original_names(runs, release):
    """From an original checkpoint with its cls/ heads: the eval loss falls and the masked-LM accuracy rises; the
    summaries hold the training figures; --save_original_checkpoint writes every variable under the original
    names and shapes, equal to our final checkpoint, and the original checkpoint loads back."""
    path, config, weights, _ = release
    before = tiny_classifier.eval_results(runs.out / "before", float)
    after = tiny_classifier.eval_results(runs.out / "after", float)
    keys = list(after)
    assert keys == EVAL_KEYS and after["global_step"] == 12
    assert after["loss"] < before["loss"] - 0.5 and after["masked_lm_accuracy"] > before["masked_lm_accuracy"]
    events = tf.io.gfile.glob(str(runs.out / "after" / "train" / "events.out.tfevents*"))
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(events[0]) for v in e.summary.value}
    assert {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy",
            "learning_rate", "gradient_norm", "examples_per_second"} <= tags
    original = dict(tf.train.list_variables(str(runs.out / "after" / "original" / "bert_model.ckpt")))
    assert original == {name: list(value.shape) for name, value in weights.items()
                        if name.startswith(("bert/", "cls/predictions", "cls/seq_relationship"))}
    ours = task_models.BertPretrainer(config)
    checkpoints.restore(ours, str(runs.out / "after"), required_heads=("masked_lm", "next_sentence"))
    reread = task_models.BertPretrainer(config)
    checkpoints.restore(reread, str(runs.out / "after" / "original"), required_heads=("masked_lm", "next_sentence"))
    for a, b in zip(ours.weights, reread.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    start = task_models.BertPretrainer(config)
    checkpoints.restore(start, str(path / "bert_model.ckpt"))
    assert max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(start.weights, ours.weights)) > 1e-3


def test_no_next_sentence(runs):
    """--next_sentence=false (phase 2, from phase 1's checkpoint with the NSP head): eval_results.txt without the NSP
    metrics; no cls/seq_relationship in the checkpoint; --export_dir exports the masked_lm SavedModel."""
    results = tiny_classifier.eval_results(runs.out / "p2", float)
    keys = list(results)
    assert keys == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    assert results["loss"] == pytest.approx(results["masked_lm_loss"], rel=1e-2)  # per-batch vs pooled mean
    names = [name for name, _ in tf.train.list_variables(str(runs.out / "p2" / "ckpt-3"))]
    assert any(name.startswith("masked_lm/") for name in names)
    assert not any("next_sentence" in name or "seq_relationship" in name for name in names)
    served = tf.saved_model.load(str(runs.out / "p2_export" / "3"))
    outputs = served.signatures["serving_default"].structured_outputs
    assert sorted(outputs) == ["masked_lm_logits", "pooled_output", "sequence_output"]


def test_phase_two_continues_at_a_longer_length(runs):
    """Phase 1 at seq 64, then phase 2 at seq 128 from phase 1's output_dir: the weights come from phase 1, the
    step count, optimizer and schedule start afresh."""
    assert runs.phase_errors == [None, None]
    assert tiny_classifier.eval_results(runs.out / "p2", float)["global_step"] == 3
    state = tf.train.load_checkpoint(str(runs.out / "p2" / "ckpt-3"))
    assert int(state.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 3


def test_dynamic_masking_masks_each_epoch_afresh(release, uncased_vocab_file, tmp_path):
    """--dynamic_masking: the training batches carry other masks than the records, over the same text."""
    task = pretraining.PretrainingTask(input_file=release[3][0].split("=", 1)[1], dynamic_masking=True,
                                       num_train_steps=1)
    from bert_tf.tasks import runner
    run = runner.RunConfig(bert_config_file=release[3][1].split("=", 1)[1], vocab_file=uncased_vocab_file,
                           output_dir=str(tmp_path), do_train=True, max_seq_length=SEQ)
    task.read_inputs(run, release[1])
    plain = pretraining.PretrainingTask(input_file=task.input_file, num_train_steps=1)
    plain.read_inputs(run, release[1])
    position = types.SimpleNamespace(worker_index=0, num_workers=1)  # what the task reads of its Trainer
    (masked, masked_labels), (records, record_labels) = (
        next(iter(t.train_data(run, None, position).dataset_fn(8, None, 5))) for t in (task, plain))
    assert not np.array_equal(masked["masked_lm_positions"], records["masked_lm_positions"])
    np.testing.assert_array_equal(masked["input_mask"], records["input_mask"])  # the same records, in order


def test_a_run_without_a_mode_is_the_originals_error(tmp_path):
    from bert_tf.tasks import runner

    with pytest.raises(ValueError, match=r"^At least one of `do_train` or `do_eval` must be True\.$"):
        runner.prepare(runner.RunConfig(output_dir=str(tmp_path)), pretraining.PretrainingTask("x"))


def test_bad_input_is_an_error_naming_it(runs):
    for error, match in runs.bad_inputs:
        if match is None:
            assert error is None
        else:
            assert error is not None and re.search(match, error), (match, error)


@pytest.fixture(scope="module")
def minilm_with_heads(tmp_path_factory):
    """The real MiniLM release plus seeded pretraining heads under the original names, as a released checkpoint
    has them (MiniLM ships none): convert_checkpoint.py --pretraining_heads (a near-identity transform, so that the
    masked LM starts from the embeddings)."""
    return checkpoints.convert_hf_to_original(resources.minilm_dir(), str(tmp_path_factory.mktemp("minilm_heads")),
                                              pretraining_heads_seed=18)


def _minilm_demo_runs(release, out, data_dir):
    """The original README's demo in spirit, scaled down, on `release`: eval on 2 batches of 8 of sample_text's
    records into out/minilm_before; 3 steps (batch 4, the README's lr 2e-5, warmup 1), then the same eval, into
    out/minilm_after."""
    flags = [f"--input_file={data_dir}/pretraining_sample_text_seed12345.tfrecord",
             f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={release}/bert_model.ckpt",
             "--max_seq_length=128", "--max_predictions_per_seq=20", "--do_eval", "--max_eval_steps=2", "--seed=1"]
    train = ["--do_train", "--train_batch_size=4", "--num_train_steps=3", "--num_warmup_steps=1",
             "--learning_rate=2e-5"]
    return [flags + [f"--output_dir={out / 'minilm_before'}"], flags + train + [f"--output_dir={out / 'minilm_after'}"]]


@pytest.mark.slow
def test_the_original_readme_demo_on_the_real_minilm(runs):
    """The original README's demo in spirit, scaled down (`_minilm_demo_runs`): from a pretrained checkpoint the
    loss falls and the masked-LM accuracy rises."""
    before, after = (tiny_classifier.eval_results(runs.out / name, float) for name in ("minilm_before", "minilm_after"))
    assert after["global_step"] == 3
    assert after["loss"] < before["loss"] and after["masked_lm_loss"] < before["masked_lm_loss"]
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"], (before, after)
