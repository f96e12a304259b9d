"""create_pretraining_data.py's fast mode as an Apache Beam pipeline (the `beam` extra): the same shards, seeds and
examples, on any Beam runner.

Flags: the original's, plus --shard_size, --gzip, --write_mode, --num_output_shards and --runner. Every flag this
script does not know is passed to Beam as a pipeline option (--direct_num_workers, --project, --region,
--temp_location, --setup_file, ...).

Examples:
  python run_scripts/create_pretraining_data_beam.py --input_file=wiki.txt --output_file=out/wiki.tfrecord \
    --vocab_file=vocab.txt --shard_size=1000 --direct_num_workers=8 --direct_running_mode=multi_processing

  python run_scripts/create_pretraining_data_beam.py --runner=DataflowRunner --project=P --region=R \
    --temp_location=gs://B/tmp --setup_file=./setup.py \
    --input_file='gs://B/text/*.txt' --output_file=gs://B/tfrecords/wiki --vocab_file=gs://B/vocab.txt
"""
import sys

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of files; globs allowed): one "
                    "sentence per line, a blank line between documents.")
flags.DEFINE_string("output_file", None, "Prefix of the output TFRecord shards: <output_file>-SSSSS-of-NNNNN.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models, False for cased).")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking rather than per-WordPiece "
                  "masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation (shard i uses shard_seed(seed, i)).")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are shorter than the "
                   "maximum length.")
flags.DEFINE_integer("shard_size", 1000, "Documents per shard (a work item; NSP random B segments come from the "
                     "same shard).")
flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecords.")
flags.DEFINE_enum("write_mode", "per_shard", ["per_shard", "sink"], "per_shard: each worker writes its shard's "
                  "file (the same files as create_pretraining_data.py's fast mode); sink: beam.io.WriteToTFRecord.")
flags.DEFINE_integer("num_output_shards", 0, "sink mode: number of output files (0: the runner decides).")
flags.DEFINE_string("runner", "DirectRunner", "Beam runner: DirectRunner, DataflowRunner, FlinkRunner, "
                    "SparkRunner, ...")


def parse_flags(argv):
    """absl parses its own flags; the rest (Beam pipeline options) is kept for main."""
    return FLAGS(argv, known_only=True)


def main(argv):
    from apache_beam.options.pipeline_options import PipelineOptions

    from bert_tf import beam_pipeline

    beam_args = list(argv[1:])
    options = PipelineOptions(beam_args, runner=FLAGS.runner)
    logging.info("Beam runner %s, pipeline options %s", FLAGS.runner, beam_args)
    paths = beam_pipeline.run(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, random_seed=FLAGS.random_seed,
        dupe_factor=FLAGS.dupe_factor, masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
        shard_size=FLAGS.shard_size, gzip=FLAGS.gzip, write_mode=FLAGS.write_mode,
        num_output_shards=FLAGS.num_output_shards, pipeline_options=options)
    if paths:
        logging.info("Wrote %d shards: %s ... %s", len(paths), paths[0], paths[-1])
    else:
        logging.info("Wrote the examples to %s-*", FLAGS.output_file)


if __name__ == "__main__":
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
    app.run(main, argv=sys.argv, flags_parser=parse_flags)
