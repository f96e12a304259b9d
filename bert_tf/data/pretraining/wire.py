"""The TFRecord files of create_pretraining_data, written without TensorFlow (worker processes fork fast and stay
small): `tf.train.Example` wire format, TFRecord framing with masked CRC32C, and `write_examples`
(atomic); `decode_example` reads an Example back (for the log).
"""
import contextlib
import functools
import gzip as gzip_module
import struct

from bert_tf import fileio


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_tag, payload):
    return field_tag + _varint(len(payload)) + payload


class ExampleEncoder:
    """TrainingInstances as tf.train.Example bytes, padded as the original: its Example's
    `SerializeToString(deterministic=True)` (the original's own map order varies)."""

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

    def _entry(self, name, feature_tag, packed):
        values = _length_delimited(b"\n", packed) if packed else b""
        feature = _length_delimited(feature_tag, values)
        return _length_delimited(b"\n", self._keys[name] + _length_delimited(b"\x12", feature))

    def _int_entry(self, name, packed):
        """`_entry` of an int64 list, its lengths' varints read from the table: the hot path, three per instance."""
        if not packed:
            return self._entry(name, b"\x1a", packed)
        v = self._varint_of
        list_len = 1 + len(v(len(packed))) + len(packed)  # Int64List
        feature_len = 1 + len(v(list_len)) + list_len  # Feature
        key = self._keys[name]
        return b"".join((b"\n", v(len(key) + 1 + len(v(feature_len)) + feature_len), key, b"\x12", v(feature_len),
                         b"\x1a", v(list_len), b"\n", v(len(packed)), packed))

    def _varint_of(self, value):
        return self._varints[value] if value < len(self._varints) else _varint(value)

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
            self._int_entry("masked_lm_ids", b"".join([varints[t] for t in instance.masked_lm_labels]) + pred_pad),
            self._int_entry("masked_lm_positions",
                            b"".join([varints[p] for p in instance.masked_lm_positions]) + pred_pad),
            self._weights[m], self._labels[1 if instance.is_random_next else 0],
            self._segment_prefix, b"\x00" * num_a, b"\x01" * (n - num_a), b"\x00" * pad]
        features = b"".join(parts)
        return b"\n" + self._varint_of(len(features)) + features


def _read_varint(data, pos):
    """The varint at data[pos:] -> (value, the position after it)."""
    value = shift = 0
    while data[pos] & 0x80:
        value |= (data[pos] & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
    return value | data[pos] << shift, pos + 1


def _fields(message):
    """(tag, payload) of each field of `message`, all length-delimited (as in an Example)."""
    pos = 0
    while pos < len(message):
        tag, pos = _read_varint(message, pos)
        length, pos = _read_varint(message, pos)
        yield tag, message[pos:pos + length]
        pos += length


def decode_example(data):
    """tf.train.Example bytes as ExampleEncoder writes them -> {name: list of int or float}."""
    features = {}
    for _, entries in _fields(data):
        for _, entry in _fields(entries):
            (_, key), (_, feature) = _fields(entry)
            ((kind, values),) = _fields(feature)
            packed = b"".join(payload for _, payload in _fields(values))
            if kind == 0x12:  # float_list
                features[key.decode()] = list(struct.unpack("<%df" % (len(packed) // 4), packed))
                continue
            ints, pos = [], 0
            while pos < len(packed):
                value, pos = _read_varint(packed, pos)
                ints.append(value)
            features[key.decode()] = ints
    return features


@functools.cache
def _crc32c_table():
    import numpy as np
    table = np.zeros(256, np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table[i] = crc
    return table


def masked_crc32c(records):
    """TFRecord's masked CRC-32C of each bytes object in `records` -> list of int (vectorized over records)."""
    import numpy as np
    table = _crc32c_table()
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


def tfrecords(records):
    """`records` (bytes objects) framed as tf.io.TFRecordWriter writes them."""
    headers = [struct.pack("<Q", len(r)) for r in records]
    crcs = zip(masked_crc32c(headers), masked_crc32c(records))
    pack = struct.pack
    return b"".join([h + pack("<I", hc) + r + pack("<I", dc)
                     for h, r, (hc, dc) in zip(headers, records, crcs)])


def write_examples(serialized, output_files, gzip=False, batch=4096):
    """Writes serialized examples round-robin over `output_files` (the original's order) as
    TFRecord files (GZIP optional), framed `batch` records at a time, atomically; returns the
    count per file."""
    pending = [[] for _ in output_files]
    counts = [0] * len(output_files)
    # Every file is closed (on gs://: uploaded) before any is renamed into place: a failure leaves none.
    with contextlib.ExitStack() as renames, contextlib.ExitStack() as stack:
        files = []
        for path in output_files:
            tmp = renames.enter_context(fileio.written_atomically(path))
            file = stack.enter_context(fileio.open_file(tmp, "wb", name=""))
            if gzip:
                file = stack.enter_context(
                    gzip_module.GzipFile(filename="", mode="wb", fileobj=file, mtime=0))
            files.append(file)
        for index, data in enumerate(serialized):
            k = index % len(files)
            pending[k].append(bytes(data))
            counts[k] += 1
            if len(pending[k]) >= batch:
                files[k].write(tfrecords(pending[k]))
                pending[k] = []
        for file, records in zip(files, pending):
            file.write(tfrecords(records))
    return counts
