"""Benchmark: pre-training data creation, the original create_pretraining_data.py vs bert_tf exact and fast modes.

Corpus: the wikitext of gensim's test dump (resources.WIKI_DUMP): each `<text>` element, XML-unescaped, one
article per document, its lines split crudely into sentences (after ". ", "! ", "? "), one sentence per line,
blank lines between articles; the article list is repeated until the corpus reaches each --sizes_mb size.

Each configuration runs as its own subprocess (so peak RSS is that of the run alone), timed wall-clock:
  * original: google-research/bert's create_pretraining_data.py from --original_bert_dir, run under TF2 via a
    small shim (below) that maps its TF1 names (tf.flags, tf.gfile, tf.logging, tf.python_io, tf.app) to
    tf.compat.v1;
  * exact: bert_tf's exact mode (run_scripts/create_pretraining_data.py);
  * fast: bert_tf's fast mode, --num_workers (default 2).
Peak RSS: the largest resident set of the run summed over its processes (sampled every 0.02 s from /proc),
and the largest single process's maximum RSS (`/usr/bin/time -f %M`, which sees every process of the run).
Instances are counted from the outputs; "same as original" compares exact mode's records with the original's
(protos, deterministic serialization), record by record.

  python benchmarks/pretraining_data_benchmark.py --original_bert_dir /tmp/orig_bert --sizes_mb 10,30
"""
import argparse
import bz2
import html
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHIM = r'''
import runpy, sys
import tensorflow.compat.v1 as tf1
sys.modules["tensorflow"] = tf1      # the original does `import tensorflow as tf` and uses TF1 names
bert_dir = sys.argv.pop(1)
sys.path.insert(0, bert_dir)
sys.argv[0] = bert_dir + "/create_pretraining_data.py"
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--original_bert_dir", default=None, help="a clone of google-research/bert")
    parser.add_argument("--sizes_mb", default="10,30", help="corpus sizes in MB (comma-separated)")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--shard_size", type=int, default=100, help="fast mode: documents per shard")
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--vocab_file", default=os.path.join(ROOT, "tests", "fixtures", "uncased_vocab.txt"))
    parser.add_argument("--skip_original_above_mb", type=float, default=1e9,
                        help="do not run the original on corpora larger than this")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "pretraining_data_benchmark"),
                        help="Where the corpora, the shim and the outputs go (a rerun overwrites them).")
    return parser.parse_args(argv)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'\[(])")


def wiki_articles():
    """Articles of gensim's Wikipedia test dump: list of lists of sentence lines."""
    from bert_tf import resources
    with bz2.open(resources.gensim_test_file(resources.WIKI_DUMP), "rt", encoding="utf-8") as f:
        xml = f.read()
    articles = []
    for match in re.finditer(r"<text[^>]*>(.*?)</text>", xml, re.S):
        sentences = []
        for line in html.unescape(match.group(1)).split("\n"):
            line = line.strip()
            if line:
                sentences.extend(s for s in _SENTENCE_END.split(line) if s.strip())
        if sentences:
            articles.append(sentences)
    return articles


def write_corpus(path, articles, size_bytes):
    """Writes the articles (repeated) until the file has at least `size_bytes`; returns its size."""
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < size_bytes:
            for sentences in articles:
                text = "\n".join(sentences) + "\n\n"
                f.write(text)
                written += len(text.encode("utf-8"))
                if written >= size_bytes:
                    break
    return os.path.getsize(path)


def _tree_rss_kb(root_pid):
    """Sum of VmRSS (kB) of root_pid and its descendants, from /proc."""
    children = {}
    rss = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ppid = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
            children.setdefault(ppid, []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(cmd, env=None):
    """Runs cmd; returns (seconds, peak RSS summed over its process tree in MB, the run's largest single-process
    max RSS in MB as /usr/bin/time reports it)."""
    log = tempfile.TemporaryFile()
    maxrss_file = tempfile.NamedTemporaryFile(suffix=".maxrss", delete=False).name
    cmd = ["/usr/bin/time", "-f", "%M", "-o", maxrss_file] + list(cmd)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code:
        log.seek(0)
        raise RuntimeError(f"{cmd[:3]} failed ({code}):\n{log.read().decode('utf-8', 'replace')[-3000:]}")
    with open(maxrss_file) as f:
        maxrss_kb = int(f.read().split()[-1])
    os.remove(maxrss_file)
    return seconds, peak / 1024, maxrss_kb / 1024


def read_records(paths):
    import tensorflow as tf
    return list(tf.data.TFRecordDataset(paths).as_numpy_iterator())


def main(argv=None):
    args = parse_args(argv)
    workdir = args.workdir
    os.makedirs(workdir, exist_ok=True)
    articles = wiki_articles()
    python = sys.executable
    script = os.path.join(ROOT, "run_scripts", "create_pretraining_data.py")
    shim = os.path.join(workdir, "original_shim.py")
    with open(shim, "w") as f:
        f.write(SHIM)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    common = [f"--vocab_file={args.vocab_file}", "--do_lower_case=True", "--max_seq_length=128",
              "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--random_seed=12345",
              f"--dupe_factor={args.dupe_factor}"]
    rows = []
    for size_mb in [float(s) for s in args.sizes_mb.split(",")]:
        corpus = os.path.join(workdir, f"wiki_{size_mb:g}mb.txt")
        size = write_corpus(corpus, articles, int(size_mb * 1e6))
        mb = size / 1e6
        print(f"corpus {corpus}: {mb:.1f} MB", flush=True)
        runs = []
        if args.original_bert_dir and size_mb <= args.skip_original_above_mb:
            runs.append(("original (google-research/bert, TF1 shim)", "original",
                         [python, shim, args.original_bert_dir, f"--input_file={corpus}"]))
        runs.append(("bert_tf exact", "exact", [python, script, f"--input_file={corpus}"]))
        runs.append((f"bert_tf fast, {args.num_workers} workers, shard {args.shard_size}", "fast",
                     [python, script, f"--input_file={corpus}", f"--num_workers={args.num_workers}",
                      f"--shard_size={args.shard_size}", "--progress=false"]))
        outputs = {}
        for label, key, cmd in runs:
            out = os.path.join(workdir, f"{key}_{size_mb:g}mb.tfrecord")
            for old in os.listdir(workdir):
                if old.startswith(os.path.basename(out)):
                    os.remove(os.path.join(workdir, old))
            seconds, peak, maxrss = run_measured(cmd + [f"--output_file={out}"] + common, env)
            paths = sorted(os.path.join(workdir, p) for p in os.listdir(workdir)
                           if p.startswith(os.path.basename(out)) and not p.endswith(".json"))
            records = read_records(paths)
            outputs[key] = records
            rows.append(dict(size=mb, label=label, key=key, seconds=seconds, n=len(records), peak=peak,
                             maxrss=maxrss))
            print(f"  {label}: {len(records)} instances, {seconds:.1f} s, peak RSS {peak:.0f} MB "
                  f"(largest process {maxrss:.0f} MB)", flush=True)
            del records
        if "original" in outputs:
            import tensorflow as tf
            canon = [tf.train.Example.FromString(r).SerializeToString(deterministic=True)
                     for r in outputs["original"]]
            same = sum(a == b for a, b in zip(canon, outputs["exact"]))
            print(f"  exact mode == original: {same} / {len(canon)} records "
                  f"(counts {len(outputs['exact'])} vs {len(canon)})", flush=True)
            for row in rows:
                if row["size"] == mb and row["key"] == "exact":
                    row["same"] = f"{same} / {len(canon)}"
        outputs.clear()

    print()
    print("| corpus MB | run | instances | s | instances/s | MB text/s | x original | peak RSS MB, all processes "
          "| largest process MB |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        base = [r for r in rows if r["size"] == row["size"] and r["key"] == "original"]
        speed = row["n"] / row["seconds"]
        ratio = f"{(row['size'] / row['seconds']) / (base[0]['size'] / base[0]['seconds']):.2f}" if base else "-"
        print(f"| {row['size']:.1f} | {row['label']} | {row['n']:,} | {row['seconds']:.1f} | {speed:,.0f} | "
              f"{row['size'] / row['seconds']:.3f} | {ratio} | {row['peak']:.0f} | {row['maxrss']:.0f} |")
    for row in rows:
        if "same" in row:
            print(f"exact mode vs original at {row['size']:.1f} MB: {row['same']} records identical")


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    main()
