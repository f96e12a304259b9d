"""Learn a WordPiece vocab.txt, in the released BERT vocabularies' layout, from a text corpus.

Words are split exactly as FullTokenizer splits them (bert_tf.tokenization.BasicTokenizer); pieces are learned over
the word counts with TF Text's WordPiece learner (`tensorflow_text.tools.wordpiece_vocab`). The file starts with the
released vocabularies' reserved tokens (`reserved_tokens`), then every single character (and its `##` continuation) of
the kept alphabet, then the learned pieces by frequency.
"""
import collections
import importlib.util
import itertools
import multiprocessing
import os

from bert_tf import fileio
from bert_tf.text import tokenization

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_TOKEN = "[PAD]"
# The released vocabularies put 99 [unused] tokens between [PAD] and [UNK]: [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
UNUSED_BEFORE_SPECIAL = 99


def reserved_tokens(num_unused=994):
    """The leading tokens of a vocab.txt: [PAD], up to 99 [unusedN], [UNK] [CLS] [SEP] [MASK], the other [unusedN]."""
    before = min(num_unused, UNUSED_BEFORE_SPECIAL)
    return ([PAD_TOKEN] + [f"[unused{i}]" for i in range(before)] + list(SPECIAL_TOKENS)
            + [f"[unused{i}]" for i in range(before, num_unused)])


def _iter_lines(files):
    for path in files:
        with fileio.open_file(path, "r") as f:
            for line in f:
                line = line.strip()
                if line:
                    yield line


def _count_chunk(args):
    lines, do_lower_case = args
    tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    return collections.Counter(word for line in lines for word in tokenizer.tokenize(line))


def count_words(lines, do_lower_case=True, num_workers=1, chunk_lines=10000, max_lines=None):
    """Counter of the BasicTokenizer words of text lines."""
    lines = itertools.islice(lines, max_lines)  # None: all
    chunks = iter(lambda: list(itertools.islice(lines, chunk_lines)), [])
    args = ((chunk, do_lower_case) for chunk in chunks)
    counts = collections.Counter()
    if num_workers <= 1:
        for arg in args:
            counts.update(_count_chunk(arg))
        return counts
    with multiprocessing.get_context("spawn").Pool(num_workers) as pool:
        while True:
            batch = list(itertools.islice(args, 4 * num_workers))  # bounded memory
            if not batch:
                break
            for chunk_counts in pool.imap_unordered(_count_chunk, batch):
                counts.update(chunk_counts)
    return counts


def _learner_lib():
    """TF Text's WordPiece learner module, loaded from its file without importing tensorflow_text (and TensorFlow)."""
    spec = importlib.util.find_spec("tensorflow_text")  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("Learning a vocabulary needs tensorflow-text (pip install tensorflow-text).")
    path = os.path.join(list(spec.submodule_search_locations)[0], "tools", "wordpiece_vocab",
                        "wordpiece_tokenizer_learner_lib.py")
    file_spec = importlib.util.spec_from_file_location("_bert_tf_wordpiece_learner", path)
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    return module


def learn_vocab(word_counts, vocab_size, num_unused=994, max_unique_chars=1000, max_token_length=50,
                max_input_words=5_000_000, slack_ratio=0.05, pad_to_vocab_size=True, **learn_params):
    """A WordPiece vocabulary (list of tokens) from {word: count}: at most vocab_size tokens (at least
    (1 - slack_ratio) of it if the corpus allows); pad_to_vocab_size appends [unusedN] up to vocab_size."""
    learner = _learner_lib()
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(f"vocab_size {vocab_size} leaves no room after the {len(reserved)} reserved tokens.")
    reserved_set = set(reserved)
    counts = [(word, count) for word, count in word_counts.items() if word not in reserved_set]
    if not counts:
        raise ValueError("No words to learn a vocabulary from.")
    vocab = learner.learn(counts, vocab_size, reserved, max_unique_chars=max_unique_chars,
                          max_token_length=max_token_length, max_input_tokens=max_input_words,
                          slack_ratio=slack_ratio, include_joiner_token=True, joiner="##", **learn_params)
    vocab = list(vocab)
    if len(vocab) > vocab_size:
        # The learner's search can end above the target: drop the least frequent learned pieces, never a reserved
        # token or a character (nor its ## form), so every word of the alphabet stays tokenizable.
        def essential(index):
            token = vocab[index]
            return index < len(reserved) or len(token) == 1 or (token.startswith("##") and len(token) == 3)
        drop = set([index for index in reversed(range(len(vocab))) if not essential(index)][:len(vocab) - vocab_size])
        vocab = [token for index, token in enumerate(vocab) if index not in drop]
        if len(vocab) > vocab_size:
            raise ValueError(f"vocab_size {vocab_size} is too small for the {len(vocab)} reserved tokens and "
                             "characters; raise it or lower max_unique_chars.")
    assert vocab[:len(reserved)] == reserved, "reserved tokens must lead the vocabulary"
    if pad_to_vocab_size:
        present = set(vocab)
        unused = (f"[unused{i}]" for i in itertools.count(num_unused))
        vocab += itertools.islice((token for token in unused if token not in present), vocab_size - len(vocab))
    return vocab


def write_vocab(vocab, output_file):
    """Writes one token a line (vocab.txt), to a temporary name then renamed."""
    tokens = list(vocab)
    if len(set(tokens)) != len(tokens):
        raise ValueError("The vocabulary has duplicate tokens.")
    for token in tokens:
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"Token {token!r} is empty or has whitespace.")
    fileio.write_text_atomically(output_file, "".join(token + "\n" for token in tokens))


def build_vocab(input_patterns, output_file, vocab_size=30522, do_lower_case=True, num_unused=994, num_workers=1,
                max_lines=None, **learn_kwargs):
    """Learns a vocabulary from the text files matching input_patterns and writes it to output_file; returns it."""
    counts = count_words(_iter_lines(fileio.expand_patterns(input_patterns)), do_lower_case=do_lower_case,
                         num_workers=num_workers, max_lines=max_lines)
    vocab = learn_vocab(counts, vocab_size, num_unused=num_unused, **learn_kwargs)
    write_vocab(vocab, output_file)
    return vocab
