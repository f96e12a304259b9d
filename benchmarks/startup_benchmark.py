r"""What a training start reads to fingerprint its training data (issue 40, item 5): bert_tf.tasks.run_record's
`fingerprint` (run_pretraining's `data_fingerprint` of run_settings.json), against the rule issue 40 replaced, on
--shards files of --shard_mib MiB.

- new: `run_record.fingerprint`: each local file's size and its first, middle and last 64 KiB, a URL's size and
  modification time (its metadata), 16 files at a time; every worker fingerprints every file (the workers compare
  their fingerprints before the first update).
- old: the rule before issue 40, copied below as `old_fingerprint` (a reference only: the library no longer has it;
  from `git show 6972a5a:bert_tf/data/fileio.py`): every file up to 64 MiB hashed whole, larger ones by their first,
  middle and last MiB, and every worker hashed every file. --old_shards N measures it on the first N files only and
  scales the time and bytes by --shards / N (marked "extrapolated" in the table).

Each rule is measured twice in a row, in this process: "first" right after this benchmark's files are dropped from
the page cache (posix_fadvise DONTNEED on each file: no root needed, nothing else's cache is touched), "again" from
the page cache. Bytes read: /proc/self/io's `rchar` (what read() returned: the bytes the rule reads, wherever they
come from); from disk: its `read_bytes` (what the block device delivered: 0 from the page cache).

The files (kept in --work_dir; a rerun reuses them):
- sparse (default): made by truncate, they take no disk space, so 1,000 x 64 MiB fit on any disk. Reading a hole
  gives zeros from memory: nothing comes from disk and the time is the CPU's alone (system calls and hashing), a
  lower bound for any storage. The bytes a start reads are exact either way.
- --dense: random bytes, written once (count x size must fit the disk); "first" then reads from the disk (on a
  virtual disk the host may still cache it), which tells what the old rule's whole-file reads cost from storage.

--gcs N: also both rules on N objects of --shard_mib MiB (random bytes) on gs://, through TensorFlow's own GCS client
in a child process and the loopback emulator of tests/gcs_emulator.py (in memory: N x --shard_mib must fit in RAM).
Bytes: what the client fetched, summed from its log (TF_CPP_VMODULE=gcs_file_system=1: "Successful read of <path> @
<offset> of size: <n>"; a socket read is not in `rchar`); with TensorFlow's default read block and with
GCS_READ_CACHE_BLOCK_SIZE_MB=1.

  python benchmarks/startup_benchmark.py --shards 1000 --shard_mib 64 --old_shards 1000   # 3 min
  python benchmarks/startup_benchmark.py --shards 100 --shard_mib 64 --dense --old_shards 100
  python benchmarks/startup_benchmark.py --shards 8 --shard_mib 64 --old_shards 8 --gcs 4
"""
import argparse
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import measure

OLD_WHOLE_BYTES = 64 << 20  # the old rule hashed files up to this size whole
OLD_SAMPLE_BYTES = 1 << 20  # and larger ones by their first, middle and last this many bytes
WRITE_CHUNK = 8 << 20
GCS_READ = re.compile(r"Successful read of \S+ @ \d+ of size: (\d+)")  # TensorFlow's GCS client, VLOG(1)
GCS_BLOCKS = (None, "1")  # GCS_READ_CACHE_BLOCK_SIZE_MB: TensorFlow's default, then 1 MiB


def old_fingerprint(paths):
    """REFERENCE ONLY, for the before/after figure: bert_tf's fingerprint as it was at 6972a5a (before issue 40),
    through the same public fileio calls. A SHA-256 hex digest of each file's size and content; files over 64
    MiB by their first, middle and last MiB."""
    from bert_tf import fileio

    digest = hashlib.sha256()
    for path in paths:
        size = fileio.stat(path)[0]
        digest.update(f"{size}\n".encode())
        whole = size <= OLD_WHOLE_BYTES
        samples = [(0, size)] if whole else [(offset, OLD_SAMPLE_BYTES) for offset in
                                             (0, (size - OLD_SAMPLE_BYTES) // 2, size - OLD_SAMPLE_BYTES)]
        with fileio.open_file(path, "rb", name="") as f:
            for offset, length in samples:
                f.seek(offset)
                while length > 0:
                    chunk = f.read(min(length, OLD_SAMPLE_BYTES))
                    if not chunk:
                        break
                    digest.update(chunk)
                    length -= len(chunk)
    return digest.hexdigest()


def is_sparse(path):
    """Whether the file takes less disk space than its size (a truncate'd file takes none)."""
    st = os.stat(path)
    return st.st_blocks * 512 < st.st_size


def make_shards(directory, count, size, dense=False):
    """The paths of `count` files directory/shard-NNNNN of `size` bytes: sparse (truncate), or random bytes if
    `dense`. A file already there with that size and kind is kept. ValueError if dense files would not fit."""
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"shard-{i:05d}") for i in range(count)]
    todo = [p for p in paths if not (os.path.isfile(p) and os.path.getsize(p) == size and is_sparse(p) != dense)]
    if dense and len(todo) * size > shutil.disk_usage(directory).free - (1 << 30):
        raise ValueError(f"--dense: {len(todo)} files of {size >> 20} MiB do not fit in {directory} with 1 GiB to "
                         f"spare; give fewer --shards, a smaller --shard_mib, or another --work_dir.")
    for path in todo:
        with open(path, "wb") as f:
            f.truncate(0 if dense else size)
            for start in range(0, size if dense else 0, WRITE_CHUNK):
                f.write(os.urandom(min(WRITE_CHUNK, size - start)))
    return paths


def drop_cached(paths):
    """Drops the files' pages from the page cache (written back first), so that the next read comes from disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def parse_io(text):
    """A /proc/<pid>/io text -> {field: int}."""
    return {key.strip(): int(value) for key, _, value in (line.partition(":") for line in text.splitlines()) if value}


def io_counters():
    """This process's /proc/self/io counters."""
    with open("/proc/self/io", encoding="ascii") as f:
        return parse_io(f.read())


def measured(fingerprint, paths):
    """{"seconds", "bytes_read", "disk_bytes"} of one call fingerprint(paths): wall time and the growth of this
    process's /proc/self/io `rchar` and `read_bytes` (the few hundred bytes of reading /proc/self/io itself
    included)."""
    before, start = io_counters(), time.perf_counter()
    fingerprint(paths)
    seconds, after = time.perf_counter() - start, io_counters()
    return {"seconds": seconds, "bytes_read": after["rchar"] - before["rchar"],
            "disk_bytes": after["read_bytes"] - before["read_bytes"]}


def measure_rule(name, fingerprint, files, storage, scale=1.0):
    """Rows for one rule hashing the local `files`, first from disk and then again from the page cache; time and
    bytes multiplied by `scale` (an extrapolation when not 1)."""
    drop_cached(files)
    rows = []
    for run in ("first", "again"):
        result = measured(fingerprint, files)
        rows.append({"rule": name, "storage": storage, "files": round(len(files) * scale),
                     "measured_files": len(files), "run": run, "extrapolated": scale != 1.0,
                     **{key: value * scale for key, value in result.items()}})
    return rows


def gcs_fetched_bytes(log):
    """The bytes TensorFlow's GCS client fetched, from its gcs_file_system VLOG(1) lines in `log`."""
    return sum(int(size) for size in GCS_READ.findall(log))


def measure_gcs(count, size, work_dir):
    """Rows for both rules on `count` objects of `size` random bytes on gs:// (the module docstring's --gcs)."""
    sys.path.insert(0, os.path.join(measure.REPO, "tests"))
    from gcs_emulator import GcsEmulator

    rows = []
    with GcsEmulator() as gcs:
        paths = [f"{gcs.url}/shard-{i:05d}" for i in range(count)]
        for path in paths:
            gcs.upload(path[len(gcs.url) + 1:], os.urandom(size))
        for rule in ("new", "old"):
            for block in GCS_BLOCKS:
                env = {**os.environ, **gcs.env, "PYTHONPATH": measure.REPO, "TF_CPP_MIN_LOG_LEVEL": "0",
                       "TF_CPP_VMODULE": "gcs_file_system=1"}
                if block:
                    env["GCS_READ_CACHE_BLOCK_SIZE_MB"] = block
                child = subprocess.run([sys.executable, os.path.abspath(__file__), f"--gcs_child={rule}", *paths],
                                       env=env, capture_output=True, text=True, cwd=work_dir)
                if child.returncode:
                    raise RuntimeError(f"the gs:// child failed:\n{child.stderr[-3000:]}")
                seconds = float(child.stdout.split()[-1])
                storage = f"gs://, {block} MiB blocks" if block else "gs://, TensorFlow's default blocks"
                rows.append({"rule": rule, "storage": storage, "files": count, "measured_files": count,
                             "run": "first", "extrapolated": False, "seconds": seconds,
                             "bytes_read": gcs_fetched_bytes(child.stderr), "disk_bytes": None})
    return rows


def gcs_child(rule, paths):
    """The --gcs_child: prints the seconds of one fingerprint of `paths` (after the client's set-up)."""
    from bert_tf import fileio
    from bert_tf.tasks import run_record

    fileio.stat(paths[0])  # the GCS client's set-up, outside the time (it logs no read)
    start = time.perf_counter()
    (run_record.fingerprint if rule == "new" else old_fingerprint)(paths)
    print(time.perf_counter() - start)


def table(rows):
    """The rows as a markdown table."""
    cells = [[r["rule"], r["storage"],
              f"{r['files']:,}" + (f" (from {r['measured_files']:,})" if r["extrapolated"] else ""),
              r["run"] + (", extrapolated" if r["extrapolated"] else ""), f"{r['seconds']:.3f}",
              f"{r['bytes_read'] / 2 ** 20:,.1f}", f"{r['bytes_read'] / 1024 / r['files']:,.0f}",
              "-" if r["disk_bytes"] is None else f"{r['disk_bytes'] / 2 ** 20:,.1f}"] for r in rows]
    return measure.markdown_table(["rule", "storage", "files hashed by each worker", "run", "seconds", "MiB read",
                                   "KiB read per file", "MiB from disk"], cells, "llrlrrrr")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--shards", type=int, default=1000, help="Training files.")
    p.add_argument("--shard_mib", type=int, default=64, help="Size of each file in MiB.")
    p.add_argument("--old_shards", type=int, default=None,
                   help="Measure the old rule on this many of the files and extrapolate to --shards (0: skip it; "
                        "default: 100 or --shards if fewer).")
    p.add_argument("--dense", action="store_true", help="Random bytes instead of sparse files (see above).")
    p.add_argument("--work_dir", default="/tmp/startup_benchmark")
    p.add_argument("--gcs", type=int, default=0, help="Also measure on this many gs:// objects (see above).")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--gcs_child", default=None, help=argparse.SUPPRESS)  # internal: a rule, with paths
    p.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.gcs_child:
        return gcs_child(args.gcs_child, args.paths)
    args.old_shards = min(100, args.shards) if args.old_shards is None else args.old_shards
    if not 0 <= args.old_shards <= args.shards:
        p.error(f"--old_shards must be in [0, --shards={args.shards}], got {args.old_shards}")

    from bert_tf.tasks import run_record

    kind = "dense" if args.dense else "sparse"
    files = make_shards(os.path.join(args.work_dir, f"{kind}_{args.shard_mib}mib"), args.shards,
                        args.shard_mib << 20, args.dense)
    load = [measure.loadavg()]
    rows = measure_rule("new", run_record.fingerprint, files, kind)
    if args.old_shards:
        rows += measure_rule("old", old_fingerprint, files[:args.old_shards], kind, args.shards / args.old_shards)
    drop_cached(files)  # leave the page cache to others
    if args.gcs:
        rows += measure_gcs(args.gcs, args.shard_mib << 20, args.work_dir)
    load.append(measure.loadavg())
    mach = measure.machine_info()
    print(f"{measure.describe_machine(mach)}, {datetime.date.today()}, load average {load[0]:.2f} at the start, "
          f"{load[1]:.2f} at the end; {args.shards:,} {kind} files of {args.shard_mib} MiB in {args.work_dir}\n")
    print(table(rows))
    if args.json:
        measure.write_json(args.json, args, {"rows": rows, "loads": load, "machine": mach,
                                             "date": str(datetime.date.today())},
                           internal=("gcs_child", "paths"))


if __name__ == "__main__":
    from bert_tf import script_setup  # noqa: F401  (the scripts' TensorFlow defaults)
    main()
