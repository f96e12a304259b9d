"""SWAG (the BERT paper's Section 4.4 task): pick a video caption's ending out of four, with BertMultipleChoice.

Data: data_dir's official SWAG CSVs (train.csv, val.csv, test.csv without `label`). Each choice is the pair (sent1,
sent2 + " " + ending_i), packed as the original packs pairs; the model scores each choice's [CLS] vector
(`cls/swag/output_weights` [1, H]), the loss is the cross-entropy of a softmax over the four. No eval_metrics.json or
--class_weights: the classes are choice positions.
"""
import collections
import csv
import io
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.model import task_models
from bert_tf.model.task_models import NUM_CHOICES
from bert_tf.tasks import result_files
from bert_tf.tasks.task import Task, write_train_records
from bert_tf.text import packing, tokenization
from bert_tf.training import prediction

ENDING_COLUMNS = tuple(f"ending{i}" for i in range(NUM_CHOICES))
TEXT_COLUMNS = ("sent1", "sent2") + ENDING_COLUMNS

# label: int in [0, NUM_CHOICES) or None (test set); file, line: where the example is.
InputExample = collections.namedtuple("InputExample", ["guid", "context", "start_ending", "endings", "label",
                                                       "file", "line"])
# input_ids, input_mask, segment_ids: [NUM_CHOICES][max_seq_length] ints; label: int (0 when unknown).
InputFeatures = collections.namedtuple("InputFeatures", ["input_ids", "input_mask", "segment_ids", "label"])


# --- reading ---------------------------------------------------------------------------------------------------

def read_swag(input_file, set_type="data", require_label=True):
    """A SWAG CSV file -> [InputExample]. `require_label` (train, val): each row needs a label in 0..3; else an empty
    label means none."""
    text = fileio.read_text(input_file, encoding="utf-8-sig")
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next((row for row in rows if any(cell.strip() for cell in row)), None)
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
            try:
                label = int(row[label_index].strip())
            except ValueError:
                raise ValueError(f"{where}: label {row[label_index]!r} is not an integer "
                                 f"(0..{NUM_CHOICES - 1}).") from None
            if not 0 <= label < NUM_CHOICES:
                raise ValueError(f"{where}: label {label} is out of range (0..{NUM_CHOICES - 1}).")
        examples.append(InputExample(
            f"{set_type}-{len(examples)}", row[index["sent1"]], row[index["sent2"]],
            [row[index[name]] for name in ENDING_COLUMNS], label, input_file, rows.line_num))
    if not examples:
        raise ValueError(f"{input_file}: no examples after the header.")
    return examples


# --- features --------------------------------------------------------------------------------------------------

def convert_example(ex_index, example, max_seq_length, tokenizer, cut=None):
    """One example -> InputFeatures, each choice packed `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; `cut`: a Counter of
    what truncation cut."""
    context = tokenizer.tokenize(example.context)
    ids, masks, segments = [], [], []
    for choice, ending in enumerate(example.endings):
        tokens, segment_ids = packing.pack_tokens(
            list(context), tokenizer.tokenize(example.start_ending + " " + ending), max_seq_length, always_pair=True,
            cut=cut)
        input_ids, input_mask, segment_ids = packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens),
                                                                segment_ids, max_seq_length)
        ids.append(input_ids)
        masks.append(input_mask)
        segments.append(segment_ids)
        if ex_index < 5:
            logging.info("*** Example %s choice %d ***\ntokens: %s\nlabel: %s", example.guid, choice,
                         " ".join(tokenization.printable_text(t) for t in tokens), example.label)
    return InputFeatures(ids, masks, segments, example.label if example.label is not None else 0)


def convert_examples_to_features(examples, max_seq_length, tokenizer, what="SWAG"):
    """Yields the InputFeatures of `examples`, in order, then logs how many choices were cut."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], [SEP], [SEP]); got {max_seq_length}.")

    def features():
        cut = collections.Counter()
        for i, example in enumerate(examples):
            yield convert_example(i, example, max_seq_length, tokenizer, cut)
        packing.log_cut(cut, f"{what} (each choice a text)", max_seq_length)
    return features()


def features_to_arrays(features):
    """[InputFeatures] -> (features dict of int32 [N, C, S], labels dict {"label": int32 [N]})."""
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32) for name in packing.INPUT_NAMES}
    return inputs, {"label": np.array([f.label for f in features], np.int32)}


# --- model, loss, metrics --------------------------------------------------------------------------------------

def choice_loss(labels, outputs):
    """Per-example loss [B]: the gold choice's cross-entropy under a softmax over the choices."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label"], tf.int32),
                                                          logits=tf.cast(outputs["logits"], tf.float32))


def predict_probabilities(trainer, features, batch_size, with_labels, fixed_batches=False, lengths=None):
    """-> (probabilities [N, C], losses or None), as `ner.predict_windows`."""
    inputs, labels = features_to_arrays(features)
    outputs = list(prediction.predict_in_order(trainer, (inputs, labels) if with_labels else inputs, batch_size,
                                               lengths, packing.INPUT_NAMES, fixed_batches, with_loss=with_labels))
    probabilities = [batch["probabilities"] for batch in outputs]
    return (np.concatenate(probabilities) if probabilities else np.zeros((0, NUM_CHOICES), np.float32),
            prediction.estimator_losses(outputs) if with_labels else None)


def accuracy(probabilities, labels):
    return float(np.mean(np.argmax(probabilities, axis=-1) == np.asarray(labels))) if len(labels) else 0.0


# --- the task (bert_tf.tasks.runner runs it) ------------------------------------------------------------------

class SwagTask(Task):
    """run_swag.py's task: `data_dir`'s SWAG CSV files -> BertMultipleChoice."""
    spec = task_models.REGISTRY["swag"]
    loss = staticmethod(choice_loss)

    def __init__(self, data_dir):
        self.data_dir = data_dir
        self.examples = {}

    def read_inputs(self, run, config):
        """Reads and checks each input file the run needs, before any model work."""
        files = {"train": (run.do_train, "train.csv", True), "dev": (run.do_eval, "val.csv", True),
                 "test": (run.do_predict, "test.csv", False)}
        self.examples = {split: read_swag(os.path.join(self.data_dir, name), split, require_label=labelled)
                         for split, (wanted, name, labelled) in files.items() if wanted}

    def train_data(self, run, tokenizer, trainer):
        """Writes work_dir/train.tf_record: the choices flattened, int64 [NUM_CHOICES * max_seq_length], then label."""
        seq_length = run.max_seq_length
        schema = {name: tf.io.FixedLenFeature([NUM_CHOICES * seq_length], tf.int64) for name in packing.INPUT_NAMES}
        schema["label"] = tf.io.FixedLenFeature([], tf.int64)

        def decode(parsed):
            inputs = {name: tf.reshape(parsed[name], [NUM_CHOICES, seq_length]) for name in packing.INPUT_NAMES}
            return inputs, {"label": parsed["label"]}

        features = convert_examples_to_features(self.examples["train"], seq_length, tokenizer, "train.csv")
        rows = ({**{name: np.ravel(getattr(f, name)) for name in packing.INPUT_NAMES}, "label": f.label}
                for f in features)
        return write_train_records(trainer, rows, schema, decode, run.sequence_lengths, packing.INPUT_NAMES)

    def evaluate(self, run, tokenizer, trainer):
        """Writes val.csv's eval_results.txt (eval_accuracy, eval_loss, loss, global_step); -> the results."""
        examples = self.examples["dev"]
        logging.info("***** Running evaluation *****")
        logging.info("  Num examples = %d", len(examples))
        features = list(convert_examples_to_features(examples, run.max_seq_length, tokenizer, "val.csv"))
        probabilities, losses = predict_probabilities(trainer, features, run.eval_batch_size, True,
                                                      run.fixed_batches, run.sequence_lengths)
        results = {"eval_accuracy": accuracy(probabilities, [e.label for e in examples]),
                   "global_step": trainer.step, **losses}
        result_files.write_eval_results(os.path.join(run.output_dir, "eval_results.txt"), results)
        return results

    def predict(self, run, tokenizer, trainer):
        """Writes test_results.tsv: each test.csv example's four probabilities."""
        examples = self.examples["test"]
        logging.info("***** Running prediction *****")
        logging.info("  Num examples = %d", len(examples))
        features = list(convert_examples_to_features(examples, run.max_seq_length, tokenizer, "test.csv"))
        probabilities, _ = predict_probabilities(trainer, features, run.predict_batch_size, False,
                                                 run.fixed_batches, run.sequence_lengths)
        if all(e.label is not None for e in examples):
            logging.info("Test set (its labels): accuracy = %.4f", accuracy(probabilities, [e.label for e in examples]))
        fileio.write_text_atomically(os.path.join(run.output_dir, "test_results.tsv"),
                                     result_files.format_probabilities(probabilities))
