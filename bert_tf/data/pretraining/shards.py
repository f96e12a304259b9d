"""Fast mode of create_pretraining_data: the corpus cut into shards of documents, one worker process per core.

A pre-pass over the text finds document boundaries (no tokenization); each shard of `shard_size` documents is
processed by a worker with the exact algorithm (`bert_tf.data.pretraining.instances`) on just that shard, with
its own seed, and written to its own file `<output_file>-<shard:05d>-of-<num_shards:05d>`. Memory is bounded by
the shard size; finished shards are skipped on a rerun (the settings are kept in `<output_file>.shards.json`; a
rerun with other settings or inputs is refused). Shards are started largest first; the output does not depend on
that. Differences from exact mode: a random-next B segment (NSP) is drawn from a document of the same shard, the
instance shuffle is per shard, and every input file ends a document. Seed of shard `i`:
`random.Random(shard_seed(random_seed, i))` with
`shard_seed(s, i) = int.from_bytes(sha256(f"{s}:{i}".encode()).digest()[:8], "big")`.
"""
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


def plan_shards(input_files, shard_size):
    """Pre-pass (no tokenization): cuts the text into shards of `shard_size` documents.

    A document is a run of non-blank lines; files always end a document. Returns a list of shards, each a
    list of (path, start_byte, end_byte) ranges. Memory: O(number of shards).
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1; got {shard_size}.")
    shards = []
    current = []          # ranges of the shard being built
    docs_in_shard = 0
    for path in input_files:
        offset = 0
        range_start = None  # start of this file's range in the current shard
        in_doc = False
        with fileio.open_file(path, "rb") as reader:
            for raw in reader:
                blank = not instances.line_text(raw)
                if not blank and not in_doc:
                    # a document starts here
                    if docs_in_shard == shard_size:
                        if range_start is not None:
                            current.append((path, range_start, offset))
                        shards.append(current)
                        current, docs_in_shard, range_start = [], 0, None
                    if range_start is None:
                        range_start = offset
                    docs_in_shard += 1
                    in_doc = True
                elif blank:
                    in_doc = False
                offset += len(raw)
        if range_start is not None:
            current.append((path, range_start, offset))
    if current:
        shards.append(current)
    return shards


def shard_path(output_file, index, num_shards):
    return f"{output_file}-{index:05d}-of-{num_shards:05d}"


def make_config(vocab_file, do_lower_case=True, do_whole_word_mask=False, max_seq_length=128,
                max_predictions_per_seq=20, random_seed=12345, dupe_factor=10, masked_lm_prob=0.15,
                short_seq_prob=0.1, gzip=False, output_file=None):
    """The per-shard settings a worker needs (plain values, so that they pickle and compare as JSON), after the
    checks a sharded run makes before any work: valid settings, a vocab with [CLS]/[SEP]/[MASK] and, when
    `output_file` is given, a single writable output prefix."""
    instances.check_flags(max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor, short_seq_prob)
    if output_file is not None:
        if "," in output_file:
            raise ValueError("A sharded run writes one set of shards: give output_file a single path prefix.")
        fileio.check_writable([output_file])
    instances.VocabTables(tokenization.load_vocab(vocab_file), vocab_file)
    return dict(vocab_file=fileio.absolute(vocab_file),
                do_lower_case=bool(do_lower_case), do_whole_word_mask=bool(do_whole_word_mask),
                max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                random_seed=random_seed, dupe_factor=dupe_factor, masked_lm_prob=masked_lm_prob,
                short_seq_prob=short_seq_prob, gzip=bool(gzip))


_WORKER = {}


def worker_state(config):
    """(FullTokenizer, VocabTables) of `config`, built once per worker process."""
    key = (config["vocab_file"], config["do_lower_case"])
    if _WORKER.get("key") != key:
        tokenizer = tokenization.FullTokenizer(config["vocab_file"], config["do_lower_case"])
        tables = instances.VocabTables(tokenizer.vocab, tokenizer.vocab_file)
        _WORKER.update(key=key, tokenizer=tokenizer, tables=tables)
    return _WORKER["tokenizer"], _WORKER["tables"]


def read_ranges(ranges, tokenizer):
    """The documents (lists of sentences of token ids) in byte `ranges` [(path, start, end)] of the input."""
    documents = [[]]
    for path, start, end in ranges:
        with fileio.open_file(path, "rb") as reader:
            reader.seek(start)
            data = reader.read(end - start)
        instances.documents_from_lines(data.split(b"\n"), tokenizer, documents)
        documents.append([])  # a file range always ends a document
    return [d for d in documents if d]


def shard_examples(index, ranges, config):
    """The serialized examples of shard `index` (its byte `ranges` of the input), in their written order."""
    tokenizer, _ = worker_state(config)
    documents = read_ranges(ranges, tokenizer)
    if not documents:
        return []
    rng = random.Random(shard_seed(config["random_seed"], index))
    return instances.create_training_instances(
        None, tokenizer, config["max_seq_length"], config["dupe_factor"], config["short_seq_prob"],
        config["masked_lm_prob"], config["max_predictions_per_seq"], rng, config["do_whole_word_mask"],
        documents=documents)


def process_shard(task):
    """Worker: makes and writes one shard. `task`: (index, ranges, path, config). Returns (index, count,
    bytes of text)."""
    index, ranges, path, config = task
    serialized = shard_examples(index, ranges, config)
    wire.write_examples(serialized, [path], config["gzip"])
    return index, len(serialized), sum(end - start for _, start, end in ranges)


def plan(input_files, output_file, shard_size=1000):
    """The shards of `input_files` (a list of paths): a list of (index, ranges, shard path)."""
    planned = plan_shards(input_files, shard_size)
    if not planned:
        raise ValueError(f"No text in the input files {', '.join(input_files)}: every line is blank.")
    return [(i, ranges, shard_path(output_file, i, len(planned))) for i, ranges in enumerate(planned)]


def check_manifest(manifest, record):
    """Writes `record` (the run's settings and inputs) to `manifest`, or refuses a rerun whose record differs."""
    if fileio.exists(manifest):
        previous = fileio.read_json(manifest, "shard manifest")
        if previous != json.loads(json.dumps(record)):
            raise ValueError(f"{manifest} records other settings or inputs than this run; delete the earlier "
                             "shards and that file to start again.")
        return
    with fileio.atomic_write(manifest) as f:
        json.dump(record, f, indent=1, sort_keys=True)


def _process_in_pool(tasks, num_workers, progress, total):
    """Runs `process_shard` over `tasks` in worker processes; returns the examples written."""
    import multiprocessing
    import sys

    from tqdm import tqdm

    method = "fork" if ("fork" in multiprocessing.get_all_start_methods()
                        and "tensorflow" not in sys.modules) else "spawn"
    written = 0
    with multiprocessing.get_context(method).Pool(min(num_workers, len(tasks))) as pool, \
            tqdm(total=total, initial=total - len(tasks), unit="shard", disable=not progress,
                 desc="pretraining data") as bar:
        for _, count, _ in pool.imap_unordered(process_shard, tasks):
            written += count
            bar.update(1)
            bar.set_postfix(examples=written)
    return written


def run_sharded(input_file, output_file, vocab_file, do_lower_case=True, do_whole_word_mask=False,
                max_seq_length=128, max_predictions_per_seq=20, random_seed=12345, dupe_factor=10,
                masked_lm_prob=0.15, short_seq_prob=0.1, num_workers=None, shard_size=1000, gzip=False,
                progress=True):
    """Fast mode (see the module docstring). `output_file` is the prefix of the shard files; a JSON record of
    the settings is kept at `<output_file>.shards.json` and a rerun with other settings is refused (delete
    the outputs first). Returns (list of shard paths, examples written in this run, shards skipped)."""
    config = make_config(vocab_file, do_lower_case, do_whole_word_mask, max_seq_length, max_predictions_per_seq,
                         random_seed, dupe_factor, masked_lm_prob, short_seq_prob, gzip, output_file=output_file)
    input_files = fileio.expand_patterns(input_file)
    planned = plan(input_files, output_file, shard_size)
    check_manifest(output_file + ".shards.json", dict(
        config, shard_size=shard_size, num_shards=len(planned),
        inputs=[[p, None if fileio.is_url(p) else fileio.file_size(p)] for p in input_files]))
    todo = [(i, ranges, path, config) for i, ranges, path in planned if not fileio.exists(path)]
    skipped = len(planned) - len(todo)
    if skipped:
        logging.info("Resuming: %d of %d shards are already complete.", skipped, len(planned))
    # Largest shards first, so that the workers finish together (the output does not depend on the order).
    todo.sort(key=lambda task: -sum(end - start for _, start, end in task[1]))
    written = _process_in_pool(todo, num_workers or os.cpu_count() or 1, progress, len(planned)) if todo else 0
    logging.info("Wrote %d examples in %d shards (%d skipped as complete).", written, len(todo), skipped)
    return [path for _, _, path in planned], written, skipped
