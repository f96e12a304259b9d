"""Pre-training data as an Apache Beam pipeline: the fast mode of bert_tf.data.pretraining.shards, beyond one machine.

The same shards, seeds and examples as `shards.run_sharded`: the launcher cuts the input (one sentence
per line, a blank line between documents) into shards of `shard_size` documents (`plan_shards`, a pre-pass that
reads the text but does not tokenize it); the pipeline spreads the shards over the workers, and each worker makes
its shard's instances with the library's algorithm and the shard's seed (`shard_seed(random_seed, index)`). A
worker takes a run of shards (`shards.runs`): each shard alone, or up to READERS runs of the consecutive shards of
a compressed input (.gz, .bz2), each read in one pass.

Two ways to write:

* "per_shard" (default): each shard is written by its worker to `<output_file>-<index:05d>-of-<num_shards:05d>`,
  under a temporary name renamed when complete (a retried bundle just rewrites it): byte for byte the files that
  `run_sharded` writes for the same flags.
* "sink": the examples go through `beam.io.WriteToTFRecord` (`--num_output_shards` files, 0 = the runner
  decides): the same examples as a multiset, spread over the files as the runner likes.

Any runner takes the pipeline (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner): pass its options
through. Workers need bert_tf installed and must read the inputs and the vocab (e.g. gs:// paths on Dataflow).
Needs the `beam` extra (apache-beam).
"""
import contextlib

try:
    import apache_beam as beam
except ImportError:  # pragma: no cover - the module is usable only with the `beam` extra
    raise ImportError("bert_tf.data.pretraining.beam needs Apache Beam: pip install 'bert-tf[beam]' "
                      "(or pip install apache-beam).") from None

from bert_tf import fileio
from bert_tf.data.pretraining import instances, shards

_NAMESPACE = "bert_tf.data.pretraining"
READERS = 16  # the most workers that read one compressed input, each decompressing it up to its first shard


class _ShardFn(beam.DoFn):
    """A DoFn over shard tasks with the pipeline config and example/shard counters."""

    def __init__(self, config):
        super().__init__()
        self._config = config
        self._examples = beam.metrics.Metrics.counter(_NAMESPACE, "examples")
        self._shards = beam.metrics.Metrics.counter(_NAMESPACE, "shards")


class WriteShardFn(_ShardFn):
    """A run of shards [(index, ranges, path)] -> makes and writes each shard's file (`shards.write_run`); yields
    (path, examples) for each."""

    def process(self, run):
        for path, count in shards.write_run(run, self._config):
            self._examples.inc(count)
            self._shards.inc()
            yield path, count


class ShardExamplesFn(_ShardFn):
    """A run of shards [(index, ranges, path)] -> their serialized tf.train.Examples."""

    def process(self, run):
        with contextlib.closing(shards.RangeReader()) as reader:
            for index, ranges, _ in run:
                examples = shards.shard_examples(index, ranges, self._config, reader)
                self._examples.inc(len(examples))
                self._shards.inc()
                yield from examples


def build_pipeline(pipeline, runs, config, output_file, write_mode="per_shard", num_output_shards=0):
    """Adds the transforms to `pipeline` (a beam.Pipeline) over `runs` (`shards.runs`). Returns the final
    PCollection: (path, count) per shard for "per_shard", the written file names for "sink"."""
    spread = (pipeline
              | "Shards" >> beam.Create(runs)
              | "Spread" >> beam.Reshuffle())
    if write_mode == "per_shard":
        return spread | "MakeAndWriteShards" >> beam.ParDo(WriteShardFn(config))
    if write_mode == "sink":
        compression = beam.io.filesystem.CompressionTypes.GZIP if config["gzip"] else \
            beam.io.filesystem.CompressionTypes.UNCOMPRESSED
        return (spread
                | "MakeExamples" >> beam.ParDo(ShardExamplesFn(config))
                | "Write" >> beam.io.WriteToTFRecord(output_file, num_shards=num_output_shards,
                                                     compression_type=compression))
    raise ValueError(f"Unknown write_mode {write_mode!r} (per_shard or sink).")


def run(input_file, output_file, vocab_file, do_lower_case=True, do_whole_word_mask=False, max_seq_length=128,
        max_predictions_per_seq=20, random_seed=12345, dupe_factor=10, masked_lm_prob=0.15, short_seq_prob=0.1,
        shard_size=1000, gzip=False, write_mode="per_shard", num_output_shards=0, pipeline_options=None):
    """Plans the shards, removes the temporaries that killed runs left beside the outputs, runs the pipeline to
    completion and returns the list of shard paths ("per_shard") or None ("sink": `beam.io.WriteToTFRecord` names
    the files `<output_file>-SSSSS-of-NNNNN`).

    `pipeline_options`: a beam PipelineOptions, or a list of Beam command-line flags (e.g.
    ["--runner=DirectRunner", "--direct_num_workers=2"]); default DirectRunner."""
    from apache_beam.options.pipeline_options import PipelineOptions

    config = shards.make_config(vocab_file, do_lower_case, do_whole_word_mask, max_seq_length,
                                max_predictions_per_seq, random_seed, dupe_factor, masked_lm_prob, short_seq_prob,
                                gzip, output_file=output_file)
    tasks = shards.plan(fileio.expand_patterns(input_file), output_file, shard_size)
    instances.remove_leftovers([output_file])
    if pipeline_options is None or isinstance(pipeline_options, (list, tuple)):
        pipeline_options = PipelineOptions(list(pipeline_options or []))
    with beam.Pipeline(options=pipeline_options) as pipeline:
        build_pipeline(pipeline, shards.runs(tasks, READERS), config, output_file, write_mode, num_output_shards)
    return [path for _, _, path in tasks] if write_mode == "per_shard" else None
