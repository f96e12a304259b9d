"""Create masked-LM / next-sentence pre-training examples (the original create_pretraining_data.py, same flags).

Exact mode (default) writes the same tf.train.Examples in the same order as the original:
  python run_scripts/create_pretraining_data.py --input_file=corpus.txt --output_file=/tmp/tf_examples.tfrecord \
    --vocab_file=$BERT_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 \
    --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Fast mode (--num_workers N): shards made in parallel, resumable, written to <output_file>-00000-of-000NN ...
(bert_tf/data/pretraining/shards.py says how it differs):
  python run_scripts/create_pretraining_data.py --input_file='wiki/*.txt' --output_file=/data/wiki \
    --vocab_file=$BERT_DIR/vocab.txt --num_workers=16 --shard_size=1000 --gzip
"""
from absl import flags, logging

from bert_tf import flags as bert_flags
from bert_tf.data.pretraining import instances, shards

FLAGS = flags.FLAGS
bert_flags.define_pretraining_data_flags()
flags.DEFINE_integer("num_workers", 0, "0 (default): exact mode, identical to the original. N >= 1: fast mode "
                     "with N worker processes.", lower_bound=0)
flags.DEFINE_bool("progress", True, "Fast mode: show a progress bar.")


def main(_):
    options = bert_flags.pretraining_data_options(FLAGS)
    if FLAGS.num_workers == 0:
        instances.run_exact(FLAGS.input_file, FLAGS.output_file, **options)
    else:
        paths, written, skipped = shards.run_sharded(
            FLAGS.input_file, FLAGS.output_file, num_workers=FLAGS.num_workers, shard_size=FLAGS.shard_size,
            progress=FLAGS.progress, **options)
        logging.info("%d shard files: %s ... %s", len(paths), paths[0], paths[-1])


if __name__ == "__main__":
    bert_flags.run(main, required=["input_file", "output_file", "vocab_file"])
