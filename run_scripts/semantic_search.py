"""Semantic search with sentence embeddings: the sentences of a file nearest each query, by cosine similarity.

Sentence-transformers' embeddings (bert_tf/inference/embeddings.py) from any BERT checkpoint bert-tf reads. Writes
one JSON line per query to --output_file, {"query", "results": [{"line", "text", "score"}]}, and prints them.

Example (the real MiniLM as an original checkpoint, as the quickstart writes it):
  python run_scripts/semantic_search.py --input_file=sentences.txt --query="a film about war" --top_k=3 \
    --init_checkpoint=$MINILM/bert_model.ckpt --vocab_file=$MINILM/vocab.txt --max_seq_length=256 \
    --output_file=search.jsonl
"""
from absl import flags

from bert_tf import flags as bert_flags
from bert_tf.inference import embeddings
from bert_tf.text import packing

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "The sentences to search: a text file, one sentence per line.")
flags.DEFINE_multi_string("query", [], "A query (repeat the flag for several).")
flags.DEFINE_string("query_file", None, "More queries: a text file, one per line.")
flags.DEFINE_string("output_file", None, "Where to write the results (JSON lines, one per query).")
flags.DEFINE_integer("top_k", 5, "How many sentences to give for each query.", lower_bound=1)
flags.DEFINE_enum("pooling", "mean", ["mean", "cls"], "The sentence embedding: the mean of the last layer over the "
                  "real tokens (sentence-transformers' all-MiniLM-L6-v2) or the [CLS] vector.")
flags.DEFINE_bool("normalize_embeddings", True, "Divide each embedding by its L2 norm (all-MiniLM-L6-v2's Normalize; "
                  "the cosine similarity is the same either way).")
bert_flags.define_model_flags()
FLAGS.set_default("max_seq_length", 256)  # all-MiniLM-L6-v2's, as bert_tf.inference.embeddings
flags.DEFINE_integer("batch_size", 32, "Sentences per batch (of --max_seq_length tokens; shorter sentences share a "
                     "batch's tokens).", lower_bound=1)
flags.DEFINE_bool("use_xla", False, "Compile the encoder with XLA.")
bert_flags.define_length_flags()
flags.DEFINE_integer("doc_stride", 0, packing.DOC_STRIDE_HELP + " A text's embedding is then pooled over its windows: "
                     "--pooling=mean, the mean over its tokens each counted once, from the window where it has the "
                     "most context; cls, the mean of the windows' [CLS] vectors; normalized after pooling.",
                     lower_bound=0)


def main(_):
    results = embeddings.run(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file, queries=FLAGS.query, query_file=FLAGS.query_file,
        top_k=FLAGS.top_k, init_checkpoint=FLAGS.init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=bert_flags.given(FLAGS, "do_lower_case"),
        max_seq_length=FLAGS.max_seq_length, pooling=FLAGS.pooling, normalize_embeddings=FLAGS.normalize_embeddings,
        batch_size=FLAGS.batch_size, use_xla=FLAGS.use_xla, pad_to_max_seq_length=FLAGS.pad_to_max_seq_length,
        seq_length_multiple=FLAGS.seq_length_multiple, doc_stride=FLAGS.doc_stride)
    for result in results:
        print(f"\n{result['query']}")
        for hit in result["results"]:
            print(f"  {hit['score']:.3f}  {hit['text']}")


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file"])
