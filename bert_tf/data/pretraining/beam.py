"""Pre-training data as an Apache Beam pipeline (the `beam` extra): `shards.run_sharded`'s shards, seeds and examples,
beyond one machine. Written "per_shard" (default: byte for byte `run_sharded`'s files, each renamed when complete) or
by a "sink" (`beam.io.WriteToTFRecord`: the same examples, spread as the runner likes). Workers need bert_tf and must
read the inputs and vocab (e.g. gs:// on Dataflow).
"""
import contextlib

try:
    import apache_beam as beam
except ImportError:  # pragma: no cover - the module is usable only with the `beam` extra
    raise ImportError("bert_tf.data.pretraining.beam needs Apache Beam: pip install -e '.[beam]' in "
                      "bert-tf's clone (or pip install apache-beam).") from None

from bert_tf import fileio
from bert_tf.data.pretraining import instances, shards, wire

_NAMESPACE = "bert_tf.data.pretraining"
READERS = 16  # the most workers that read one compressed input, each decompressing it up to its first shard


class ShardFn(beam.DoFn):
    """A run of shards [(index, ranges, path)] -> with `write`, each shard's file written and (path, examples) yielded;
    else the shards' serialized tf.train.Examples."""

    def __init__(self, config, write):
        super().__init__()
        self._config, self._write = config, write
        self._examples = beam.metrics.Metrics.counter(_NAMESPACE, "examples")
        self._shards = beam.metrics.Metrics.counter(_NAMESPACE, "shards")

    def process(self, run):
        with contextlib.closing(shards.RangeReader()) as reader:
            for index, ranges, path in run:
                examples = shards.shard_examples(index, ranges, self._config, reader)
                if self._write:
                    wire.write_examples(examples, [path], self._config["gzip"])
                self._examples.inc(len(examples))
                self._shards.inc()
                yield from [(path, len(examples))] if self._write else examples


def build_pipeline(pipeline, runs, config, output_file, write_mode="per_shard", num_output_shards=0):
    """Adds the transforms over `runs` to `pipeline`; returns the final PCollection: (path, count) per shard for
    "per_shard", the written file names for "sink"."""
    spread = (pipeline
              | "Shards" >> beam.Create(runs)
              | "Spread" >> beam.Reshuffle())
    if write_mode == "per_shard":
        return spread | "MakeAndWriteShards" >> beam.ParDo(ShardFn(config, write=True))
    if write_mode == "sink":
        compression = beam.io.filesystem.CompressionTypes.GZIP if config["gzip"] else \
            beam.io.filesystem.CompressionTypes.UNCOMPRESSED
        return (spread
                | "MakeExamples" >> beam.ParDo(ShardFn(config, write=False))
                | "Write" >> beam.io.WriteToTFRecord(output_file, num_shards=num_output_shards,
                                                     compression_type=compression))
    raise ValueError(f"Unknown write_mode {write_mode!r} (per_shard or sink).")


def run(input_file, output_file, vocab_file, shard_size=shards.SHARD_SIZE, write_mode="per_shard",
        num_output_shards=0, pipeline_options=None, **options):
    """Runs the pipeline; returns the shard paths ("per_shard") or None ("sink"). `options`: `instances.Options`'
    fields; `pipeline_options`: a PipelineOptions or a list of Beam flags (default DirectRunner)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    config = shards.make_config(vocab_file, output_file, **options)
    tasks = shards.plan(fileio.expand_patterns(input_file), output_file, shard_size)
    instances.remove_leftovers([output_file])
    if pipeline_options is None or isinstance(pipeline_options, (list, tuple)):
        pipeline_options = PipelineOptions(list(pipeline_options or []))
    with beam.Pipeline(options=pipeline_options) as pipeline:
        build_pipeline(pipeline, shards.runs(tasks, READERS), config, output_file, write_mode, num_output_shards)
    return [path for _, _, path in tasks] if write_mode == "per_shard" else None
