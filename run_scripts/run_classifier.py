"""Fine-tune BERT for sentence (pair) classification: the original run_classifier.py, same flags and outputs.

Tasks: cola, mnli, mrpc, xnli (as the original), sst-2, qqp, qnli, rte, sts-b (regression), wnli, and tsv (your
own train/dev/test.tsv with a header naming text_a, label, optional text_b and id).

Example (MRPC, as in the original README):
  python run_scripts/run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Outputs in output_dir: checkpoints (ckpt-<step>), train/eval/predict.tf_record, eval_results.txt,
test_results.tsv, the GLUE submission file (MRPC.tsv, MNLI-m.tsv, ...; predictions.tsv for tsv) and, for the tsv
task, label_list.txt.
"""
import keras
from absl import app, flags, logging

from bert_tf import flags as bert_flags
from bert_tf.heads import BertClassifier
from bert_tf.tasks import classifier, job
from bert_tf.training.trainer import Trainer

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files (or other data files) "
                    "for the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train: "
                    + ", ".join(classifier.PROCESSORS) + ".")
flags.DEFINE_string("xnli_language", "zh", "XNLI: the language to train (translated MultiNLI) and evaluate on.")
flags.DEFINE_integer("seed", None, "Seed for Python, NumPy and TensorFlow (head initialization, dropout, "
                     "shuffling); unset: not seeded, as the original.")
bert_flags.define_model_flags()
bert_flags.define_run_flags()


def main(_):
    processor = classifier.get_processor(FLAGS.task_name, xnli_language=FLAGS.xnli_language)
    config, tokenizer = job.prepare(FLAGS)
    label_list = classifier.prepare_label_list(processor, FLAGS.data_dir, FLAGS.output_dir, FLAGS.do_train)
    if FLAGS.do_eval:  # a dev label the model cannot know: an error now, not after training
        classifier.check_dev_labels(processor, FLAGS.data_dir, label_list)
    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)

    regression = processor.is_regression
    num_labels = 1 if regression else len(label_list)
    trainer = Trainer.from_flags(FLAGS, lambda: BertClassifier(config, num_labels, regression=regression),
                                 classifier.loss_fn_for(processor))
    fixed_batches = FLAGS.use_tpu or FLAGS.distribution_strategy == "tpu"
    common = dict(trainer=trainer, processor=processor, tokenizer=tokenizer, label_list=label_list,
                  data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length)

    if FLAGS.do_train:
        classifier.train(**common, train_batch_size=FLAGS.train_batch_size,
                         num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=FLAGS.warmup_proportion,
                         shuffle_seed=FLAGS.seed)
    else:  # eval/predict only: the latest checkpoint of output_dir, else init_checkpoint
        trainer.restore_for_predict(required_heads=("classifier",))
    global_step = trainer.step

    if FLAGS.do_eval:
        classifier.evaluate(**common, eval_batch_size=FLAGS.eval_batch_size, global_step=global_step,
                            fixed_batches=fixed_batches)
    if FLAGS.do_predict:
        classifier.predict(**common, predict_batch_size=FLAGS.predict_batch_size, fixed_batches=fixed_batches)
    job.export_if_requested(FLAGS, trainer, "classifier", None if regression else label_list)
    logging.info("Done; outputs in %s", FLAGS.output_dir)


if __name__ == "__main__":
    flags.mark_flags_as_required(["data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"])
    app.run(main)
