"""Learn a WordPiece vocab.txt (the released BERT vocabularies' layout) from text files.


Example:
  python run_scripts/build_vocab.py --input_file=wiki.txt --output_file=vocab.txt --vocab_size=30522 \
    --do_lower_case=True
"""
from absl import flags, logging

from bert_tf import flags as bert_flags
from bert_tf.data import vocab as vocab_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text file glob(s), comma-separated (e.g. prepare_corpus.py's output).")
flags.DEFINE_string("output_file", None, "The vocab.txt to write.")
flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size (the model's vocab_size); the learner aims at most this "
                     "many tokens and [unusedN] tokens fill the rest unless --nopad_to_vocab_size.", lower_bound=1)
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (an uncased vocab), as FullTokenizer will.")
flags.DEFINE_integer("num_unused", 994, "[unusedN] tokens reserved at the start (994 in the released vocabs: 99 "
                     "before [UNK] [CLS] [SEP] [MASK], the rest after).", lower_bound=0)
flags.DEFINE_bool("pad_to_vocab_size", True, "Append further [unusedN] tokens so the file has exactly vocab_size "
                  "lines.")
flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size: the most frequent characters kept; words with other "
                     "characters are not learned from (they become [UNK]).", lower_bound=1)
flags.DEFINE_integer("max_token_length", 50, "Words longer than this are not learned from.", lower_bound=1)
flags.DEFINE_float("slack_ratio", 0.05, "The learner accepts a vocabulary between (1 - slack_ratio) * vocab_size "
                   "and vocab_size tokens.", lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_integer("lower_thresh", 10, "Lowest word-piece frequency threshold the learner's search tries: lower it "
                     "(e.g. 2) to reach a large vocab_size on a small corpus.", lower_bound=1)
flags.DEFINE_integer("max_lines", None, "Count words in at most this many lines (a sample of a large corpus).",
                     lower_bound=1)
flags.DEFINE_integer("num_workers", 1, "Processes counting words.", lower_bound=1)


def main(_):
    vocab = vocab_lib.build_vocab(
        FLAGS.input_file, FLAGS.output_file, vocab_size=FLAGS.vocab_size, do_lower_case=FLAGS.do_lower_case,
        num_unused=FLAGS.num_unused, num_workers=FLAGS.num_workers, max_lines=FLAGS.max_lines,
        pad_to_vocab_size=FLAGS.pad_to_vocab_size, max_unique_chars=FLAGS.max_unique_chars,
        max_token_length=FLAGS.max_token_length, slack_ratio=FLAGS.slack_ratio, lower_thresh=FLAGS.lower_thresh)
    learned = sum(1 for t in vocab if not (t.startswith("[") and t.endswith("]")))
    logging.info("Wrote %d tokens (%d learned) to %s", len(vocab), learned, FLAGS.output_file)


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file"])
