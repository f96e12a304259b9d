"""Turn a Wikipedia XML dump (.xml.bz2) or plain text files into create_pretraining_data.py's input format:
one sentence per line, a blank line between documents. Needs the `corpus` extra.

Example:
  python run_scripts/prepare_corpus.py --input_file='enwiki-*-pages-articles*.xml*.bz2' \
    --output_file=wiki.txt --num_workers=8
"""
from absl import flags, logging

from bert_tf import flags as bert_flags
from bert_tf.data import corpus

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input file glob(s), comma-separated: MediaWiki XML dumps "
                    "(.xml, .xml.bz2, .xml.gz) and/or plain text files (optionally .bz2/.gz).")
flags.DEFINE_string("output_file", None, "The text file to write (written to a temporary name, then renamed).")
flags.DEFINE_enum("input_format", "auto", ["auto", "wiki", "text"], "auto: a file whose name has .xml is a wiki "
                  "dump, others are plain text.")
flags.DEFINE_enum("document_boundary", "blank_line", ["blank_line", "line", "file"], "For plain text inputs: what "
                  "separates documents (blank lines, every line, or one document per file).")
flags.DEFINE_enum("sentence_splitter", "pysbd", ["pysbd", "line"], "pysbd: rule-based sentence splitting; line: "
                  "each input line (paragraph) is already one sentence.")
flags.DEFINE_string("language", "en", "Language code for the sentence splitter.")
flags.DEFINE_integer("min_sentence_chars", 5, "Drop sentences shorter than this many characters (leftovers of "
                     "removed markup).", lower_bound=0)
flags.DEFINE_integer("min_document_sentences", 1, "Drop documents with fewer sentences than this.", lower_bound=0)
flags.DEFINE_integer("max_documents", None, "Stop after writing this many documents.", lower_bound=1)
flags.DEFINE_integer("num_workers", 1, "Processes converting documents (wikitext parsing and sentence splitting).",
                     lower_bound=1)


def main(_):
    num_documents, num_sentences = corpus.prepare_corpus(
        FLAGS.input_file, FLAGS.output_file, max_documents=FLAGS.max_documents, progress=True,
        input_format=FLAGS.input_format, document_boundary=FLAGS.document_boundary,
        sentence_splitter=FLAGS.sentence_splitter, language=FLAGS.language,
        min_sentence_chars=FLAGS.min_sentence_chars, min_document_sentences=FLAGS.min_document_sentences,
        num_workers=FLAGS.num_workers)
    logging.info("Wrote %d documents, %d sentences to %s", num_documents, num_sentences, FLAGS.output_file)


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file"])
