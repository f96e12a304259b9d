r"""run_pretraining's input pipeline per CPU core, against what one accelerator consumes, and the checkpoint sizes of
BERT-large (issue 40, item 8).

Records: bert-tf's create_pretraining_data, fast mode (`shards.run_sharded`, --shard_size documents a shard), on
gensim's Wikipedia dump sample prepared as the quickstart prepares it (`corpus.prepare_corpus`: one sentence per
line, a blank line between articles), with the bert-base-uncased vocab (tests/fixtures/uncased_vocab.txt) and the
original's settings but --dupe_factor: max_seq_length 128 with max_predictions_per_seq 20, 512 with 80. Kept in
--work_dir: a rerun makes only what is missing.

The pipeline, exactly as run_pretraining.py builds it: `PretrainingTask.train_data` (its records checked by
`read_inputs` against BERT-large's config), called as the Trainer calls its dataset_fn on one worker (the per-replica
batch, a `tf.distribute.InputContext` of --replicas replicas, a seed): the files shuffled, 4 interleaved, records
shuffled, decoded, with --dynamic_masking re-masked (`DynamicMasking`), the update's batches cut to their longest
sequence (the `SequenceLengths` of a default run) and split into the replicas' batches, prefetched. Each
(max_seq_length x batch, masking, cores) runs in a process of its own (this script with --child), pinned to its first
--cores CPUs before TensorFlow starts (`os.sched_setaffinity` on every thread: the threads TensorFlow starts inherit
it, and TensorFlow reads it as its CPU count; the child reports the CPUs its threads could use at the end), with
TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS set to the same count; it pulls batches for --warmup_s seconds, then
counts them for --seconds (the training loop's `next()` on the iterator, from Python here). The process's CPU time over
wall time in that window says how many cores it really used.

On paper: the cores an --gpus host needs = gpus x the sequences/s one accelerator consumes / the sequences/s of one
core, times --margin (default 2: a judgement, not a measurement, for what else needs the host's cores: the
training process's own loop, its copies to the devices and checkpoint writes, and hosts whose cores are slower or
busier than these). The accelerator figures (--gpu_rate_128, --gpu_rate_512) are the GPU proxy's of issue 40,
item 8: run_pretraining's whole update of main 6972a5a (BERT-large) compiled from its HLO by jaxlib's
XLA on an NVIDIA H200, 2026-11-28: 1,637 sequences/s at 256 x 128, 265/s at 32 x 512. A proxy: XLA through jaxlib,
not TensorFlow on a GPU (../shared/tools/gpu/README.md; BENCHMARKS.md, "The XLA training step on GPUs").

Checkpoints (unless --skip_checkpoints): run_pretraining.py itself on BERT-large (--bert_config_file), one step of
batch 1 x 128 with --save_original_checkpoint, in a temporary directory under --work_dir that is removed after:
the bytes on disk of its training checkpoint (ckpt-1: the weights, AdamWeightDecay's two moments, the step, the
input iterator's state) and of the original release (original/bert_model.ckpt: the weights, float32), each checked
against the parameter count x 4 bytes read from the checkpoints themselves.

  python benchmarks/input_pipeline.py --json /tmp/input_pipeline.json
  python benchmarks/input_pipeline.py --configs 128x256,512x32 --replicas 8 --skip_checkpoints   # an 8-GPU host
  python benchmarks/input_pipeline.py --seconds 3 --warmup_s 2 --dupe_factor 2 --skip_checkpoints   # quick look
"""
import argparse
import contextlib
import datetime
import math
import os
import resource
import shutil
import struct
import sys
import tempfile
import time
import types

import measure

VOCAB = os.path.join(measure.REPO, "tests", "fixtures", "uncased_vocab.txt")
BERT_LARGE = os.path.join(measure.REPO, "configs", "uncased_L-24_H-1024_A-16", "bert_config.json")
RUN_PRETRAINING = os.path.join(measure.REPO, "run_scripts", "run_pretraining.py")
PREDICTIONS = {128: 20, 512: 80}  # max_predictions_per_seq of the original's recipes
PROXY_BATCH = {128: 256, 512: 32}  # the batch of the GPU proxy's figures
SEED = 12345


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--configs", default="128x32,128x256,512x32",
                   help="Comma-separated max_seq_length x per-replica batch (max_seq_length 128 or 512).")
    p.add_argument("--masking", default="static,dynamic", help="static (the records' masks) and/or dynamic.")
    p.add_argument("--cores", default="1,2", help="Comma-separated core counts to pin each pipeline to.")
    p.add_argument("--replicas", type=int, default=1,
                   help="Replicas the pipeline feeds (8: an 8-GPU host's one pipeline, which cuts the update's batch "
                        "of 8 x batch and splits it); its batches are still counted per replica.")
    p.add_argument("--warmup_s", type=float, default=5.0, help="Seconds of batches pulled before the count.")
    p.add_argument("--seconds", type=float, default=20.0, help="Seconds of batches counted.")
    p.add_argument("--dupe_factor", type=int, default=10, help="create_pretraining_data's --dupe_factor.")
    p.add_argument("--shard_size", type=int, default=10, help="Documents a shard (the sample has 105 articles).")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--gpu_rate_128", type=float, default=1637.0, help="Sequences/s one accelerator consumes at 128.")
    p.add_argument("--gpu_rate_512", type=float, default=265.0, help="Sequences/s one accelerator consumes at 512.")
    p.add_argument("--margin", type=float, default=2.0, help="Factor on the cores the rates alone ask for.")
    p.add_argument("--bert_config_file", default=BERT_LARGE)
    p.add_argument("--skip_checkpoints", action="store_true", help="Do not measure the checkpoint sizes.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "input_pipeline_benchmark"))
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: "<seq>x<batch>:<masking>:<cores>"
    p.add_argument("--records_dir", default=None, help=argparse.SUPPRESS)  # internal: the child's records
    args = p.parse_args(argv)
    args.configs = [tuple(int(n) for n in c.split("x")) for c in args.configs.split(",")]
    args.masking = args.masking.split(",")
    args.cores = [int(n) for n in args.cores.split(",")]
    if any(seq not in PREDICTIONS or batch < 1 for seq, batch in args.configs):
        p.error(f"--configs: expected <seq>x<batch> with seq in {sorted(PREDICTIONS)}, got {args.configs}")
    if set(args.masking) - {"static", "dynamic"}:
        p.error(f"--masking: expected static and/or dynamic, got {args.masking}")
    if not all(1 <= n <= len(os.sched_getaffinity(0)) for n in args.cores):
        p.error(f"--cores: each count must be in [1, {len(os.sched_getaffinity(0))}], got {args.cores}")
    return args


# --- the records --------------------------------------------------------------------------------------------------


def count_records(paths):
    """The number of records in TFRecord files (plain, not GZIP), from their length headers."""
    count = 0
    for path in paths:
        with open(path, "rb") as f:
            while header := f.read(12):  # uint64 length, uint32 its CRC; then the data and its uint32 CRC
                f.seek(struct.unpack("<Q", header[:8])[0] + 4, os.SEEK_CUR)
                count += 1
    return count


def make_records(args, seq):
    """(the record files at max_seq_length `seq`, their number of sequences), made in --work_dir if missing."""
    from bert_tf import resources
    from bert_tf.data import corpus
    from bert_tf.data.pretraining import shards

    corpus_file = os.path.join(args.work_dir, "wiki.txt")
    if not os.path.isfile(corpus_file):
        os.makedirs(args.work_dir, exist_ok=True)
        corpus.prepare_corpus(resources.gensim_test_file(resources.WIKI_DUMP), corpus_file)
    directory = os.path.join(args.work_dir, f"records_{seq}_dupe{args.dupe_factor}_shard{args.shard_size}")
    os.makedirs(directory, exist_ok=True)
    paths = shards.run_sharded(corpus_file, os.path.join(directory, "wiki"), VOCAB, max_seq_length=seq,
                               max_predictions_per_seq=PREDICTIONS[seq], dupe_factor=args.dupe_factor,
                               shard_size=args.shard_size, progress=False)[0]
    return paths, count_records(paths)


# --- one pipeline, in its own process --------------------------------------------------------------------------------


def cpu_seconds():
    """This process's user + system CPU time (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pull(iterator, seconds):
    """Pulls (features, labels) batches from iterator for `seconds` of wall time. Returns {"batches",
    "sequences", "wall_s", "cpu_s", "mean_length" (of the cut batches)}."""
    batches = sequences = length = 0
    cpu, start = cpu_seconds(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        features, _ = next(iterator)
        batches, sequences = batches + 1, sequences + features["input_ids"].shape[0]
        length += features["input_ids"].shape[1]
    wall = time.perf_counter() - start
    return {"batches": batches, "sequences": sequences, "wall_s": wall, "cpu_s": cpu_seconds() - cpu,
            "mean_length": length / max(batches, 1)}


def threads(action):
    """action(thread id) for every thread of this process (one that ends meanwhile is skipped)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            action(int(tid))


def threads_cpus():
    """The CPUs any thread of this process may run on (the union of their affinities)."""
    cpus = set()
    threads(lambda tid: cpus.update(os.sched_getaffinity(tid)))
    return sorted(cpus)


def run_child(args):
    """The --child: one pipeline pinned to its cores; reports pull()'s result with sequences_per_s, cpu_per_wall, the
    CPUs it was pinned to and those its threads could use at the end."""
    shape, masking, cores = args.child.split(":")
    (seq, batch), cores = (int(n) for n in shape.split("x")), int(cores)
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    # Every thread already there (NumPy's OpenBLAS pool, started by `import measure`) and, before TensorFlow starts
    # any, the main thread, whose mask every later thread inherits.
    threads(lambda tid: os.sched_setaffinity(tid, cpus))
    os.environ["TF_NUM_INTRAOP_THREADS"] = os.environ["TF_NUM_INTEROP_THREADS"] = str(cores)
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.tasks import pretraining, runner

    task = pretraining.PretrainingTask(os.path.join(args.records_dir, "wiki-*"), PREDICTIONS[seq],
                                       dynamic_masking=masking == "dynamic")
    run = runner.RunConfig(bert_config_file=args.bert_config_file, vocab_file=VOCAB, output_dir=args.work_dir,
                           max_seq_length=seq, do_train=True)
    task.read_inputs(run, BertConfig.from_json_file(args.bert_config_file))
    context = tf.distribute.InputContext(num_replicas_in_sync=args.replicas)
    one_worker = types.SimpleNamespace(worker_index=0, num_workers=1)  # what train_data reads of its Trainer
    iterator = iter(task.train_data(run, None, one_worker).dataset_fn(batch, context, SEED))
    pull(iterator, args.warmup_s)
    result = pull(iterator, args.seconds)
    measure.emit_result({**result, "cpus": cpus, "threads_cpus": threads_cpus(),
                         "sequences_per_s": result["sequences"] / result["wall_s"],
                         "cpu_per_wall": result["cpu_s"] / result["wall_s"]})


def measure_pipelines(args, records):
    """Runs a child for every config, masking and core count. Returns the rows."""
    rows = []
    for seq, batch in args.configs:
        for masking in args.masking:
            for cores in args.cores:
                child = f"{seq}x{batch}:{masking}:{cores}"
                cmd = [sys.executable, os.path.abspath(__file__), f"--child={child}", f"--warmup_s={args.warmup_s}",
                       f"--seconds={args.seconds}", f"--replicas={args.replicas}",
                       f"--bert_config_file={args.bert_config_file}", f"--work_dir={args.work_dir}",
                       f"--records_dir={os.path.dirname(records[seq][0][0])}"]
                result = measure.child_result(measure.run_child(cmd, args.work_dir, child.replace(":", "_")))
                rows.append({"seq": seq, "batch": batch, "replicas": args.replicas, "masking": masking,
                             "cores": cores, **result})
                print(f"  {child}: {result['sequences_per_s']:,.0f} sequences/s, {result['cpu_per_wall']:.2f} "
                      f"cores busy, load {result['load']:.2f}", flush=True)
    return rows


# --- on paper --------------------------------------------------------------------------------------------------------


def cores_needed(per_core, gpus, gpu_rate, margin):
    """{"demand": sequences/s of `gpus` accelerators, "cores": [demand / r for each per-core rate r of `per_core`],
    "with_margin": the largest of those x margin, rounded up to whole cores}."""
    demand = gpus * gpu_rate
    cores = [demand / rate for rate in per_core]
    return {"demand": demand, "cores": cores, "with_margin": math.ceil(max(cores) * margin)}


def host_rows(args, rows):
    """The on-paper rows: for each max_seq_length and masking measured on 1 core at the proxy's batch, the cores a
    --gpus host needs at that core's rate and, where 2 cores were measured, at their rate per core."""
    rates = {128: args.gpu_rate_128, 512: args.gpu_rate_512}
    out = []
    for r in rows:
        if r["cores"] != 1 or r["batch"] != PROXY_BATCH[r["seq"]]:
            continue
        two = [t["sequences_per_s"] for t in rows if (t["seq"], t["batch"], t["masking"], t["cores"]) ==
               (r["seq"], r["batch"], r["masking"], 2)]
        per_core = [r["sequences_per_s"]] + [rate / 2 for rate in two]
        out.append({"seq": r["seq"], "batch": r["batch"], "masking": r["masking"], "one_core": r["sequences_per_s"],
                    "two_cores": two[0] if two else None, "gpu_rate": rates[r["seq"]],
                    **cores_needed(per_core, args.gpus, rates[r["seq"]], args.margin)})
    return out


# --- checkpoints -----------------------------------------------------------------------------------------------------


def disk_bytes(paths):
    """(bytes, bytes allocated on disk) of the files."""
    stats = [os.stat(p) for p in paths]
    return sum(s.st_size for s in stats), sum(s.st_blocks * 512 for s in stats)


def float_tensors(prefix):
    """(number of values, bytes) of the floating-point tensors of a checkpoint: the weights, and in a training
    checkpoint the optimizer's moments too (its other tensors: the step, seeds, the input iterator's state)."""
    import numpy as np
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    sizes = {name: int(np.prod(shape)) for name, shape in reader.get_variable_to_shape_map().items()
             if dtypes[name].is_floating}
    return sum(sizes.values()), sum(size * dtypes[name].size for name, size in sizes.items())


def checkpoint_sizes(args, records):
    """Runs run_pretraining.py for one step on --bert_config_file with --save_original_checkpoint (see the module
    docstring) and returns the sizes of its checkpoints."""
    os.makedirs(args.work_dir, exist_ok=True)
    out = tempfile.mkdtemp(prefix="checkpoints_", dir=args.work_dir)
    try:
        measure.run_child([sys.executable, RUN_PRETRAINING, f"--bert_config_file={args.bert_config_file}",
                           f"--input_file={','.join(records)}", f"--output_dir={out}/run", "--do_train",
                           "--train_batch_size=1", "--max_seq_length=128", "--max_predictions_per_seq=20",
                           "--num_train_steps=1", "--num_warmup_steps=0", "--save_checkpoints_steps=1",
                           "--iterations_per_loop=1", "--save_original_checkpoint"], args.work_dir, "checkpoints")
        result = {}
        for name, prefix in (("training", f"{out}/run/ckpt-1"), ("original", f"{out}/run/original/bert_model.ckpt")):
            directory = os.path.dirname(prefix)
            files = [os.path.join(directory, f) for f in os.listdir(directory)
                     if f.startswith(os.path.basename(prefix) + ".")]
            size, allocated = disk_bytes(files)
            values, value_bytes = float_tensors(prefix)
            result[name] = {"files": sorted(os.path.basename(f) for f in files), "bytes": size,
                            "allocated_bytes": allocated, "float_values": values, "float_bytes": value_bytes}
        return result
    finally:
        shutil.rmtree(out)


# --- the report ------------------------------------------------------------------------------------------------------


def print_report(args, rows, hosts, checkpoints, session):
    gib = 2 ** 30
    print(f"\n{measure.describe_machine(session['machine'])}, {session['date']}, load average "
          f"{session['loads'][0]:.2f} at the start, {session['loads'][1]:.2f} at the end\n")
    print("Records: " + "; ".join(f"{seq}: {n:,} sequences in {files} files" for seq, (files, n) in
                                  session["records"].items()) + f" (--dupe_factor {args.dupe_factor}); each "
          f"pipeline feeds {args.replicas} replica(s), batch = per replica\n")
    print(measure.markdown_table(
        ["seq x batch", "masking", "cores", "sequences/s", "per core", "CPU / wall", "per CPU second",
         "mean cut length", "load"],
        [[f"{r['seq']} x {r['batch']}", r["masking"], str(r["cores"]), f"{r['sequences_per_s']:,.0f}",
          f"{r['sequences_per_s'] / r['cores']:,.0f}", f"{r['cpu_per_wall']:.2f}",
          f"{r['sequences'] / r['cpu_s']:,.0f}", f"{r['mean_length']:.1f}", f"{r['load']:.2f}"] for r in rows],
        "llrrrrrrr"))
    unpinned = [r for r in rows if r["threads_cpus"] != r["cpus"]]
    if unpinned:
        print(f"\nWARNING: {len(unpinned)} pipelines had threads that could run on other CPUs than their own.")
    shared = [r for r in rows if r["cpu_per_wall"] < 0.9 * r["cores"]]
    if shared:
        print(f"\nNOTE: {len(shared)} of {len(rows)} pipelines kept less than 90% of their cores busy (CPU / wall): "
              f"the pipeline could not use them all, or other work shared them (see the load at each start).")
    if hosts:
        print(f"\nCores for {args.gpus} accelerators at the GPU proxy's rates (jaxlib's XLA on an H200, not TensorFlow "
              f"on a GPU; issue 40, item 8), x {args.margin:g} margin:\n")
        print(measure.markdown_table(
            ["seq x batch", "masking", "1 core, seq/s", "2 cores, seq/s", "accelerator seq/s",
             f"{args.gpus} accelerators, seq/s", "cores at 1 core's rate", "cores at 2 cores' rate per core",
             f"the larger x {args.margin:g}"],
            [[f"{h['seq']} x {h['batch']}", h["masking"], f"{h['one_core']:,.0f}",
              "-" if h["two_cores"] is None else f"{h['two_cores']:,.0f}", f"{h['gpu_rate']:,.0f}",
              f"{h['demand']:,.0f}", f"{h['cores'][0]:.2f}", f"{h['cores'][1]:.2f}" if len(h["cores"]) > 1 else "-",
              str(h["with_margin"])] for h in hosts], "llrrrrrrr"))
    if checkpoints:
        parameters = checkpoints["original"]["float_values"]
        print(f"\nCheckpoints of {os.path.relpath(args.bert_config_file, measure.REPO)} ({parameters:,} parameters, "
              f"the original release's float values):\n")
        print(measure.markdown_table(
            ["checkpoint", "bytes", "GiB", "GiB on disk", "float values", "float values / parameters",
             "bytes / (4 x parameters)"],
            [[name, f"{c['bytes']:,}", f"{c['bytes'] / gib:.2f}", f"{c['allocated_bytes'] / gib:.2f}",
              f"{c['float_values']:,}", f"{c['float_values'] / parameters:.3f}",
              f"{c['bytes'] / (4 * parameters):.4f}"] for name, c in checkpoints.items()], "lrrrrrr"))


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return run_child(args)
    records = {seq: make_records(args, seq) for seq in sorted({seq for seq, _ in args.configs} | {128})}
    loads = [measure.loadavg()]
    rows = measure_pipelines(args, records)
    loads.append(measure.loadavg())
    hosts = host_rows(args, rows)
    checkpoints = None if args.skip_checkpoints else checkpoint_sizes(args, records[128][0])
    session = {"machine": measure.machine_info(), "date": str(datetime.date.today()), "loads": loads,
               "records": {seq: (len(files), n) for seq, (files, n) in records.items()}}
    print_report(args, rows, hosts, checkpoints, session)
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "hosts": hosts, "checkpoints": checkpoints, **session},
                           internal=("child", "records_dir"))
    return 0


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults, for this process and its children)
    main()
