"""Fast mode of create_pretraining_data: the corpus cut into shards of documents, one worker process per core.

A pre-pass finds document boundaries; each shard of `shard_size` documents runs the exact algorithm
(`bert_tf.data.pretraining.instances`) with its own seed (`shard_seed`) into
`<output_file>-<shard:05d>-of-<num_shards:05d>`. A document reaching MAX_DOCUMENT_BYTES is cut at a line, with a
warning. A rerun skips finished shards (`<output_file>.shards.json`). Unlike exact mode, the random next segment and the
instance shuffle are per shard, and every input file and cut ends a document.
"""
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import random

from absl import logging

from bert_tf import fileio
from bert_tf.data.pretraining import instances, wire
from bert_tf.text import tokenization


def shard_seed(random_seed, shard_index):
    """Seed of shard `shard_index`: the first 8 bytes (big-endian) of sha256("<random_seed>:<shard_index>")."""
    digest = hashlib.sha256(f"{random_seed}:{shard_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


SHARD_SIZE = 1000  # documents per shard, by default

# A document this long is cut before its next line, so a shard's memory is bounded whatever the corpus.
MAX_DOCUMENT_BYTES = 16 << 20


def plan_shards(input_files, shard_size):
    """Pre-pass: the shards of `shard_size` documents, each a list of (path, start_byte, end_byte). A document is a run
    of non-blank lines; files and cuts end one."""
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1; got {shard_size}.")
    shards = []
    current = []          # ranges of the shard being built
    docs_in_shard = 0
    for path in input_files:
        offset = 0
        range_start = None  # start of this file's range in the current shard
        doc_start = None    # start of the document being read (None between documents)
        warned = False
        with fileio.open_file(path, "rb") as reader:
            for raw in reader:
                if not instances.line_text(raw):
                    doc_start = None
                elif doc_start is None or offset - doc_start >= MAX_DOCUMENT_BYTES:  # a document starts here
                    cut = doc_start is not None
                    if cut and not warned:
                        logging.warning("%s: a document (from byte %d) reaches %d bytes without a blank line; it is "
                                        "cut into documents of about that size (blank lines separate documents).",
                                        path, doc_start, MAX_DOCUMENT_BYTES)
                        warned = True
                    if docs_in_shard == shard_size or cut:
                        if range_start is not None:
                            current.append((path, range_start, offset))
                        shards.append(current)
                        current, docs_in_shard, range_start = [], 0, None
                    if range_start is None:
                        range_start = offset
                    docs_in_shard += 1
                    doc_start = offset
                offset += len(raw)
        if range_start is not None:
            current.append((path, range_start, offset))
    if current:
        shards.append(current)
    return shards


def make_config(vocab_file, output_file=None, **options):
    """The per-shard settings (`instances.Options` as a JSON-comparable dict), after the checks made before any work:
    valid options, a vocab with [CLS]/[SEP]/[MASK], one writable output prefix."""
    options = instances.Options(vocab_file, **options)
    if output_file is not None:
        if "," in output_file:
            raise ValueError("A sharded run writes one set of shards: give output_file a single path prefix.")
        fileio.check_writable([output_file])
    instances.VocabTables(tokenization.load_vocab(vocab_file), vocab_file)
    return dataclasses.asdict(dataclasses.replace(options, vocab_file=fileio.absolute(vocab_file)))


@functools.lru_cache(maxsize=1)  # one per worker process
def _tokenizer(vocab_file, do_lower_case):
    return tokenization.FullTokenizer(vocab_file, do_lower_case)


class RangeReader:
    """Reads byte ranges of the input in plan order, one open file at a time, reading on within a file, so a compressed
    file is decompressed once per reader."""

    def __init__(self):
        self._path = self._file = None

    def read(self, path, start, end):
        if path != self._path:
            self.close()
            self._file, self._path = fileio.open_file(path, "rb"), path
        self._file.seek(start)
        return self._file.read(end - start)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._path = self._file = None


def shard_examples(index, ranges, config, reader=None):
    """The serialized examples of shard `index` (byte `ranges`), in written order."""
    if reader is None:
        with contextlib.closing(RangeReader()) as reader:
            return shard_examples(index, ranges, config, reader)
    tokenizer = _tokenizer(config["vocab_file"], config["do_lower_case"])
    documents = [[]]
    for path, start, end in ranges:
        instances.documents_from_lines(reader.read(path, start, end).split(b"\n"), tokenizer, documents)
        documents.append([])  # a file range always ends a document
    documents = [d for d in documents if d]
    if not documents:
        return []
    rng = random.Random(shard_seed(config["random_seed"], index))
    return instances.create_training_instances(
        None, tokenizer, config["max_seq_length"], config["dupe_factor"], config["short_seq_prob"],
        config["masked_lm_prob"], config["max_predictions_per_seq"], rng, config["do_whole_word_mask"],
        documents=documents)


def runs(shards, readers):
    """`shards` [(index, ranges, path)] cut into runs a worker makes in one pass, largest first: each shard alone, but a
    compressed file's consecutive shards form at most `readers` runs (decompressed at most `readers` times)."""
    groups = []  # [compressed file or None, its consecutive shards]
    for shard in shards:
        key = next((path for path, _, _ in shard[1] if path.endswith(fileio.COMPRESSED_SUFFIXES)), None)
        if key is not None and groups and groups[-1][0] == key:
            groups[-1][1].append(shard)
        else:
            groups.append([key, [shard]])
    cut = []
    for key, group in groups:
        parts = len(group) if key is None else min(readers, len(group))
        cut += [group[i * len(group) // parts:(i + 1) * len(group) // parts] for i in range(parts)]
    return sorted(cut, key=lambda run: -sum(end - start for shard in run for _, start, end in shard[1]))


def process_run(task):
    """Pool worker: writes the shards of a run (`runs`) in one pass -> (shards, examples written)."""
    run, config = task
    written = 0
    with contextlib.closing(RangeReader()) as reader:
        for index, ranges, path in run:
            serialized = shard_examples(index, ranges, config, reader)
            wire.write_examples(serialized, [path], config["gzip"])
            written += len(serialized)
    return len(run), written


def plan(input_files, output_file, shard_size):
    """[(index, ranges, shard path)] of `input_files`."""
    planned = plan_shards(input_files, shard_size)
    if not planned:
        raise ValueError(f"No text in the input files {', '.join(input_files)}: every line is blank.")
    return [(i, ranges, f"{output_file}-{i:05d}-of-{len(planned):05d}") for i, ranges in enumerate(planned)]


def input_record(input_files):
    """[path, size, modification time] of each input, by which a rerun tells a changed corpus."""
    return [[path, *fileio.stat(path)] for path in input_files]


def check_manifest(manifest, record):
    """Writes `record` to `manifest`, or refuses a rerun whose record differs."""
    if fileio.exists(manifest):
        previous = fileio.read_json(manifest, "shard manifest")
        if previous != json.loads(json.dumps(record)):
            raise ValueError(f"{manifest} records other settings or inputs than this run; delete the earlier "
                             "shards and that file to start again.")
        return
    with fileio.atomic_write(manifest) as f:
        json.dump(record, f, indent=1, sort_keys=True)


def _process_in_pool(tasks, num_workers, progress, total):
    """Runs `process_run` over `tasks` in worker processes; returns the examples written."""
    import multiprocessing
    import sys

    from tqdm import tqdm

    method = "fork" if ("fork" in multiprocessing.get_all_start_methods()
                        and "tensorflow" not in sys.modules) else "spawn"
    written = 0
    with multiprocessing.get_context(method).Pool(min(num_workers, len(tasks))) as pool, \
            tqdm(total=total, initial=total - sum(len(run) for run, _ in tasks), unit="shard",
                 disable=not progress, desc="pretraining data") as bar:
        for shards_made, count in pool.imap_unordered(process_run, tasks):
            written += count
            bar.update(shards_made)
            bar.set_postfix(examples=written)
    return written


def run_sharded(input_file, output_file, vocab_file, num_workers=None, shard_size=SHARD_SIZE, progress=True,
                **options):
    """Fast mode (`options`: `instances.Options`' fields; `output_file`: the shards' prefix). Removes killed runs'
    temporaries first; refuses a rerun with other settings or inputs. Returns (shard paths, examples written in this
    run, shards skipped)."""
    config = make_config(vocab_file, output_file, **options)
    input_files = fileio.expand_patterns(input_file)
    instances.remove_leftovers([output_file])
    planned = plan(input_files, output_file, shard_size)
    check_manifest(output_file + fileio.SHARDS_MANIFEST_SUFFIX, dict(
        config, shard_size=shard_size, num_shards=len(planned), inputs=input_record(input_files)))
    todo = [shard for shard in planned if not fileio.exists(shard[2])]
    skipped = len(planned) - len(todo)
    if skipped:
        logging.info("Resuming: %d of %d shards are already complete.", skipped, len(planned))
    num_workers = num_workers or os.cpu_count() or 1
    tasks = [(run, config) for run in runs(todo, num_workers)]
    written = _process_in_pool(tasks, num_workers, progress, len(planned)) if tasks else 0
    logging.info("Wrote %d examples in %d shards (%d skipped as complete).", written, len(todo), skipped)
    return [path for _, _, path in planned], written, skipped
