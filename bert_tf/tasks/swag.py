"""SWAG (the BERT paper's Section 4.4 task): pick the ending of a video caption out of four, with BertMultipleChoice.

Data: data_dir holds the official SWAG CSV files, train.csv and val.csv (header
`,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label`) and test.csv (the
same without `label`). Columns are found by name; only sent1, sent2, ending0..ending3 and label are read.

Packing, as in the paper: each choice is a pair, text_a = sent1 (the context), text_b = sent2 + " " + ending_i,
packed `[CLS] a [SEP] b [SEP]` (segment 0 for [CLS] a [SEP], 1 for b [SEP]) and truncated to max_seq_length by
the original pair rule (`truncate_seq_pair`: drop from the end of the longer side). The model scores each choice
from its [CLS] vector (`cls/swag/output_weights` [1, H]) and takes a softmax over the four; the loss is the
cross-entropy of the gold choice.
"""
import collections
import csv
import io
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, heads, records, tokenization
from bert_tf.tasks import job, result_files
from bert_tf.text import truncate_seq_pair

NUM_CHOICES = 4
ENDING_COLUMNS = tuple(f"ending{i}" for i in range(NUM_CHOICES))
TEXT_COLUMNS = ("sent1", "sent2") + ENDING_COLUMNS
_INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")

# label: int in [0, NUM_CHOICES) or None (test set); file, line: where the example is.
InputExample = collections.namedtuple("InputExample", ["guid", "context", "start_ending", "endings", "label",
                                                       "file", "line"])
# input_ids, input_mask, segment_ids: [NUM_CHOICES][max_seq_length] ints; label: int (0 when unknown).
InputFeatures = collections.namedtuple("InputFeatures", ["input_ids", "input_mask", "segment_ids", "label"])


# --- reading ---------------------------------------------------------------------------------------------------

def read_swag(input_file, set_type="data", require_label=True):
    """Reads a SWAG CSV file -> [InputExample]. ValueError naming the file and line for bad input.

    With `require_label` (train.csv, val.csv) every row needs a label in 0..3; otherwise (test.csv) a label
    column is optional and its empty cells mean no label.
    """
    if not tf.io.gfile.exists(input_file):
        raise FileNotFoundError(f"Input file not found: {input_file}")
    with tf.io.gfile.GFile(input_file, "rb") as reader:
        data = reader.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ValueError(f"{input_file}:{line}: not valid UTF-8 ({err.reason}).") from None
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    while header is not None and not any(cell.strip() for cell in header):
        header = next(rows, None)
    if header is None:
        raise ValueError(f"{input_file}: empty file (expected a SWAG header: "
                         f",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label).")
    header = [cell.strip() for cell in header]
    required = TEXT_COLUMNS + (("label",) if require_label else ())
    missing = [name for name in required if name not in header]
    if missing:
        raise ValueError(f"{input_file}:{rows.line_num}: the header lacks column(s) {', '.join(missing)}; SWAG "
                         f"files have {', '.join(required)} (header found: {','.join(header)}).")
    index = {name: header.index(name) for name in header}
    label_index = index.get("label")
    examples = []
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue
        where = f"{input_file}:{rows.line_num}"
        if len(row) != len(header):
            absent = header[len(row):]
            detail = f" (no {', '.join(absent)})" if absent else ""
            raise ValueError(f"{where}: {len(row)} fields, the header has {len(header)}{detail}.")
        label = None
        if label_index is not None and (require_label or row[label_index].strip()):
            label = parse_label(row[label_index], where)
        examples.append(InputExample(
            f"{set_type}-{len(examples)}", row[index["sent1"]], row[index["sent2"]],
            [row[index[name]] for name in ENDING_COLUMNS], label, input_file, rows.line_num))
    if not examples:
        raise ValueError(f"{input_file}: no examples after the header.")
    return examples


def parse_label(text, where="label"):
    try:
        label = int(text.strip())
    except ValueError:
        raise ValueError(f"{where}: label {text!r} is not an integer (0..{NUM_CHOICES - 1}).") from None
    if not 0 <= label < NUM_CHOICES:
        raise ValueError(f"{where}: label {label} is out of range (0..{NUM_CHOICES - 1}).")
    return label


# --- features --------------------------------------------------------------------------------------------------

def convert_example(ex_index, example, max_seq_length, tokenizer):
    """One example -> InputFeatures: each choice packed `[CLS] sent1 [SEP] sent2 ending_i [SEP]`, zero-padded."""
    context = tokenizer.tokenize(example.context)
    ids, masks, segments = [], [], []
    for choice, ending in enumerate(example.endings):
        tokens_a = list(context)
        tokens_b = tokenizer.tokenize(example.start_ending + " " + ending)
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
        tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = [0] * (max_seq_length - len(input_ids))
        ids.append(input_ids + padding)
        masks.append([1] * len(input_ids) + padding)
        segments.append(segment_ids + padding)
        if ex_index < 5:
            logging.info("*** Example %s choice %d ***\ntokens: %s\nlabel: %s", example.guid, choice,
                         " ".join(tokenization.printable_text(t) for t in tokens), example.label)
    return InputFeatures(ids, masks, segments, example.label if example.label is not None else 0)


def convert_examples_to_features(examples, max_seq_length, tokenizer):
    """An iterator over the InputFeatures of `examples`, in order."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], [SEP], [SEP]); got {max_seq_length}.")
    return (convert_example(i, example, max_seq_length, tokenizer) for i, example in enumerate(examples))


def features_to_arrays(features):
    """[InputFeatures] -> (features dict of int32 [N, C, S], labels dict {"label": int32 [N]})."""
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32) for name in _INPUT_NAMES}
    return inputs, {"label": np.array([f.label for f in features], np.int32)}


# --- training data (TFRecord, like the original's train.tf_record) ----------------------------------------------

def write_tf_record(features, output_file):
    """Writes InputFeatures (choices flattened) to a TFRecord file, atomically. Returns the count."""
    count = 0
    with fileio.written_atomically(output_file) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for f in features:
            record = {name: tf.train.Feature(int64_list=tf.train.Int64List(
                value=[x for choice in getattr(f, name) for x in choice])) for name in _INPUT_NAMES}
            record["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[f.label]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=record)).SerializeToString())
            count += 1
    return count


def train_dataset_fn(input_file, seq_length, num_records):
    """The Trainer's dataset_fn(batch_size, input_context=None, seed=None): shuffled (order drawn from `seed`),
    repeated (features [B, C, S], {"label": [B]}) batches, remainder dropped."""
    spec = {name: tf.io.FixedLenFeature([NUM_CHOICES * seq_length], tf.int64) for name in _INPUT_NAMES}
    spec["label"] = tf.io.FixedLenFeature([], tf.int64)

    def decode(record):
        parsed = tf.io.parse_single_example(record, spec)
        inputs = {name: tf.reshape(tf.cast(parsed[name], tf.int32), [NUM_CHOICES, seq_length])
                  for name in _INPUT_NAMES}
        return inputs, {"label": tf.cast(parsed["label"], tf.int32)}

    return records.training_dataset_fn(input_file, decode, min(num_records, 10000))


# --- model, loss, metrics --------------------------------------------------------------------------------------

def choice_loss(labels, outputs):
    """Per-example loss [B]: cross-entropy of the gold choice under the softmax over the choices."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label"], tf.int32),
                                                          logits=tf.cast(outputs["logits"], tf.float32))


def model_builder(config):
    return lambda: heads.BertMultipleChoice(config, num_choices=NUM_CHOICES)


def predict_probabilities(trainer, features, batch_size, with_labels, fixed_batches=False):
    """-> (probabilities [N, C], None or the losses dict: `eval_loss`, the mean per-example loss, and `loss`, the
    mean of the batches' means as the Estimator's). With `fixed_batches` (TPU) the last batch is filled up with
    all-padding examples, whose outputs are dropped."""
    inputs, labels = features_to_arrays(features)
    padding = -len(features) % batch_size if fixed_batches else 0
    if padding:
        inputs, labels = ({k: np.concatenate([v, np.zeros((padding,) + v.shape[1:], v.dtype)]) for k, v in d.items()}
                          for d in (inputs, labels))
    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels) if with_labels else inputs)
    dataset = dataset.batch(batch_size, drop_remainder=fixed_batches)
    probabilities, losses, batch_means = [], [], []
    for outputs in trainer.predict(dataset, with_loss=with_labels):
        real = min(len(outputs["probabilities"]), len(features) - sum(len(p) for p in probabilities))
        probabilities.append(outputs["probabilities"][:real])
        if with_labels:
            losses.append(outputs["per_example_loss"][:real])
            batch_means.append(float(np.mean(losses[-1])))
    probabilities = np.concatenate(probabilities) if probabilities else np.zeros((0, NUM_CHOICES), np.float32)
    if len(probabilities) != len(features):
        raise RuntimeError(f"The model returned {len(probabilities)} predictions for {len(features)} examples.")
    if not with_labels:
        return probabilities, None
    return probabilities, {"eval_loss": float(np.concatenate(losses).mean()), "loss": float(np.mean(batch_means))}


def accuracy(probabilities, labels):
    return float(np.mean(np.argmax(probabilities, axis=-1) == np.asarray(labels))) if len(labels) else 0.0










# --- the whole job ---------------------------------------------------------------------------------------------

def run(flag_values):
    """What run_swag.py does: train on train.csv, evaluate on val.csv, predict test.csv, as the flags say."""
    from bert_tf.training.trainer import Trainer, compute_train_steps

    fv = flag_values
    config, tokenizer = job.prepare(fv, exportable=False)

    # Read and check every input before the (long) training starts.
    train_examples = read_swag(os.path.join(fv.data_dir, "train.csv"), "train") if fv.do_train else None
    eval_examples = read_swag(os.path.join(fv.data_dir, "val.csv"), "dev") if fv.do_eval else None
    predict_examples = (read_swag(os.path.join(fv.data_dir, "test.csv"), "test", require_label=False)
                        if fv.do_predict else None)

    if fv.seed is not None:
        keras.utils.set_random_seed(fv.seed)
    trainer = Trainer.from_flags(fv, model_builder(config), choice_loss)
    fixed_batches = fv.use_tpu or fv.distribution_strategy == "tpu"

    if fv.do_train:
        train_file = os.path.join(fv.output_dir, "train.tf_record")
        num_examples = write_tf_record(convert_examples_to_features(train_examples, fv.max_seq_length, tokenizer),
                                       train_file)
        num_train_steps, num_warmup_steps = compute_train_steps(
            num_examples, fv.train_batch_size, fv.num_train_epochs, fv.warmup_proportion)
        logging.info("***** Running training *****")
        logging.info("  Num examples = %d", num_examples)
        logging.info("  Batch size = %d", fv.train_batch_size)
        logging.info("  Num steps = %d", num_train_steps)
        trainer.train(train_dataset_fn(train_file, fv.max_seq_length, num_examples), fv.train_batch_size,
                      num_train_steps, num_warmup_steps, seed=fv.seed)
    if fv.do_eval or fv.do_predict:
        trainer.restore_for_predict(required_heads=("choice",))

    if fv.do_eval:
        logging.info("***** Running evaluation *****")
        logging.info("  Num examples = %d", len(eval_examples))
        features = list(convert_examples_to_features(eval_examples, fv.max_seq_length, tokenizer))
        probabilities, losses = predict_probabilities(trainer, features, fv.eval_batch_size, True, fixed_batches)
        results = {"eval_accuracy": accuracy(probabilities, [e.label for e in eval_examples]),
                   "global_step": trainer.step, **losses}
        logging.info("***** Eval results *****")
        for key in sorted(results):
            logging.info("  %s = %s", key, results[key])
        result_files.write_eval_results(os.path.join(fv.output_dir, "eval_results.txt"), results)

    if fv.do_predict:
        logging.info("***** Running prediction *****")
        logging.info("  Num examples = %d", len(predict_examples))
        features = list(convert_examples_to_features(predict_examples, fv.max_seq_length, tokenizer))
        probabilities, _ = predict_probabilities(trainer, features, fv.predict_batch_size, False, fixed_batches)
        if all(e.label is not None for e in predict_examples):
            logging.info("Test set (its labels): accuracy = %.4f",
                         accuracy(probabilities, [e.label for e in predict_examples]))
        result_files.write_text_atomically(os.path.join(fv.output_dir, "test_results.tsv"),
                                           result_files.format_probabilities(probabilities))
    job.export_if_requested(fv, trainer)
