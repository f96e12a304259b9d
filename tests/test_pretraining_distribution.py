"""run_pretraining.py split across devices: MirroredStrategy on two logical CPU devices (--num_cpu_devices=2) with
gradient accumulation trains the one-device run's numbers for the same global batch; and
--use_tpu / --distribution_strategy=tpu on a machine without a TPU stop at once with an error naming the flags.

The runs read the golden records of the original create_pretraining_data.py with a dropout-free tiny BERT
(tests/tiny_pretraining.py) in one order (--seed), so that they differ only in how each batch of 8 is split:
2 replicas x 2 micro-batches of 2 (replicas alone: the two workers of tests/training/test_multi_worker.py;
micro-batches alone: the toy task of tests/training/test_trainer.py). The masked-LM loss is the batch-level ratio
sum(w * nll) / (sum(w) + 1e-5), which splitting a batch changes unless the weights are summed over the whole
update first (bert_tf.training.losses), and the learning rate is large enough that clipping to global norm 1.0
acts on every update (the gradients are summed over replicas and micro-batches before they are clipped).
"""
import os

import pytest
import tiny_pretraining
from tiny_training import checkpoint_floats, max_diff, summaries

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "run_scripts", "run_pretraining.py")
STEPS = 3
pytestmark = pytest.mark.slow  # one script process training two runs
MIRRORED = ["--distribution_strategy=mirrored", "--num_cpu_devices=2"]
# name -> flags; the mirrored run first: the CPU is split before the process's first TensorFlow op.
SPLITS = {"mirrored_accumulation": [*MIRRORED, "--gradient_accumulation_steps=2"],
          "one_device": ["--distribution_strategy=one_device"]}
STRATEGIES = {"mirrored_accumulation": "MirroredStrategy with 2", "one_device": "OneDeviceStrategy with 1"}
# Runs that must fail. --tpu_name=local: the TPU of a TPU VM, which this machine is not.
FAILING = {"indivisible": [*MIRRORED, "--gradient_accumulation_steps=3"],
           "no_name": ["--use_tpu"], "refused": ["--distribution_strategy=tpu", "--master=grpc://127.0.0.1:1"],
           "local": ["--use_tpu", "--tpu_name=local"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, run_main):
    """Runs the script in one process: the splits (trained), then the failing runs.

    Returns (output_dir of each split, error of each run by name, the process's logs)."""
    d = tmp_path_factory.mktemp("pretraining")
    config_file = str(d / "bert_config.json")
    tiny_pretraining.config().to_json_file(config_file)
    common = [f"--input_file={tiny_pretraining.RECORDS}", f"--bert_config_file={config_file}",
              f"--max_seq_length={tiny_pretraining.SEQ_LENGTH}",
              f"--max_predictions_per_seq={tiny_pretraining.PREDICTIONS}", "--do_train", "--train_batch_size=8",
              f"--num_train_steps={STEPS}", "--num_warmup_steps=0", "--learning_rate=1e-2", "--seed=1",
              "--iterations_per_loop=1", "--num_gpus=0"]
    names = [*SPLITS, *FAILING]
    argvs = [[*common, f"--output_dir={d / name}", *{**SPLITS, **FAILING}[name]] for name in names]
    errors, logs = run_main(SCRIPT, *argvs, with_logs=True)
    return {name: d / name for name in SPLITS}, dict(zip(names, errors)), logs


def test_the_splits_ran_as_asked(runs):
    """The strategies the splits ran under; --gradient_accumulation_steps reaches the Trainer with the replicas
    (a batch of 8 does not split into 2 replicas x 3 micro-batches)."""
    dirs, errors, logs = runs
    assert [errors[name] for name in SPLITS] == [None] * len(SPLITS)
    distributions = [line.split("Distribution: ", 1)[1] for line in logs.splitlines() if "Distribution: " in line]
    assert distributions == [f"{STRATEGIES[name]} replica(s)" for name in SPLITS] + ["MirroredStrategy with 2 "
                                                                                     "replica(s)"]
    assert errors["indivisible"] == ("ValueError: train_batch_size 8 is not divisible by replicas (2) x "
                                     "gradient_accumulation_steps (3).")
    for name in SPLITS:
        assert os.path.exists(f"{dirs[name]}/ckpt-{STEPS}.index")


def test_every_split_trains_the_one_device_numbers(runs):
    """Per update: the loss, its terms and metrics, the gradient norm (before clipping) as TensorBoard has them;
    at the end: every weight and Adam moment of the checkpoint (measured: at most 4e-6 apart)."""
    dirs = runs[0]
    reference, _ = summaries(dirs["one_device"])
    weights = checkpoint_floats(dirs["one_device"])
    for name in SPLITS:
        figures, _ = summaries(dirs[name])
        for tag in tiny_pretraining.FIGURES:
            assert sorted(figures[tag]) == list(range(1, STEPS + 1)), (name, tag)
            for step, value in reference[tag].items():
                assert figures[tag][step] == pytest.approx(value, abs=1e-5), (name, tag, step)
        assert max_diff(checkpoint_floats(dirs[name]), weights) <= 1e-5, name


def test_clipping_acted_on_every_update(runs):
    """The gradient norm before clipping is above 1.0 at every update: clipping to 1.0 shaped every update that the
    runs above agree on."""
    for name, output_dir in runs[0].items():
        norms = summaries(output_dir)[0]["gradient_norm"]
        assert min(norms.values()) > 1.2, (name, norms)  # measured 1.23, 1.62, 1.35


def test_no_tpu_is_a_clear_error_before_any_work(runs):
    """Without a TPU the script stops in the strategy's creation, before reading its inputs or building the model,
    with a ValueError naming the TPU flags (not TensorFlow's traceback); the port nothing listens on is refused at
    once rather than waited for."""
    _, errors, logs = runs
    assert logs.count("*** Training input files: 1 ***") == len(SPLITS) + 1  # no TPU run read any
    assert errors["no_name"].startswith("ValueError: --distribution_strategy=tpu (or --use_tpu) needs a TPU: pass "
                                        "--tpu_name (or --master)")
    assert errors["refused"].startswith("ValueError: --tpu_name/--master='grpc://127.0.0.1:1': no TPU worker answers "
                                        "at 127.0.0.1:1 (")
    assert "Connection refused" in errors["refused"]
    assert errors["local"].startswith("ValueError: --tpu_name/--master='local': no TPU found there (TPUs not found")
