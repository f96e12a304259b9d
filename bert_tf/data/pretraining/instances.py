"""The original create_pretraining_data.py algorithm: documents -> masked-LM + next-sentence training instances.

The original's decisions and `random.Random(seed)` draws in the same order, on token ids instead of strings: the same
flags and input give the same instances. `run_exact` is the original script end to end (the whole corpus in memory);
`shards` runs the algorithm per shard. Input: one sentence per line, a blank line between documents. Output: the
original's Examples (next_sentence_labels 1 = B is random), serialized with map entries sorted.
"""
import collections
import collections.abc
import dataclasses
import os
import random

from absl import logging

from bert_tf import fileio
from bert_tf.data.pretraining import wire
from bert_tf.text import tokenization

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class Options:
    """The options of create_pretraining_data.py with the original's defaults (gzip is ours), for every mode; values the
    algorithm cannot use are refused."""
    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    gzip: bool = False

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]); got {self.max_seq_length}.")
        if self.max_predictions_per_seq < 0 or self.dupe_factor < 0:
            raise ValueError("max_predictions_per_seq and dupe_factor must not be negative.")
        if not 0.0 <= self.masked_lm_prob <= 1.0 or not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError("masked_lm_prob and short_seq_prob must be in [0, 1].")
        if self.max_predictions_per_seq < self.max_seq_length * self.masked_lm_prob:
            logging.warning("max_predictions_per_seq=%d < max_seq_length * masked_lm_prob = %g: full-length "
                            "sequences get fewer masked tokens than masked_lm_prob asks for.",
                            self.max_predictions_per_seq, self.max_seq_length * self.masked_lm_prob)

# One training instance, as token ids. `tokens` is the masked sequence ([CLS] A [SEP] B [SEP]);
# `num_a_tokens` the length of A, so segment ids are 0 for the first num_a_tokens + 2 positions, 1 after.
TrainingInstance = collections.namedtuple(
    "TrainingInstance", ["tokens", "num_a_tokens", "masked_lm_positions", "masked_lm_labels", "is_random_next"])


class VocabTables:
    """What the algorithm needs from a vocabulary, by id: `random_ids[k]` (the original's `vocab_words[k]`),
    `is_subword[id]` (starts with "##"), `cls_id`, `sep_id`, `mask_id`."""

    def __init__(self, vocab, vocab_file=None):
        """`vocab`: {token: id} (`tokenization.load_vocab`'s) or the tokens in id order; `vocab_file`: for errors."""
        if not isinstance(vocab, collections.abc.Mapping):
            vocab = {token: index for index, token in enumerate(vocab)}
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            source = f"vocab file {vocab_file!r}" if vocab_file else "vocab"
            raise ValueError(f"The {source} has no {', '.join(missing)} entry; pre-training data needs "
                             f"{', '.join(SPECIAL_TOKENS)}.")
        self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIAL_TOKENS)
        self.random_ids = list(vocab.values())
        self.is_subword = bytearray(max(self.random_ids) + 1)
        for token, index in vocab.items():
            if token.startswith("##"):
                self.is_subword[index] = 1


# Random helpers: exactly the draws of random.Random.randint / shuffle (checked by the tests)

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
        j = _randbelow(getrandbits, i + 1)
        items[i], items[j] = items[j], items[i]


def line_text(raw):
    """A raw line (bytes) as the original sees it: UTF-8 with invalid bytes dropped, stripped."""
    return raw.decode("utf-8", "ignore").strip()


def documents_from_lines(lines, tokenizer, documents):
    """Appends the documents in raw `lines` to `documents` as the original: a blank line starts a document, a line with
    no tokens is skipped."""
    for raw in lines:
        line = line_text(raw)
        if not line:
            documents.append([])
        elif tokens := tokenizer.tokenize(line):
            documents[-1].append(tokenizer.convert_tokens_to_ids(tokens))
    return documents


def read_documents(input_files, tokenizer):
    """All documents of `input_files` (sentences of token ids), in order; as the original, a document may continue
    across files and empty ones are dropped."""
    documents = [[]]
    for path in input_files:
        with fileio.open_file(path, "rb") as reader:
            documents_from_lines(reader, tokenizer, documents)
    return [d for d in documents if d]


# The algorithm (token ids instead of strings; same decisions and random draws as the original)

def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer list (B on a tie) from a random end, one rng.random() per token, until both fit in
    `max_num_tokens`. In place."""
    len_a, len_b = len(tokens_a), len(tokens_b)
    draw = rng.random
    front_a = front_b = 0  # tokens cut from the front (a draw < 0.5), the rest from the back
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            front_a += draw() < 0.5
            len_a -= 1
        else:
            front_b += draw() < 0.5
            len_b -= 1
    tokens_a[:] = tokens_a[front_a:front_a + len_a]
    tokens_b[:] = tokens_b[front_b:front_b + len_b]


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, tables, rng,
                                 do_whole_word_mask=False):
    """Masks `tokens` as the original -> (masked ids, positions, label ids).

    Candidates: all positions but [CLS]/[SEP] (whole-word masking joins "##" pieces), shuffled; up to
    min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))) are taken, each [MASK] (80%), kept (10%) or a
    random entry (10%).
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
    """The original's instances of one document, random draws in its order."""
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
            a_end = 1 + _randbelow(getrandbits, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
            tokens_a = [token for sentence in current_chunk[:a_end] for token in sentence]
            is_random_next = len(current_chunk) == 1 or draw() < 0.5
            if is_random_next:
                target_b_length = target_seq_length - len(tokens_a)
                for _ in range(10):
                    random_document_index = _randbelow(getrandbits, len(all_documents))
                    if random_document_index != document_index:
                        break
                random_document = all_documents[random_document_index]
                tokens_b = []
                for j in range(_randbelow(getrandbits, len(random_document)), len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                # The unused sentences of the chunk are put back.
                i -= len(current_chunk) - a_end
            else:
                tokens_b = [token for sentence in current_chunk[a_end:] for token in sentence]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            if not tokens_a or not tokens_b:  # the original's asserts (Options' bounds keep them from firing)
                raise AssertionError("empty segment after truncation (max_seq_length too small?)")

            tokens = [tables.cls_id] + tokens_a + [tables.sep_id] + tokens_b + [tables.sep_id]
            tokens, positions, labels = create_masked_lm_predictions(
                tokens, masked_lm_prob, max_predictions_per_seq, tables, rng, do_whole_word_mask)
            instances.append(TrainingInstance(tokens, len(tokens_a), positions, labels, is_random_next))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def log_examples(serialized, id_to_token):
    """Logs serialized Examples as the original's write_instance_to_example_files logs its first
    20: tokens, then each feature in the order of its OrderedDict."""
    for data in serialized:
        features = wire.decode_example(data)
        tokens = [id_to_token[t] for t in features["input_ids"][:sum(features["input_mask"])]]
        logging.info("*** Example ***")
        logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
        for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                     "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"):
            logging.info("%s: %s", name, " ".join(str(v) for v in features[name]))


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
                              masked_lm_prob, max_predictions_per_seq, rng, do_whole_word_mask=False,
                              documents=None):
    """The original's create_training_instances: read, shuffle documents, dupe_factor passes, shuffle. Returns the
    instances serialized (`wire.ExampleEncoder`). `documents` replaces reading `input_files`."""
    tables = VocabTables(tokenizer.vocab, tokenizer.vocab_file)
    if documents is None:
        documents = read_documents(input_files, tokenizer)
    if not documents:
        raise ValueError(f"No text in the input files {', '.join(map(str, input_files or []))}: "
                         "every line is blank or has no tokens.")
    rng.shuffle(documents)
    encoder = wire.ExampleEncoder(max_seq_length, max_predictions_per_seq, len(tables.is_subword))
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            for instance in create_instances_from_document(
                    documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                    max_predictions_per_seq, tables, rng, do_whole_word_mask):
                instances.append(encoder.encode(instance))
    rng.shuffle(instances)
    return instances


# Exact mode end to end

def remove_leftovers(output_files):
    """Removes killed runs' temporaries beside `output_files` (`fileio.remove_stale_temporaries`)."""
    for directory in sorted({os.path.dirname(fileio.absolute(path)) for path in output_files}):
        fileio.remove_stale_temporaries(directory)


def run_exact(input_file, output_file, vocab_file, **options):
    """The original script end to end (`options`: `Options`' fields); comma-separated `input_file` (globs) and
    `output_file`, each written atomically. Returns the number of examples written."""
    options = Options(vocab_file, **options)
    input_files = fileio.expand_patterns(input_file)
    output_files = [p for p in output_file.split(",") if p]
    if not output_files:
        raise ValueError("No output file given.")
    fileio.check_writable(output_files)
    remove_leftovers(output_files)
    tokenizer = tokenization.FullTokenizer(vocab_file, options.do_lower_case)
    logging.info("*** Reading from input files ***")
    for path in input_files:
        logging.info("  %s", path)
    rng = random.Random(options.random_seed)
    instances = create_training_instances(
        input_files, tokenizer, options.max_seq_length, options.dupe_factor, options.short_seq_prob,
        options.masked_lm_prob, options.max_predictions_per_seq, rng, options.do_whole_word_mask)
    logging.info("*** Writing to output files ***")
    for path in output_files:
        logging.info("  %s", path)
    log_examples(instances[:20], tokenizer.inv_vocab)
    wire.write_examples(instances, output_files, options.gzip)
    logging.info("Wrote %d total instances", len(instances))
    return len(instances)
