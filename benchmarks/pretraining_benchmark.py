r"""Pretraining throughput on this CPU: bert-tf's run_pretraining.py (float32, with and without XLA) against
tf-models-official (BertEncoder + BertPretrainerV2) and Hugging Face BertForPreTraining (PyTorch), with the same
bert_config.json, batch, sequence length and data, from scratch (random initialisation).

Data (made once in --work_dir, then reused): gensim's Wikipedia sample (resources.WIKI_DUMP) turned into
sentences by run_scripts/prepare_corpus.py, then into TFRecords by run_scripts/create_pretraining_data.py
(exact mode, bert-base-uncased vocab tests/fixtures/uncased_vocab.txt, lower case, --max_seq_length (128),
--max_predictions_per_seq (20 x max_seq_length / 128: 20 at 128, 80 at 512), masked_lm_prob 0.15, random_seed
12345, --dupe_factor). Every framework trains on
those records: bert-tf and Model Garden read them with tf.data inside their training loops; PyTorch gets the
first examples (one batch per step, enough for the whole run) parsed by tf.data in a separate process and loaded
as tensors before timing, so that TensorFlow never enters its process.

One training step everywhere: forward with dropout on, masked-LM + next-sentence loss, backward, an AdamW-type
update (weight decay 0.01 except LayerNorm and biases, epsilon 1e-6, warmup then linear decay) with gradient
clipping at global norm 1.0:
  bert_tf           run_scripts/run_pretraining.py (the user's command: original flags), the original's
                    AdamWeightDecay; its per-loop log line `step N/M loss L (X examples/s)` is the measurement;
                    every batch cut to its longest sequence (bert-tf's default; the data line reports the lengths)
  bert_tf_padded    the same with --pad_to_max_seq_length (the original's fixed shapes)
  bert_tf_xla       the same with --use_xla
  model_garden      official.nlp.modeling.networks.BertEncoder + models.BertPretrainerV2 (tf_keras) with the
                    "next_sentence" ClassificationHead, MaskedLMTask's loss (weighted masked-LM mean + NSP mean),
                    official.modeling.optimization's "adamw" (legacy AdamWeightDecay, gradient_clip_norm 1.0,
                    polynomial decay, polynomial warmup); the steps looped in one tf.function over a tf.data
                    iterator (as bert-tf's training loop)
  model_garden_xla  the same with the step in tf.function(jit_compile=True)
  torch             transformers.BertForPreTraining (hidden_act "gelu" of the config -> "gelu_new": the tanh
                    GELU the original computes), torch.optim.AdamW, torch.nn.utils.clip_grad_norm_, LambdaLR;
                    it scores every position with the MLM decoder (its design), the others the masked ones only

Each framework runs in its own process (this script with --child=<framework>, or run_pretraining.py itself),
--rounds times, alternating within a round (the order reversed every other round); that plumbing (child processes,
the peak, the machine description) is shared by the benchmarks in benchmarks/measure.py. A run trains --loops loops
of --iterations_per_loop steps; the first loop (tracing, compiling, warm-up) is dropped and the others give the
steady-state sequences/s (their examples / their seconds). Reported per framework and config: the median over
rounds with min-max, the peak RSS of the child process (os.wait4's ru_maxrss; the largest over rounds), the
loss of the first and last loop (a sanity check: ~ln(30522) + ln(2) = 11.0 at random initialisation), and

  MFU = seq/s x training FLOPs per sequence / peak FLOP/s, where
  training FLOPs = 3 x forward FLOPs (backward ~ 2 x forward),
  forward FLOPs = 2 x (encoder MACs + MLM head MACs + NSP MACs), per sequence of S tokens:
    encoder = L x (S x (4 H^2 + 2 H I) + 2 S^2 H)   (Q, K, V, output projections; FFN; QK^T and PV)
    MLM     = P x (H^2 + H V)                       (transform dense, decoder tied to the embeddings;
                                                     P = max_predictions_per_seq positions)
    NSP     = H^2 + 2 H                             (pooler, 2-way classifier)
  and the peak is the highest float32 matmul rate measured on this machine: a square --peak_size matmul in
  TensorFlow and in PyTorch (each in its own process, benchmarks/measure.py; the fastest of 30 calls), measured
  before the first round and after every round (all printed), so that a measurement disturbed by other processes
  does not set it.

Example (peers from `pip install -e ".[compare,corpus]"`):
  python benchmarks/pretraining_benchmark.py --rounds 2 --batch_size 32 --iterations_per_loop 10 --loops 3
"""
import argparse
import datetime
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import measure

REPO = measure.REPO
RUN_PRETRAINING = os.path.join(REPO, "run_scripts", "run_pretraining.py")
DEFAULT_CONFIGS = ",".join(os.path.join(REPO, "configs", name, "bert_config.json")
                           for name in ("uncased_L-4_H-256_A-4", "uncased_L-4_H-512_A-8"))
FRAMEWORKS = ("bert_tf", "bert_tf_padded", "bert_tf_xla", "model_garden", "model_garden_xla", "torch")
LABELS = {
    "bert_tf": "bert-tf run_pretraining.py",
    "bert_tf_padded": "bert-tf run_pretraining.py --pad_to_max_seq_length",
    "bert_tf_xla": "bert-tf run_pretraining.py --use_xla",
    "model_garden": "tf-models-official BertPretrainerV2, tf.function",
    "model_garden_xla": "tf-models-official BertPretrainerV2, jit_compile",
    "torch": "HF BertForPreTraining, PyTorch",
}
# The original's "gelu" is the tanh approximation: Hugging Face calls that "gelu_new" (its "gelu" is exact erf).
HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_new": "gelu_new", "relu": "relu", "tanh": "tanh"}
WEIGHT_DECAY_EXCLUDED = ("LayerNorm", "layer_norm", "bias")
_STEP_LOG = re.compile(r"step (\d+)/(\d+) loss (\S+) .*?\(([\d.]+) examples/s\)")
DISTRIBUTIONS = ("tensorflow", "keras", "tf-keras", "tf-models-official", "torch", "transformers", "numpy")
FLOPS_FORMULA = ("training FLOPs/sequence = 3 x forward; forward = 2 x (L x (S(4H^2 + 2HI) + 2S^2H) + P(H^2 + HV) "
                 "+ H^2 + 2H) [encoder + MLM head on P masked positions + pooler/NSP]")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bert_config_files", default=DEFAULT_CONFIGS, help="Comma-separated bert_config.json files.")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS), help=f"Comma-separated, from {FRAMEWORKS}.")
    p.add_argument("--rounds", type=int, default=2, help="Runs of every framework and config (alternated).")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--max_seq_length", type=int, default=128, help="create_pretraining_data.py's and the runs'.")
    p.add_argument("--max_predictions_per_seq", type=int, default=None,
                   help="Default: 20 x max_seq_length / 128 (20 at 128, the original's; 80 at 512).")
    p.add_argument("--iterations_per_loop", type=int, default=10, help="Steps per timed loop.")
    p.add_argument("--loops", type=int, default=3, help="Loops per run; the first is dropped (warm-up).")
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--dupe_factor", type=int, default=5, help="create_pretraining_data.py's --dupe_factor.")
    p.add_argument("--peak_size", type=int, default=2048, help="Side of the square matmul of the peak.")
    p.add_argument("--peak_dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                   help="dtype of the peak matmul (a mixed-precision run on a GPU: its compute dtype).")
    p.add_argument("--bert_tf_flags", default="", help="More flags for run_pretraining.py, e.g. "
                   "'--mixed_precision=mixed_bfloat16' (on a GPU machine).")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "pretraining_benchmark"),
                   help="Where the data (reused across invocations), logs and outputs go.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: one framework, peak or the batches
    p.add_argument("--child_config", default=None, help=argparse.SUPPRESS)  # the child's bert_config.json
    p.add_argument("--records", default=None, help=argparse.SUPPRESS)  # the child's TFRecords
    p.add_argument("--batches_file", default="", help=argparse.SUPPRESS)  # the PyTorch batches (.npz)
    args = p.parse_args(argv)
    if args.max_predictions_per_seq is None:
        args.max_predictions_per_seq = 20 * args.max_seq_length // 128
    if args.child:
        return args
    args.bert_config_files = [f for f in args.bert_config_files.split(",") if f]
    args.frameworks = [f for f in args.frameworks.split(",") if f]
    bad = [f for f in args.frameworks if f not in FRAMEWORKS]
    if bad or not args.frameworks:
        p.error(f"--frameworks: unknown or none {bad}; choose from {FRAMEWORKS}")
    for path in args.bert_config_files:
        if not os.path.isfile(path):
            p.error(f"--bert_config_files: {path} does not exist")
    if args.loops < 2 or args.iterations_per_loop < 1 or args.rounds < 1 or args.batch_size < 1:
        p.error("--loops must be >= 2 (the first is dropped); --iterations_per_loop, --rounds, --batch_size >= 1")
    if any(f.startswith("bert_tf") for f in args.frameworks) and not os.path.isfile(RUN_PRETRAINING):
        p.error(f"{RUN_PRETRAINING} does not exist: the bert_tf frameworks time it (or leave them out of "
                f"--frameworks)")
    return args


def load_config(path):
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if config.get("hidden_act", "gelu") not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {config['hidden_act']!r} is not one of {sorted(HF_ACTIVATIONS)}")
    return config


def forward_macs(config, seq_length, max_predictions):
    """Multiply-adds of one sequence's forward pass: {"encoder", "mlm", "nsp"} (see FLOPS_FORMULA)."""
    h, i, v, s = config["hidden_size"], config["intermediate_size"], config["vocab_size"], seq_length
    return {"encoder": config["num_hidden_layers"] * (s * (4 * h * h + 2 * h * i) + 2 * s * s * h),
            "mlm": max_predictions * (h * h + h * v),
            "nsp": h * h + 2 * h}


def train_flops(config, seq_length, max_predictions):
    """FLOPs of one training sequence of seq_length tokens: 3 x (2 x forward multiply-adds)."""
    return 3 * 2 * sum(forward_macs(config, seq_length, max_predictions).values())


# --- data -------------------------------------------------------------------------------------------------


def run_checked(cmd, what):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if result.returncode:
        raise RuntimeError(f"{what} failed ({' '.join(cmd)}):\n{result.stderr[-4000:]}")


def prepare_records(work_dir, dupe_factor, seq_length, max_predictions):
    """The pretraining TFRecords of gensim's Wikipedia sample (made on first use). Returns their path."""
    from bert_tf import resources

    corpus = os.path.join(work_dir, "wiki_corpus.txt")
    if not os.path.exists(corpus):
        print("preparing the corpus (prepare_corpus.py) ...", file=sys.stderr, flush=True)
        run_checked([sys.executable, os.path.join(REPO, "run_scripts", "prepare_corpus.py"),
                     f"--input_file={resources.gensim_test_file(resources.WIKI_DUMP)}",
                     f"--output_file={corpus}"], "prepare_corpus.py")
    records = os.path.join(work_dir, f"wiki_seq{seq_length}_pred{max_predictions}_dupe{dupe_factor}.tfrecord")
    if not os.path.exists(records):
        print("creating the pretraining data (create_pretraining_data.py) ...", file=sys.stderr, flush=True)
        run_checked([sys.executable, os.path.join(REPO, "run_scripts", "create_pretraining_data.py"),
                     f"--input_file={corpus}", f"--output_file={records}",
                     f"--vocab_file={os.path.join(REPO, 'tests', 'fixtures', 'uncased_vocab.txt')}",
                     "--do_lower_case=True", f"--max_seq_length={seq_length}",
                     f"--max_predictions_per_seq={max_predictions}", "--masked_lm_prob=0.15",
                     "--random_seed=12345", f"--dupe_factor={dupe_factor}"], "create_pretraining_data.py")
    return records


def batches_child(args):
    """Writes the first loops x iterations_per_loop batches of the records (file order, bert-tf's evaluation reader)
    to an .npz for PyTorch: each feature as [batches, batch_size, ...]."""
    import numpy as np

    from bert_tf.data.pretraining import dataset

    steps = args.loops * args.iterations_per_loop
    batches = [{**features, **labels} for features, labels in dataset.evaluation_dataset(
        [args.records], args.batch_size, args.max_seq_length, args.max_predictions_per_seq, max_steps=steps)]
    np.savez(args.batches_file, **{k: np.stack([b[k].numpy() for b in batches]) for k in batches[0]})
    return {"batches": len(batches)}


def lengths_child(args):
    """The lengths the training batches are cut to (bert-tf's training reader, seed 0, as run_pretraining.py
    reads them; the first 200 batches): {"cut_lengths": [...], "real_tokens": mean real tokens per sequence}."""
    import numpy as np

    from bert_tf.data import lengths
    from bert_tf.data.pretraining import dataset

    batches = dataset.training_dataset([args.records], args.batch_size, args.max_seq_length,
                                       args.max_predictions_per_seq, seed=0, lengths=lengths.SequenceLengths())
    cut, real = [], []
    for features, _ in batches.take(200):
        cut.append(int(features["input_mask"].shape[1]))
        real.append(float(np.mean(np.sum(features["input_mask"].numpy(), axis=1))))
    return {"cut_lengths": cut, "real_tokens": float(np.mean(real))}


def prepare_batches(args):
    path = os.path.join(args.work_dir, f"batches_{os.path.basename(args.records)}_b{args.batch_size}_"
                                       f"n{args.loops * args.iterations_per_loop}.npz")
    if not os.path.exists(path):
        launch(args, "batches", None, {"batches_file": path})
    return path


# --- children ---------------------------------------------------------------------------------------------


def timed_loops(run_loop, loops):
    """Calls run_loop() (one loop of steps; returns its mean loss as a float) `loops` times:
    {"loop_seconds": [...], "losses": [...]}."""
    seconds, losses = [], []
    for _ in range(loops):
        start = time.perf_counter()
        losses.append(run_loop())
        seconds.append(time.perf_counter() - start)
    return {"loop_seconds": seconds, "losses": losses}


def warmup_linear_decay(step, warmup, total):
    """The original's learning-rate factor: linear warmup from 0, then 1 - step / total."""
    return step / warmup if step < warmup else max(0.0, 1.0 - step / total)


def model_garden_child(args, config, jit_compile):
    import tensorflow as tf
    import tf_keras
    from official.modeling import optimization, tf_utils
    from official.nlp.modeling import layers, models, networks

    from bert_tf.data.pretraining import dataset

    tf.keras.utils.set_random_seed(0)
    initializer = lambda: tf_keras.initializers.TruncatedNormal(stddev=config["initializer_range"])  # noqa: E731
    activation = tf_utils.get_activation(config["hidden_act"])  # "gelu": the tanh approximation, as the original
    encoder = networks.BertEncoder(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"], num_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"], max_sequence_length=config["max_position_embeddings"],
        type_vocab_size=config["type_vocab_size"], inner_dim=config["intermediate_size"],
        inner_activation=activation, output_dropout=config["hidden_dropout_prob"],
        attention_dropout=config["attention_probs_dropout_prob"], initializer=initializer())
    model = models.BertPretrainerV2(
        encoder, mlm_activation=activation, mlm_initializer=initializer(),
        classification_heads=[layers.ClassificationHead(inner_dim=config["hidden_size"], num_classes=2,
                                                        dropout_rate=config["hidden_dropout_prob"],
                                                        name="next_sentence")])
    total = args.loops * args.iterations_per_loop
    factory = optimization.OptimizerFactory(optimization.OptimizationConfig({
        "optimizer": {"type": "adamw", "adamw": {"weight_decay_rate": 0.01, "epsilon": 1e-6,
                                                 "exclude_from_weight_decay": list(WEIGHT_DECAY_EXCLUDED),
                                                 "gradient_clip_norm": 1.0}},
        "learning_rate": {"type": "polynomial", "polynomial": {"initial_learning_rate": args.learning_rate,
                                                               "decay_steps": total, "end_learning_rate": 0.0}},
        "warmup": {"type": "polynomial", "polynomial": {"power": 1, "warmup_steps": args.iterations_per_loop}}}))
    optimizer = factory.build_optimizer(factory.build_learning_rate())

    def loss_fn(labels, outputs):  # official.nlp.tasks.masked_lm.MaskedLMTask.build_losses, without its metrics
        lm = tf_keras.losses.sparse_categorical_crossentropy(
            labels["masked_lm_ids"], tf.cast(outputs["mlm_logits"], tf.float32), from_logits=True)
        weights = labels["masked_lm_weights"]
        mlm = tf.math.divide_no_nan(tf.reduce_sum(lm * weights), tf.reduce_sum(weights))
        nsp = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
            labels["next_sentence_labels"], tf.cast(outputs["next_sentence"], tf.float32), from_logits=True))
        return mlm + nsp

    @tf.function(jit_compile=jit_compile)
    def train_step(features, labels):
        inputs = {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
                  "input_type_ids": features["segment_ids"], "masked_lm_positions": features["masked_lm_positions"]}
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(inputs, training=True))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function
    def train_loop(iterator, steps):
        total_loss = tf.constant(0.0)
        for _ in tf.range(steps):
            total_loss += train_step(*next(iterator))
        return total_loss / tf.cast(steps, tf.float32)

    # bert-tf's reader of the original's training input (interleave, shuffle 100, batches): the same input cost.
    iterator = iter(dataset.training_dataset([args.records], args.batch_size, args.max_seq_length,
                                             args.max_predictions_per_seq, seed=0))
    steps = tf.constant(args.iterations_per_loop)
    result = timed_loops(lambda: float(train_loop(iterator, steps)), args.loops)
    result["threads"] = measure.thread_info()
    return result


def torch_child(args, config):
    import numpy as np
    import torch
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    with np.load(args.batches_file) as data:
        arrays = {k: data[k] for k in data.files}  # each [steps, batch, ...]
    # MLM labels over all positions: the masked token's id where a prediction is real (weight > 0), else -100.
    labels = np.full(arrays["input_ids"].shape, -100, np.int64)
    step, row, slot = np.nonzero(arrays["masked_lm_weights"] > 0)
    labels[step, row, arrays["masked_lm_positions"][step, row, slot]] = arrays["masked_lm_ids"][step, row, slot]
    as_long = lambda a: torch.from_numpy(a.astype(np.int64))  # noqa: E731
    batches = [{"input_ids": as_long(arrays["input_ids"][s]), "attention_mask": as_long(arrays["input_mask"][s]),
                "token_type_ids": as_long(arrays["segment_ids"][s]), "labels": torch.from_numpy(labels[s]),
                "next_sentence_label": as_long(arrays["next_sentence_labels"][s, :, 0])}
               for s in range(len(labels))]
    model = BertForPreTraining(BertConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
        num_hidden_layers=config["num_hidden_layers"], num_attention_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"], hidden_act=HF_ACTIVATIONS[config["hidden_act"]],
        hidden_dropout_prob=config["hidden_dropout_prob"],
        attention_probs_dropout_prob=config["attention_probs_dropout_prob"],
        max_position_embeddings=config["max_position_embeddings"], type_vocab_size=config["type_vocab_size"],
        initializer_range=config["initializer_range"])).train()
    decayed = lambda name: not any(k in name for k in ("bias", "LayerNorm.weight", "LayerNorm.bias"))  # noqa: E731
    params = dict(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in params.items() if decayed(n)], "weight_decay": 0.01},
         {"params": [p for n, p in params.items() if not decayed(n)], "weight_decay": 0.0}],
        lr=args.learning_rate, eps=1e-6)
    total = args.loops * args.iterations_per_loop
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_linear_decay(step, args.iterations_per_loop, total))
    position = itertools.cycle(range(len(batches)))

    def run_loop():
        loss_sum = torch.zeros(())
        for _ in range(args.iterations_per_loop):
            loss = model(**batches[next(position)]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
        return float(loss_sum) / args.iterations_per_loop

    result = timed_loops(run_loop, args.loops)
    result["threads"] = measure.thread_info()
    result["attn_implementation"] = model.config._attn_implementation
    return result


def child_main(args):
    config = load_config(args.child_config) if args.child_config else None
    if args.child == "batches":
        result = batches_child(args)
    elif args.child == "lengths":
        result = lengths_child(args)
    elif args.child.startswith("model_garden"):
        result = model_garden_child(args, config, jit_compile=args.child == "model_garden_xla")
    elif args.child == "torch":
        result = torch_child(args, config)
    else:
        raise ValueError(f"--child={args.child}: expected batches, lengths, model_garden, model_garden_xla or torch")
    measure.emit_result(result)


# --- the parent ---------------------------------------------------------------------------------------------


def launch(args, child, config_file, extra=None):
    """Runs one child process to completion: this script with --child (or run_pretraining.py for bert_tf).
    Returns its result dict with "peak_rss_mb" (the child's maximum resident set), "load" (1-minute load
    average at its start) and "wall_seconds"."""
    output_dir = tempfile.mkdtemp(prefix="output_", dir=args.work_dir)  # fresh: run_pretraining.py resumes
    if child.startswith("bert_tf"):
        cmd = bert_tf_command(args, config_file, output_dir, child)
    else:
        cmd = [sys.executable, os.path.abspath(__file__), f"--child={child}", f"--records={args.records}",
               f"--batch_size={args.batch_size}", f"--iterations_per_loop={args.iterations_per_loop}",
               f"--loops={args.loops}", f"--learning_rate={args.learning_rate}",
               f"--max_seq_length={args.max_seq_length}", f"--max_predictions_per_seq={args.max_predictions_per_seq}",
               f"--batches_file={(extra or {}).get('batches_file', args.batches_file)}"]
        cmd += [f"--child_config={config_file}"] if config_file else []
    try:
        run = measure.run_child(cmd, args.work_dir, f"{child}_{config_name(config_file) if config_file else 'all'}")
    finally:
        shutil.rmtree(output_dir)  # checkpoints
    examples_per_loop = args.iterations_per_loop * args.batch_size
    parse = (lambda run: parse_bert_tf_log(run["stderr"], examples_per_loop, run["log"])) if child.startswith(
        "bert_tf") else None
    return measure.child_result(run, parse)


def bert_tf_command(args, config_file, output_dir, child):
    steps = args.loops * args.iterations_per_loop
    return [sys.executable, RUN_PRETRAINING, f"--bert_config_file={config_file}", f"--input_file={args.records}",
            f"--output_dir={output_dir}", f"--max_seq_length={args.max_seq_length}",
            f"--max_predictions_per_seq={args.max_predictions_per_seq}", "--do_train",
            f"--train_batch_size={args.batch_size}", f"--pad_to_max_seq_length={child == 'bert_tf_padded'}",
            f"--learning_rate={args.learning_rate}", f"--num_train_steps={steps}",
            f"--num_warmup_steps={args.iterations_per_loop}", f"--save_checkpoints_steps={steps}",
            f"--iterations_per_loop={args.iterations_per_loop}", f"--use_xla={child == 'bert_tf_xla'}",
            *shlex.split(args.bert_tf_flags)]


def parse_bert_tf_log(stderr, examples_per_loop, log_path):
    """The loops of run_pretraining.py from its log lines `step N/M loss L (X examples/s)`."""
    matches = _STEP_LOG.findall(stderr)
    if not matches:
        raise RuntimeError(f"run_pretraining.py logged no `step N/M loss L (X examples/s)` line (log {log_path})")
    return {"loop_seconds": [examples_per_loop / float(m[3]) for m in matches],
            "losses": [float(m[2]) for m in matches]}


def steady_seq_per_s(run, batch_size, iterations_per_loop):
    """Sequences/s over all loops but the first."""
    seconds = run["loop_seconds"][1:]
    return len(seconds) * iterations_per_loop * batch_size / sum(seconds)


def run_rounds(args):
    """measure.run_session's result, "runs" {(config file, framework): [run result, ...]} over --rounds, alternating
    (the order of the configs and frameworks reversed every other round); the matmul peaks of the libraries the
    frameworks use are measured before the first round and after every round."""
    def run_one(name, r):
        config_file, framework = name
        run = launch(args, framework, config_file)
        run["seq_per_s"] = steady_seq_per_s(run, args.batch_size, args.iterations_per_loop)
        print(f"round {r + 1} {config_name(config_file)} {framework}: {run['seq_per_s']:.1f} seq/s "
              f"(loops {', '.join(f'{s:.2f}' for s in run['loop_seconds'])} s), peak RSS "
              f"{run['peak_rss_mb']:.0f} MB, loss {run['losses'][0]:.3f} -> {run['losses'][-1]:.3f}, "
              f"load {run['load']:.2f}", file=sys.stderr, flush=True)
        return run

    names = [(config_file, framework) for config_file in args.bert_config_files for framework in args.frameworks]
    return measure.run_session(names, args.rounds, run_one, measure.peak_frameworks(args.frameworks), args.work_dir,
                               DISTRIBUTIONS, args.peak_size, args.peak_dtype)


def config_name(config_file):
    return os.path.basename(os.path.dirname(os.path.abspath(config_file)))


def summarize(args, runs, peak):
    rows = []
    for (config_file, framework), results in runs.items():
        rates = [r["seq_per_s"] for r in results]
        median = statistics.median(rates)
        flops = train_flops(load_config(config_file), args.max_seq_length, args.max_predictions_per_seq)
        rows.append({"config": config_name(config_file), "framework": framework, "seq_per_s": median,
                     "min": min(rates), "max": max(rates), "gflops": median * flops / 1e9,
                     "mfu": median * flops / (peak * 1e9), "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
                     "loss_first": statistics.median(r["losses"][0] for r in results),
                     "loss_last": statistics.median(r["losses"][-1] for r in results),
                     "threads": results[0].get("threads"), "rounds": rates,
                     "loads": [r["load"] for r in results]})
    return rows


def target_status(rows):
    """One line per config: is bert-tf (each variant run) ahead of both peers' best?"""
    lines = []
    for config in dict.fromkeys(r["config"] for r in rows):
        ours = {r["framework"]: r["seq_per_s"] for r in rows if r["config"] == config
                and r["framework"].startswith("bert_tf")}
        peers = {r["framework"]: r["seq_per_s"] for r in rows if r["config"] == config
                 and not r["framework"].startswith("bert_tf")}
        if not ours or not peers:
            continue
        best_peer = max(peers, key=peers.get)
        verdicts = ", ".join(f"{f} {v / peers[best_peer]:.2f}x ({'ahead' if v > peers[best_peer] else 'behind'})"
                             for f, v in ours.items())
        lines.append(f"{config}: against the fastest peer ({best_peer}, {peers[best_peer]:.1f} seq/s): {verdicts}")
    return lines


def print_report(args, rows, session):
    peaks, loads = session["peaks"], session["loads"]
    peak = max(max(values) for values in peaks.values())
    print(f"date: {datetime.date.today().isoformat()}; machine: {measure.describe_machine(session['machine'])}; "
          f"load average {loads[0]:.2f} at the start, {loads[1]:.2f} at the end")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in session["versions"].items() if v))
    print(f"data: {args.records}; batch {args.batch_size}, seq {args.max_seq_length}, max_predictions_per_seq "
          f"{args.max_predictions_per_seq}; {args.rounds} rounds; {args.loops} loops of {args.iterations_per_loop} "
          "steps per run, the first dropped")
    if args.batch_lengths:
        cut = args.batch_lengths["cut_lengths"]
        print(f"lengths: {args.batch_lengths['real_tokens']:.1f} real tokens per sequence on average; the training "
              f"batches cut to {statistics.mean(cut):.1f} on average ({min(cut)}-{max(cut)}; "
              f"{sum(c == args.max_seq_length for c in cut)} of {len(cut)} batches at max_seq_length); MFU counts "
              f"max_seq_length tokens per sequence")
    print(f"{args.peak_dtype} matmul peak (GFLOP/s, {args.peak_size}^3, fastest of 30 calls; before the first "
          "round and after each): " + measure.describe_peaks(peaks) + f"; MFU against {peak:.0f}")
    print(FLOPS_FORMULA)
    for config_file in args.bert_config_files:
        c = load_config(config_file)
        macs = forward_macs(c, args.max_seq_length, args.max_predictions_per_seq)
        print(f"  {config_name(config_file)} (L={c['num_hidden_layers']} H={c['hidden_size']} "
              f"I={c['intermediate_size']} V={c['vocab_size']}): forward MACs encoder {macs['encoder'] / 1e6:.0f}M "
              f"+ MLM {macs['mlm'] / 1e6:.0f}M + NSP {macs['nsp'] / 1e6:.2f}M; training "
              f"{train_flops(c, args.max_seq_length, args.max_predictions_per_seq) / 1e9:.2f} GFLOP/sequence")
    threads = {r["framework"]: r["threads"] for r in rows if r["threads"]}
    print("threads: " + "; ".join(f"{k} {v}" for k, v in threads.items()) + " (TF 0 = one per core)")
    print()
    print("| config | framework | seq/s (median) | min-max | GFLOP/s | MFU | peak RSS MB | loss first -> last loop | "
          "load at start |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['config']} | {LABELS[r['framework']]} | {r['seq_per_s']:.1f} | {r['min']:.1f}-{r['max']:.1f} | "
              f"{r['gflops']:.0f} | {100 * r['mfu']:.0f}% | {r['peak_rss_mb']:.0f} | "
              f"{r['loss_first']:.2f} -> {r['loss_last']:.2f} | {min(r['loads']):.1f}-{max(r['loads']):.1f} |")
    print()
    for line in target_status(rows):
        print("target (ahead of both peers): " + line)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    args.records = prepare_records(args.work_dir, args.dupe_factor, args.max_seq_length, args.max_predictions_per_seq)
    args.batches_file = prepare_batches(args) if "torch" in args.frameworks else ""
    args.batch_lengths = launch(args, "lengths", None) if "bert_tf" in args.frameworks else None
    session = run_rounds(args)
    rows = summarize(args, session["runs"], max(max(values) for values in session["peaks"].values()))
    print_report(args, rows, session)
    if args.json:
        runs = {f"{config_name(c)} {fw}": v for (c, fw), v in session["runs"].items()}
        measure.write_json(args.json, args, {"rows": rows, **session, "formula": FLOPS_FORMULA, "runs": runs},
                           internal=("child",))
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
