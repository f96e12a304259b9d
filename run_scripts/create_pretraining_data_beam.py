"""create_pretraining_data.py's fast mode as an Apache Beam pipeline (the `beam` extra), on any Beam runner.

A flag this script does not know is passed to Beam as a pipeline option (--direct_num_workers, --project, ...).

Examples:
  python run_scripts/create_pretraining_data_beam.py --input_file=wiki.txt --output_file=out/wiki.tfrecord \
    --vocab_file=vocab.txt --shard_size=1000 --direct_num_workers=8 --direct_running_mode=multi_processing

  python run_scripts/create_pretraining_data_beam.py --runner=DataflowRunner --project=P --region=R \
    --temp_location=gs://B/tmp --setup_file=./setup.py \
    --input_file='gs://B/text/*.txt' --output_file=gs://B/tfrecords/wiki --vocab_file=gs://B/vocab.txt
"""
import sys

from absl import flags, logging

from bert_tf import flags as bert_flags

FLAGS = flags.FLAGS
bert_flags.define_pretraining_data_flags()
flags.DEFINE_enum("write_mode", "per_shard", ["per_shard", "sink"], "per_shard: each worker writes its shard's "
                  "file (the same files as create_pretraining_data.py's fast mode); sink: beam.io.WriteToTFRecord.")
flags.DEFINE_integer("num_output_shards", 0, "sink mode: number of output files (0: the runner decides).",
                     lower_bound=0)
flags.DEFINE_string("runner", "DirectRunner", "Beam runner: DirectRunner, DataflowRunner, FlinkRunner, "
                    "SparkRunner, ...")


def parse_flags(argv):
    """absl parses its own flags; the rest (Beam pipeline options) is kept for main."""
    return FLAGS(argv, known_only=True)


def main(argv):
    from apache_beam.options.pipeline_options import PipelineOptions

    from bert_tf.data.pretraining import beam

    beam_args = list(argv[1:])
    options = PipelineOptions(beam_args, runner=FLAGS.runner)
    logging.info("Beam runner %s, pipeline options %s", FLAGS.runner, beam_args)
    paths = beam.run(FLAGS.input_file, FLAGS.output_file, shard_size=FLAGS.shard_size, write_mode=FLAGS.write_mode,
                     num_output_shards=FLAGS.num_output_shards, pipeline_options=options,
                     **bert_flags.pretraining_data_options(FLAGS))
    if paths:
        logging.info("Wrote %d shards: %s ... %s", len(paths), paths[0], paths[-1])
    else:
        logging.info("Wrote the examples to %s-*", FLAGS.output_file)


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file", "vocab_file"], argv=sys.argv,
                   flags_parser=parse_flags)
