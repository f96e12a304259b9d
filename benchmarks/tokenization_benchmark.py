"""Tokenization throughput and exactness on real English text: original vs ours (Python, in-graph) vs Rust.

Corpus: the wikitext of gensim's test dump `enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`
(the `<text>` elements, XML-unescaped, split into lines, blank lines dropped; --max_lines keeps the first N), or
--corpus_file (one text per line). Every tokenizer gets the same lines and the same vocabulary (default: the
bert-base-uncased vocab in tests/fixtures) and produces WordPiece ids (no [CLS]/[SEP]):

  * original: `tokenization.FullTokenizer` loaded from a clone of google-research/bert given by
    --original_bert_dir (this project ships none of its code; needs `six`, and TensorFlow 2's `tf.compat.v1.gfile`
    is put where the TF1 code looks for `tf.gfile`). Skipped, with a note, without the flag.
  * bert_tf Python: `bert_tf.tokenization.FullTokenizer`, a fresh instance per timed round (its per-word cache
    starts empty each time).
  * bert_tf in-graph: `bert_tf.text.in_graph.InGraphTokenizer.tokenize` (a tf.function) on batches of
    --batch_size lines; timed: making the string tensors, tokenizing, fetching ids and row splits as NumPy arrays.
  * HF tokenizers (Rust): `tokenizers.BertWordPieceTokenizer(vocab, lowercase, strip_accents, clean_text,
    handle_chinese_chars)`; timed: one `encode_batch` call over all lines (parallel over the cores).
  Turning the results into Python lists of ids (for the comparison) is not timed, except for the two Python
  tokenizers, whose results are such lists.

Each round times every tokenizer once over the whole corpus (interleaved, so a change in machine speed hits all
alike), after --warmup untimed rounds; wordpieces/s is total wordpieces / median round time over --repeats rounds.
"identical" counts the lines whose id sequence equals the reference's (the original's, or ours in Python when the
original is not given). The load average is printed before and after: other work on the machine slows every
column.

Example:
  python benchmarks/tokenization_benchmark.py --original_bert_dir /path/to/bert --repeats 5
"""
import argparse
import bz2
import importlib.util
import os
import platform
import statistics
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VOCAB = os.path.join(ROOT, "tests", "fixtures", "uncased_vocab.txt")
GENSIM_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--original_bert_dir", default=None,
                   help="a clone of google-research/bert (its tokenization.py is timed as the reference)")
    p.add_argument("--vocab_file", default=DEFAULT_VOCAB, help="WordPiece vocabulary (default: bert-base-uncased)")
    p.add_argument("--do_lower_case", default=True, action=argparse.BooleanOptionalAction,
                   help="uncased (default) or --no-do_lower_case")
    p.add_argument("--corpus_file", default=None, help="one text per line instead of the gensim wikitext")
    p.add_argument("--max_lines", type=int, default=0, help="use only the first N lines (0: all)")
    p.add_argument("--batch_size", type=int, default=1024, help="lines per in-graph tokenize call")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (tracing, caches, page-in)")
    p.add_argument("--skip", default="", help="comma-separated tokenizers to leave out: python,graph,rust")
    return p.parse_args(argv)


def gensim_wikitext_lines():
    import gensim
    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", GENSIM_DUMP)
    lines = []
    with bz2.open(path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.endswith("}text") and element.text:
                lines.extend(line for line in element.text.split("\n") if line.strip())
            element.clear()
    return lines, path


def load_original(bert_dir):
    """The original tokenization module from a google-research/bert clone, under TF2."""
    path = os.path.join(bert_dir, "tokenization.py")
    if not os.path.exists(path):
        raise SystemExit("--original_bert_dir: no tokenization.py in %s" % bert_dir)
    import tensorflow as tf
    if not hasattr(tf, "gfile"):
        tf.gfile = tf.compat.v1.gfile  # the TF1 name the original reads its vocab through
    spec = importlib.util.spec_from_file_location("original_bert_tokenization", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_lists(result):
    return result


def make_runners(args, lines):
    """{name: (label, run, to_lists)}, in table order: run() is timed; to_lists(its result) -> id lists is not."""
    runners = {}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    notes = []
    if args.original_bert_dir:
        original = load_original(args.original_bert_dir)
        tok = original.FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
        runners["original"] = ("original tokenization.py (google-research/bert)",
                               lambda: [tok.convert_tokens_to_ids(tok.tokenize(line)) for line in lines], _as_lists)
    else:
        notes.append("original: skipped (no --original_bert_dir); 'identical' is against bert_tf Python")

    if "python" not in skip:
        from bert_tf.text import tokenization

        def run_python():
            tok = tokenization.FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
            return [tok.convert_tokens_to_ids(tok.tokenize(line)) for line in lines]
        runners["python"] = ("bert_tf.tokenization.FullTokenizer (Python)", run_python, _as_lists)

    if "graph" not in skip:
        import tensorflow as tf

        from bert_tf.text import in_graph
        graph = in_graph.InGraphTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
        batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]

        def run_graph():  # ids as NumPy (flat values, row splits) per batch
            out = []
            for batch in batches:
                ids = graph.tokenize(tf.constant(batch))
                out.append((ids.flat_values.numpy(), ids.row_splits.numpy()))
            return out

        def graph_lists(result):
            out = []
            for values, splits in result:
                values, splits = values.tolist(), splits.tolist()
                out.extend(values[a:b] for a, b in zip(splits[:-1], splits[1:]))
            return out
        runners["graph"] = ("bert_tf.text.in_graph.InGraphTokenizer, batch %d" % args.batch_size, run_graph,
                            graph_lists)

    if "rust" not in skip:
        try:
            from tokenizers import BertWordPieceTokenizer
        except ImportError:
            notes.append("HF tokenizers: skipped (pip install tokenizers)")
        else:
            rust = BertWordPieceTokenizer(args.vocab_file, lowercase=args.do_lower_case,
                                          strip_accents=args.do_lower_case, clean_text=True,
                                          handle_chinese_chars=True)

            def run_rust():  # Encoding objects
                return rust.encode_batch(lines, add_special_tokens=False)
            runners["rust"] = ("HF tokenizers BertWordPieceTokenizer (Rust), encode_batch", run_rust,
                               lambda encodings: [e.ids for e in encodings])
    return runners, notes


def main(argv=None):
    args = parse_args(argv)
    if args.corpus_file:
        with open(args.corpus_file, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
        source = args.corpus_file
    else:
        lines, source = gensim_wikitext_lines()
    if args.max_lines:
        lines = lines[:args.max_lines]
    print("corpus: %s\n  %d lines, %d characters" % (source, len(lines), sum(map(len, lines))))
    print("vocab: %s (do_lower_case=%s)" % (args.vocab_file, args.do_lower_case))
    print("python %s, %s, %d CPUs; load average before: %s" % (
        platform.python_version(), platform.platform(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))

    runners, notes = make_runners(args, lines)
    outputs, times = {}, {name: [] for name in runners}
    for round_index in range(args.warmup + args.repeats):
        for name, (_, run, to_lists) in runners.items():
            start = time.perf_counter()
            result = run()
            elapsed = time.perf_counter() - start
            if round_index >= args.warmup:
                times[name].append(elapsed)
            outputs[name] = to_lists(result)
        print("  round %d/%d done" % (round_index + 1, args.warmup + args.repeats), file=sys.stderr)

    reference = "original" if "original" in outputs else "python"
    ref = outputs.get(reference)
    rust_rate = None
    rows = []
    for name, (label, _, _) in runners.items():
        wordpieces = sum(len(ids) for ids in outputs[name])
        median = statistics.median(times[name])
        rate = wordpieces / median
        if name == "rust":
            rust_rate = rate
        identical = sum(a == b for a, b in zip(outputs[name], ref)) if ref is not None else None
        rows.append((name, label, wordpieces, median, rate, identical))

    print("load average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    print()
    print("| tokenizer | wordpieces/s | median s/round | x Rust | lines identical to %s |" % (
        "the original" if reference == "original" else "bert_tf Python"))
    print("|---|---:|---:|---:|---:|")
    for _, label, _, median, rate, identical in rows:
        ratio = "%.2f" % (rate / rust_rate) if rust_rate else "-"
        same = "%d / %d" % (identical, len(lines)) if identical is not None else "-"
        print("| %s | %s | %.3f | %s | %s |" % (label, f"{rate:,.0f}", median, ratio, same))
    wordpiece_counts = {name: wordpieces for name, _, wordpieces, _, _, _ in rows}
    print()
    print("wordpieces per round: %s" % ", ".join("%s %d" % kv for kv in wordpiece_counts.items()))
    print("rounds: %d timed (median), %d warm-up; interleaved" % (args.repeats, args.warmup))
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    main()
