"""Pre-training data for BERT (the original create_pretraining_data.py): masked-LM + next-sentence examples.

Input: plain text, one sentence per line, a blank line between documents. Output: TFRecord files of
`tf.train.Example`s with the features `input_ids`, `input_mask`, `segment_ids` (int64, `max_seq_length`),
`masked_lm_positions`, `masked_lm_ids` (int64), `masked_lm_weights` (float, `max_predictions_per_seq`) and
`next_sentence_labels` (int64, 1 = B is a random document's text).

Two modes:

* exact (`create_training_instances` + `write_examples`, or `run_exact`): the original algorithm, the
  same `random.Random(seed)` calls in the same order, so the same flags and input give the same examples in
  the same order: each record is the original's Example, written as its deterministic serialization
  (map entries in sorted key order; the original's own bytes list them in an order that varies from process
  to process). Documents are kept as token ids and
  each instance is serialized as soon as it is made, so memory is far below the original's, but the whole
  corpus is still in memory (the final shuffle needs every instance).
* fast (`run_sharded`): the corpus is cut into shards of `shard_size` documents (a pre-pass over the
  text finds document boundaries; no tokenization), each shard is processed by a worker process with the
  exact algorithm on just that shard, with its own seed, and written to its own file
  `<output_file>-<shard:05d>-of-<num_shards:05d>`. Memory is bounded by the shard size; finished shards
  are skipped on a rerun (the settings are kept in `<output_file>.shards.json`; a rerun with other settings
  or inputs is refused). Shards are started largest first; the output does not depend on that. Differences from exact mode: a random-next B segment (NSP) is drawn from a
  document of the same shard, the instance shuffle is per shard, and every input file ends a document.
  Seed of shard `i`: `random.Random(shard_seed(random_seed, i))` with
  `shard_seed(s, i) = int.from_bytes(sha256(f"{s}:{i}".encode()).digest()[:8], "big")`.

Every output is written under a temporary name in the same directory and renamed when complete, so an
interrupted run never leaves an incomplete file under a final name.
"""
import collections
import glob as _glob
import hashlib
import json
import os
import random
import struct

from absl import logging

from bert_tf import fileio, tokenization

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]")

# One training instance, as token ids. `tokens` is the masked sequence ([CLS] A [SEP] B [SEP]);
# `num_a_tokens` the length of A, so segment ids are 0 for the first num_a_tokens + 2 positions, 1 after.
TrainingInstance = collections.namedtuple(
    "TrainingInstance", ["tokens", "num_a_tokens", "masked_lm_positions", "masked_lm_labels", "is_random_next"])


# ----------------------------------------------------------------------------------------------
# Vocabulary tables
# ----------------------------------------------------------------------------------------------

class VocabTables(object):
    """What the algorithm needs from a FullTokenizer's vocab, by id.

    `random_ids[k]` is the id of the k-th vocab entry (the original's `vocab_words[k]`), `is_subword[id]`
    tells whether the token starts with "##" (whole-word masking), `cls_id`, `sep_id`, `mask_id`.
    """

    def __init__(self, tokenizer):
        vocab = tokenizer.vocab
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"The vocab file {getattr(tokenizer, 'vocab_file', '?')!r} has no "
                             f"{', '.join(missing)} entry; pre-training data needs {', '.join(SPECIAL_TOKENS)}.")
        self.vocab = vocab
        self.vocab_file = getattr(tokenizer, "vocab_file", None)
        self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIAL_TOKENS)
        self.random_ids = list(vocab.values())
        size = max(self.random_ids) + 1
        self.is_subword = bytearray(size)
        self.id_to_token = [""] * size
        for token, index in vocab.items():
            self.id_to_token[index] = token
            if token.startswith("##"):
                self.is_subword[index] = 1


# ----------------------------------------------------------------------------------------------
# Random helpers: exactly the draws of random.Random.randint / shuffle (checked by the tests)
# ----------------------------------------------------------------------------------------------

def _randbelow(getrandbits, n):
    """random.Random._randbelow_with_getrandbits: uniform in [0, n), same bits consumed."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def _shuffle(items, getrandbits):
    """random.Random.shuffle(items), same draws, in place."""
    for i in range(len(items) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        items[i], items[j] = items[j], items[i]


# ----------------------------------------------------------------------------------------------
# Input
# ----------------------------------------------------------------------------------------------

def expand_input_patterns(patterns):
    """Comma-separated file names/globs -> list of files: patterns in the order given, the matches of each in
    the order tf.io.gfile.glob (hence the original) lists them, i.e. directory order, not sorted; that order
    decides the document order. Raises FileNotFoundError naming every pattern that matched nothing."""
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files, unmatched = [], []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        if "://" in pattern:
            import tensorflow as tf
            matches = tf.io.gfile.glob(pattern)
        else:
            matches = [p for p in _glob.glob(pattern) if os.path.isfile(p)]  # directory order, as TF
        if not matches:
            unmatched.append(pattern)
        files.extend(matches)
    if unmatched:
        raise FileNotFoundError(f"No input file matches {', '.join(repr(p) for p in unmatched)}.")
    if not files:
        raise FileNotFoundError("No input files given.")
    return files


def _open_binary(path):
    if "://" in path:
        import tensorflow as tf
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def _line_text(raw):
    """A raw line (bytes) as the original sees it: UTF-8 with invalid bytes dropped, stripped."""
    return raw.decode("utf-8", "ignore").strip()


def _documents_from_lines(lines, tokenizer, documents):
    """Appends the documents in `lines` (raw bytes lines) to `documents` (list of lists of id lists), the
    original's way: a blank line starts a new document, a line with no tokens is skipped."""
    tokenize = tokenizer.tokenize
    vocab = tokenizer.vocab
    convert = tokenizer.convert_tokens_to_ids
    for raw in lines:
        line = _line_text(raw)
        if not line:
            documents.append([])
            continue
        tokens = tokenize(line)
        if tokens:
            try:
                ids = [vocab[t] for t in tokens]
            except KeyError:
                ids = convert(tokens)  # raises a KeyError naming the token and the vocab file
            documents[-1].append(ids)
    return documents


def read_documents(input_files, tokenizer):
    """All documents of `input_files` (list of paths), in order: list of documents, each a list of sentences,
    each a list of token ids. As the original, a document may continue across a file boundary and empty
    documents are dropped."""
    documents = [[]]
    for path in input_files:
        with _open_binary(path) as reader:
            _documents_from_lines(reader, tokenizer, documents)
    return [d for d in documents if d]


# ----------------------------------------------------------------------------------------------
# The algorithm (token ids instead of strings; same decisions and random draws as the original)
# ----------------------------------------------------------------------------------------------

def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer of the two lists (B on a tie) one token at a time, from the front or the back at
    random (one rng.random() per token), until both fit in `max_num_tokens`. In place."""
    len_a, len_b = len(tokens_a), len(tokens_b)
    if len_a + len_b <= max_num_tokens:
        return
    draw = rng.random
    front_a = back_a = front_b = back_b = 0
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            if draw() < 0.5:
                front_a += 1
            else:
                back_a += 1
            len_a -= 1
        else:
            if len_b < 1:
                raise AssertionError("cannot truncate an empty segment")
            if draw() < 0.5:
                front_b += 1
            else:
                back_b += 1
            len_b -= 1
    tokens_a[:] = tokens_a[front_a:front_a + len_a]
    tokens_b[:] = tokens_b[front_b:front_b + len_b]


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, tables, rng,
                                 do_whole_word_mask=False):
    """Masks `tokens` (ids, [CLS] A [SEP] B [SEP]) as the original -> (masked ids, positions, label ids).

    Candidates are all positions but [CLS]/[SEP] (with whole-word masking, a "##" piece joins the previous
    candidate), shuffled; up to min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))) of them are
    taken in that order, each replaced by [MASK] (80%), kept (10%) or a random vocab entry (10%).
    """
    cls_id, sep_id = tables.cls_id, tables.sep_id
    getrandbits = rng.getrandbits
    if do_whole_word_mask:
        is_subword = tables.is_subword
        cand_indexes = []
        for i, token in enumerate(tokens):
            if token == cls_id or token == sep_id:
                continue
            if cand_indexes and is_subword[token]:
                cand_indexes[-1].append(i)
            else:
                cand_indexes.append([i])
    else:
        cand_indexes = [i for i, token in enumerate(tokens) if token != cls_id and token != sep_id]
    _shuffle(cand_indexes, getrandbits)

    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    if do_whole_word_mask:
        chosen = []
        for index_set in cand_indexes:
            if len(chosen) >= num_to_predict:
                break
            if len(chosen) + len(index_set) > num_to_predict:
                continue
            chosen.extend(index_set)  # candidate sets never overlap, so none is already covered
    else:
        chosen = cand_indexes[:num_to_predict]

    output = list(tokens)
    draw = rng.random
    mask_id, random_ids = tables.mask_id, tables.random_ids
    num_words = len(random_ids)
    for index in chosen:
        if draw() < 0.8:
            output[index] = mask_id
        elif draw() < 0.5:
            pass  # keep the original token
        else:
            output[index] = random_ids[_randbelow(getrandbits, num_words)]
    positions = sorted(chosen)
    labels = [tokens[p] for p in positions]
    return output, positions, labels


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq, tables, rng,
                                   do_whole_word_mask=False):
    """The original's instances of one document (list of TrainingInstance), random draws in its order."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    getrandbits = rng.getrandbits
    draw = rng.random

    target_seq_length = max_num_tokens
    if draw() < short_seq_prob:
        target_seq_length = 2 + _randbelow(getrandbits, max_num_tokens - 1)  # randint(2, max_num_tokens)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    num_sentences = len(document)
    while i < num_sentences:
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == num_sentences - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = 1 + _randbelow(getrandbits, len(current_chunk) - 1)  # randint(1, len - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b = []
                if len(current_chunk) == 1 or draw() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    num_documents = len(all_documents)
                    for _ in range(10):
                        random_document_index = _randbelow(getrandbits, num_documents)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = _randbelow(getrandbits, len(random_document))
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # The unused sentences of the chunk are put back.
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if not tokens_a or not tokens_b:
                    raise AssertionError("empty segment after truncation (max_seq_length too small?)")

                tokens = [tables.cls_id] + tokens_a + [tables.sep_id] + tokens_b + [tables.sep_id]
                tokens, positions, labels = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, tables, rng, do_whole_word_mask)
                instances.append(TrainingInstance(tokens, len(tokens_a), positions, labels, is_random_next))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


# ----------------------------------------------------------------------------------------------
# Serialization: tf.train.Example wire format written directly (no TF needed, fixed field order)
# ----------------------------------------------------------------------------------------------

def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field_tag, payload):
    return field_tag + _varint(len(payload)) + payload


class ExampleEncoder(object):
    """Serializes TrainingInstances as tf.train.Example bytes, padded as the original pads them.

    The feature map is written in sorted key order, i.e. exactly `Example.SerializeToString(deterministic=True)`
    of the original's Example. (The original's raw bytes list the map entries in an order that changes from
    process to process, e.g. the two golden files in tests/data differ; the Example itself is the same.)
    """

    ORDER = ("input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions", "masked_lm_weights",
             "next_sentence_labels", "segment_ids")

    def __init__(self, max_seq_length, max_predictions_per_seq, vocab_size):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._varints = [_varint(i) for i in range(max(vocab_size, max_seq_length, 4096) + 1)]
        self._keys = {name: _length_delimited(b"\n", name.encode()) for name in self.ORDER}
        seq, preds = max_seq_length, max_predictions_per_seq
        self._weights = [self._entry("masked_lm_weights", b"\x12",
                                     struct.pack("<%df" % preds, *([1.0] * m + [0.0] * (preds - m))))
                         for m in range(preds + 1)]
        self._labels = [self._entry("next_sentence_labels", b"\x1a", bytes([v])) for v in (0, 1)]
        self._mask_prefix = self._entry("input_mask", b"\x1a", b"\x00" * seq)[:-seq]
        self._segment_prefix = self._entry("segment_ids", b"\x1a", b"\x00" * seq)[:-seq]

    def _varint_of(self, value):
        table = self._varints
        return table[value] if value < len(table) else _varint(value)

    def _entry(self, name, feature_tag, packed):
        values = _length_delimited(b"\n", packed) if packed else b""
        feature = _length_delimited(feature_tag, values)
        return _length_delimited(b"\n", self._keys[name] + _length_delimited(b"\x12", feature))

    def _int_entry(self, name, packed):
        """Fast _entry for a non-empty int64 list."""
        v = self._varint_of
        values_len = len(packed)
        list_len = 1 + len(v(values_len)) + values_len          # Int64List
        feature_len = 1 + len(v(list_len)) + list_len           # Feature
        key = self._keys[name]
        entry_len = len(key) + 1 + len(v(feature_len)) + feature_len
        return b"".join((b"\n", v(entry_len), key, b"\x12", v(feature_len), b"\x1a", v(list_len), b"\n",
                         v(values_len), packed))

    def encode(self, instance):
        seq, preds = self.max_seq_length, self.max_predictions_per_seq
        tokens = instance.tokens
        n = len(tokens)
        if n > seq:
            raise ValueError(f"instance has {n} tokens, more than max_seq_length={seq}")
        pad = seq - n
        varints = self._varints
        m = len(instance.masked_lm_positions)
        if m > preds:
            raise ValueError(f"instance has {m} predictions, more than max_predictions_per_seq={preds}")
        pred_pad = b"\x00" * (preds - m)
        num_a = instance.num_a_tokens + 2
        parts = [
            self._int_entry("input_ids", b"".join([varints[t] for t in tokens]) + b"\x00" * pad),
            self._mask_prefix, b"\x01" * n, b"\x00" * pad,
        ]
        if preds:
            parts.append(self._int_entry("masked_lm_ids",
                                         b"".join([varints[t] for t in instance.masked_lm_labels]) + pred_pad))
            parts.append(self._int_entry("masked_lm_positions",
                                         b"".join([varints[p] for p in instance.masked_lm_positions]) + pred_pad))
        else:
            parts.append(self._entry("masked_lm_ids", b"\x1a", b""))
            parts.append(self._entry("masked_lm_positions", b"\x1a", b""))
        parts += [self._weights[m], self._labels[1 if instance.is_random_next else 0],
                  self._segment_prefix, b"\x00" * num_a, b"\x01" * (n - num_a), b"\x00" * pad]
        features = b"".join(parts)
        return b"\n" + self._varint_of(len(features)) + features


def _log_instance(tables, instance):
    logging.info("*** Example ***")
    logging.info("tokens: %s", " ".join(tokenization.printable_text(tables.id_to_token[t]) for t in instance.tokens))
    logging.info("masked_lm_positions: %s", " ".join(map(str, instance.masked_lm_positions)))
    logging.info("masked_lm_labels: %s", " ".join(tables.id_to_token[t] for t in instance.masked_lm_labels))
    logging.info("next_sentence_labels: %d", int(instance.is_random_next))


# ----------------------------------------------------------------------------------------------
# Exact mode
# ----------------------------------------------------------------------------------------------

def check_flags(max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor, short_seq_prob):
    """Rejects values the algorithm cannot use; warns when max_predictions_per_seq caps the masking rate."""
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]); got {max_seq_length}.")
    if max_predictions_per_seq < 0 or dupe_factor < 0:
        raise ValueError("max_predictions_per_seq and dupe_factor must not be negative.")
    if not 0.0 <= masked_lm_prob <= 1.0 or not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError("masked_lm_prob and short_seq_prob must be in [0, 1].")
    if max_predictions_per_seq < max_seq_length * masked_lm_prob:
        logging.warning("max_predictions_per_seq=%d < max_seq_length * masked_lm_prob = %g: full-length "
                        "sequences get fewer masked tokens than masked_lm_prob asks for.",
                        max_predictions_per_seq, max_seq_length * masked_lm_prob)


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
                              masked_lm_prob, max_predictions_per_seq, rng, do_whole_word_mask=False,
                              encoder=None, documents=None, log_examples=0):
    """The original's create_training_instances: read, shuffle documents, dupe_factor passes, shuffle.

    Returns the list of instances, each already serialized with `encoder` (an ExampleEncoder; one is made
    if None) when `encoder` is not False, else TrainingInstance objects. `documents` (list) replaces reading
    `input_files` when given. The first `log_examples` instances made are logged (INFO).
    """
    tables = VocabTables(tokenizer)
    if documents is None:
        documents = read_documents(input_files, tokenizer)
    if not documents:
        raise ValueError(f"No text in the input files {', '.join(map(str, input_files or []))}: "
                         "every line is blank or has no tokens.")
    rng.shuffle(documents)
    if encoder is None:
        encoder = ExampleEncoder(max_seq_length, max_predictions_per_seq, len(tables.id_to_token))
    instances = []
    logged = 0
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            made = create_instances_from_document(
                documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                max_predictions_per_seq, tables, rng, do_whole_word_mask)
            if encoder is False:
                instances.extend(made)
            else:
                for instance in made:
                    data = encoder.encode(instance)
                    if logged < log_examples:
                        _log_instance(tables, instance)
                        logged += 1
                    instances.append(data)
    rng.shuffle(instances)
    return instances


def _temp_name(path):
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.tmp-{os.getpid()}")


def check_writable(output_files):
    """Raises a clear error now (not after hours of work) if an output's directory is missing/unwritable."""
    for path in output_files:
        if "://" in path:
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"Output directory {directory!r} (for {path!r}) does not exist.")
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"Output directory {directory!r} (for {path!r}) is not writable.")
        if os.path.isdir(path):
            raise IsADirectoryError(f"Output file {path!r} is a directory.")


def _crc32c_table():
    import numpy as np
    table = np.zeros(256, np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table[i] = crc
    return table


_CRC_TABLE = None


def masked_crc32c(records):
    """TFRecord's masked CRC-32C of each bytes object in `records` -> list of int, vectorized over records
    with NumPy (one step per byte position, records sorted by length so each step only touches the records
    still running)."""
    import numpy as np
    global _CRC_TABLE
    if _CRC_TABLE is None:
        _CRC_TABLE = _crc32c_table()
    table = _CRC_TABLE
    n = len(records)
    if n == 0:
        return []
    lengths = np.fromiter((len(r) for r in records), np.int64, n)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    width = int(sorted_lengths[0])
    data = np.zeros((n, max(width, 1)), np.uint8)
    for row, index in enumerate(order):
        record = records[index]
        data[row, :len(record)] = np.frombuffer(record, np.uint8)
    data = np.ascontiguousarray(data.T)  # [byte position, record]
    crc = np.full(n, 0xFFFFFFFF, np.uint32)
    # active[pos] = how many (longest-first) records have a byte at `pos`
    active = n - np.searchsorted(sorted_lengths[::-1], np.arange(width), side="right")
    for pos in range(width):
        k = int(active[pos])
        head = crc[:k]
        crc[:k] = table[(head ^ data[pos, :k]) & 0xFF] ^ (head >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    masked = ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)
    result = np.empty(n, np.uint32)
    result[order] = masked
    return result.tolist()


class TFRecordWriter(object):
    """Writes TFRecord files without TensorFlow (same bytes as tf.io.TFRecordWriter; GZIP optional).

    Records are buffered and their CRCs computed `batch` at a time. Local paths only use the standard
    library and NumPy; paths with a scheme (gs://...) go through tf.io.gfile.
    """

    def __init__(self, path, gzip=False, batch=4096):
        if "://" in path:
            import tensorflow as tf
            raw = tf.io.gfile.GFile(path, "wb")
        else:
            raw = open(path, "wb")
        if gzip:
            import gzip as gzip_module
            self._file = gzip_module.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
        else:
            self._file = raw
        self._raw = raw
        self._pending = []
        self._batch = batch

    def write(self, record):
        self._pending.append(bytes(record))
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self):
        records = self._pending
        if not records:
            return
        self._pending = []
        headers = [struct.pack("<Q", len(r)) for r in records]
        header_crcs = masked_crc32c(headers)
        data_crcs = masked_crc32c(records)
        pack = struct.pack
        self._file.write(b"".join([h + pack("<I", hc) + r + pack("<I", dc)
                                   for h, hc, r, dc in zip(headers, header_crcs, records, data_crcs)]))

    def close(self):
        if self._file is None:
            return
        try:
            self.flush()
        finally:
            self._file.close()
            if self._raw is not self._file:
                self._raw.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _rename(source, target):
    if "://" in target:
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)
    else:
        os.replace(source, target)



def write_examples(serialized, output_files, gzip=False):
    """Writes serialized examples round-robin over `output_files` (the original's order) as TFRecords.
    Each file is written under a temporary name and renamed at the end. Returns the count per file."""
    temps = [_temp_name(p) for p in output_files]
    writers = []
    counts = [0] * len(output_files)
    try:
        for temp in temps:
            writers.append(TFRecordWriter(temp, gzip))
        num = len(writers)
        for index, data in enumerate(serialized):
            writers[index % num].write(data)
            counts[index % num] += 1
        for writer in writers:
            writer.close()
        for temp, path in zip(temps, output_files):
            _rename(temp, path)
    except BaseException:
        for writer in writers:
            try:
                writer.close()
            except Exception:
                pass
        for temp in temps:
            fileio.remove_quietly(temp)
        raise
    return counts


def run_exact(input_file, output_file, vocab_file, do_lower_case=True, do_whole_word_mask=False,
              max_seq_length=128, max_predictions_per_seq=20, random_seed=12345, dupe_factor=10,
              masked_lm_prob=0.15, short_seq_prob=0.1, gzip=False):
    """The original script end to end. `input_file`/`output_file`: comma-separated (globs allowed for inputs).
    Returns the number of examples written."""
    check_flags(max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor, short_seq_prob)
    input_files = expand_input_patterns(input_file)
    output_files = [p for p in output_file.split(",") if p]
    if not output_files:
        raise ValueError("No output file given.")
    check_writable(output_files)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    VocabTables(tokenizer)  # fail on a vocab without special tokens before reading the corpus
    logging.info("*** Reading from input files ***")
    for path in input_files:
        logging.info("  %s", path)
    rng = random.Random(random_seed)
    instances = create_training_instances(
        input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
        max_predictions_per_seq, rng, do_whole_word_mask, log_examples=20)
    logging.info("*** Writing to output files ***")
    for path in output_files:
        logging.info("  %s", path)
    write_examples(instances, output_files, gzip)
    logging.info("Wrote %d total instances", len(instances))
    return len(instances)


# ----------------------------------------------------------------------------------------------
# Fast mode: shards of documents, one worker process per core
# ----------------------------------------------------------------------------------------------

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
        with _open_binary(path) as reader:
            for raw in reader:
                blank = not _line_text(raw)
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


_WORKER = {}


def _worker_state(config):
    key = (config["vocab_file"], config["do_lower_case"])
    if _WORKER.get("key") != key:
        tokenizer = tokenization.FullTokenizer(config["vocab_file"], config["do_lower_case"])
        tables = VocabTables(tokenizer)
        _WORKER.update(key=key, tokenizer=tokenizer, tables=tables)
    return _WORKER["tokenizer"], _WORKER["tables"]


def _read_ranges(ranges, tokenizer):
    documents = [[]]
    for path, start, end in ranges:
        with _open_binary(path) as reader:
            reader.seek(start)
            data = reader.read(end - start)
        _documents_from_lines(data.split(b"\n"), tokenizer, documents)
        documents.append([])  # a file range always ends a document
    return [d for d in documents if d]


def process_shard(task):
    """Worker: makes and writes one shard. `task`: (index, ranges, path, config). Returns (index, count,
    bytes of text)."""
    index, ranges, path, config = task
    tokenizer, tables = _worker_state(config)
    documents = _read_ranges(ranges, tokenizer)
    num_bytes = sum(end - start for _, start, end in ranges)
    if documents:
        rng = random.Random(shard_seed(config["random_seed"], index))
        serialized = create_training_instances(
            None, tokenizer, config["max_seq_length"], config["dupe_factor"], config["short_seq_prob"],
            config["masked_lm_prob"], config["max_predictions_per_seq"], rng, config["do_whole_word_mask"],
            documents=documents)
    else:
        serialized = []
    write_examples(serialized, [path], config["gzip"])
    return index, len(serialized), num_bytes


def run_sharded(input_file, output_file, vocab_file, do_lower_case=True, do_whole_word_mask=False,
                max_seq_length=128, max_predictions_per_seq=20, random_seed=12345, dupe_factor=10,
                masked_lm_prob=0.15, short_seq_prob=0.1, num_workers=None, shard_size=1000, gzip=False,
                progress=True):
    """Fast mode (see the module docstring). `output_file` is the prefix of the shard files; a JSON record of
    the settings is kept at `<output_file>.shards.json` and a rerun with other settings is refused (delete
    the outputs first). Returns (list of shard paths, examples written in this run, shards skipped)."""
    import multiprocessing
    import sys

    from tqdm import tqdm

    check_flags(max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor, short_seq_prob)
    if "," in output_file:
        raise ValueError("Fast mode writes one set of shards: give --output_file a single path prefix.")
    input_files = expand_input_patterns(input_file)
    check_writable([output_file])
    VocabTables(tokenization.FullTokenizer(vocab_file, do_lower_case))  # fail early on a bad vocab
    num_workers = num_workers or os.cpu_count() or 1

    shards = plan_shards(input_files, shard_size)
    if not shards:
        raise ValueError(f"No text in the input files {', '.join(input_files)}: every line is blank.")
    config = dict(vocab_file=os.path.abspath(vocab_file) if "://" not in vocab_file else vocab_file,
                  do_lower_case=bool(do_lower_case), do_whole_word_mask=bool(do_whole_word_mask),
                  max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                  random_seed=random_seed, dupe_factor=dupe_factor, masked_lm_prob=masked_lm_prob,
                  short_seq_prob=short_seq_prob, gzip=bool(gzip))
    record = dict(config, shard_size=shard_size, num_shards=len(shards),
                  inputs=[[p, os.path.getsize(p) if "://" not in p else None] for p in input_files])
    manifest = output_file + ".shards.json"
    if os.path.exists(manifest):
        with open(manifest) as f:
            previous = json.load(f)
        if previous != json.loads(json.dumps(record)):
            raise ValueError(f"{manifest} records other settings or inputs than this run; delete the earlier "
                             "shards and that file to start again.")
    else:
        temp = _temp_name(manifest)
        with open(temp, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
        os.replace(temp, manifest)

    paths = [shard_path(output_file, i, len(shards)) for i in range(len(shards))]
    todo = [(i, shards[i], paths[i], config) for i in range(len(shards)) if not os.path.exists(paths[i])]
    skipped = len(shards) - len(todo)
    # Largest shards first, so that the workers finish together (the output does not depend on the order).
    todo.sort(key=lambda task: -sum(end - start for _, start, end in task[1]))
    if skipped:
        logging.info("Resuming: %d of %d shards are already complete.", skipped, len(shards))
    written = 0
    if todo:
        method = "fork" if ("fork" in multiprocessing.get_all_start_methods()
                            and "tensorflow" not in sys.modules) else "spawn"
        context = multiprocessing.get_context(method)
        workers = min(num_workers, len(todo))
        with context.Pool(workers, maxtasksperchild=None) as pool:
            bar = tqdm(total=len(shards), initial=skipped, unit="shard", disable=not progress,
                       desc="pretraining data")
            for _, count, _ in pool.imap_unordered(process_shard, todo):
                written += count
                bar.update(1)
                bar.set_postfix(examples=written)
            bar.close()
    logging.info("Wrote %d examples in %d shards (%d skipped as complete).", written, len(todo), skipped)
    return paths, written, skipped
