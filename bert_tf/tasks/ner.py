"""Named-entity recognition (the BERT paper's CoNLL-2003 task) with `BertTokenClassifier`.

Data: `data_dir`'s train.txt, valid.txt (or dev.txt) and test.txt in CoNLL-2003 format (a token a line, its first and
last whitespace column read; a blank line or `-DOCSTART-` ends a sentence). Labels: train.txt's sorted, or
`--label_list`; recorded in output_dir for later runs (`run_record`).

Each word's first sub-token carries its label; other positions have label id -1 (out of the loss and predictions). A
sentence over max_seq_length - 2 sub-tokens is split greedily into windows of whole words. Metrics: seqeval's
entity-level precision, recall and F1 (conlleval mode), micro and per type; token accuracy; eval_loss, the mean
per-window loss.
"""
import collections
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging
from seqeval import metrics as seqeval_metrics
from seqeval.metrics.sequence_labeling import get_entities

from bert_tf import fileio
from bert_tf.data import label_lists
from bert_tf.model import task_models
from bert_tf.tasks import result_files, run_record
from bert_tf.tasks.classifier.metrics import class_metrics, write_class_metrics
from bert_tf.tasks.classifier.task import ClassWeightedLoss, class_weights, parse_class_weights
from bert_tf.tasks.task import Task, write_train_records
from bert_tf.text import packing, tokenization
from bert_tf.training import prediction

IGNORE_ID = -1
DEV_FILES = ("valid.txt", "dev.txt")

# words, labels: lists of str; file, line: where the first word is (word i is on line + i).
InputExample = collections.namedtuple("InputExample", ["guid", "words", "labels", "file", "line"])
# One window of a sentence: words [word_start, word_start + len(word_positions)) of example `example_index`, the
# first sub-token of word word_start + k at position word_positions[k]. The arrays are [max_seq_length] int.
InputFeatures = collections.namedtuple("InputFeatures", [
    "example_index", "word_start", "word_positions", "input_ids", "input_mask", "segment_ids", "label_ids"])


# --- reading ---------------------------------------------------------------------------------------------------

def read_conll(input_file, set_type="data"):
    """Reads a CoNLL-2003 file -> [InputExample]; ValueError naming file and line for malformed input."""
    text = fileio.read_text(input_file)
    examples, words, labels = [], [], []
    num_columns = first_line = None
    start = 0

    def end_sentence():
        if words:
            examples.append(InputExample(f"{set_type}-{len(examples)}", list(words), list(labels), input_file,
                                         start))
            words.clear()
            labels.clear()

    for lineno, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):  # as bytes.splitlines splits
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            end_sentence()
            continue
        if num_columns is None:
            if len(fields) < 2:
                raise ValueError(f"{input_file}:{lineno}: malformed line {line!r}: expected whitespace-separated "
                                 f"columns `token ... label` (CoNLL-2003: token POS chunk NER), got 1 column.")
            num_columns, first_line = len(fields), lineno
        elif len(fields) != num_columns:
            raise ValueError(f"{input_file}:{lineno}: malformed line {line!r}: {len(fields)} columns, but line "
                             f"{first_line} has {num_columns} (token ... label).")
        if not words:
            start = lineno
        words.append(fields[0])
        labels.append(fields[-1])
    end_sentence()
    if not examples:
        raise ValueError(f"{input_file}: no sentences (the file is empty or holds only -DOCSTART- lines).")
    return examples


def dev_file(data_dir):
    """data_dir/valid.txt (CoNLL-2003's name) or data_dir/dev.txt."""
    for name in DEV_FILES:
        path = os.path.join(data_dir, name)
        if fileio.exists(path):
            return path
    raise FileNotFoundError(f"No dev set in {data_dir}: expected {' or '.join(DEV_FILES)}.")


# --- labels ----------------------------------------------------------------------------------------------------

def get_labels(examples):
    return sorted({label for example in examples for label in example.labels})


def check_labels(examples, label_list, source="the label list"):
    """ValueError naming the file and line of the first label of `examples` not in `label_list`."""
    known = set(label_list)
    for example in examples:
        for i, label in enumerate(example.labels):
            if label not in known:
                raise ValueError(f"{example.file}:{example.line + i}: unknown label {label!r} (word "
                                 f"{example.words[i]!r}); {source} has {', '.join(label_list)}.")


# --- features --------------------------------------------------------------------------------------------------

def split_windows(piece_counts, max_tokens):
    """[(first_word, end_word)]: words of `piece_counts` sub-tokens split greedily into windows of at most `max_tokens`
    (a longer word alone)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}.")
    windows, start, used = [], 0, 0
    for i, count in enumerate(piece_counts):
        if i > start and used + count > max_tokens:
            windows.append((start, i))
            start, used = i, 0
        used += count
    if start < len(piece_counts):
        windows.append((start, len(piece_counts)))
    return windows


def convert_example(example_index, example, label_map, max_seq_length, tokenizer):
    """One sentence -> [InputFeatures], one per window. `label_map`: label -> id."""
    unk = getattr(tokenizer.wordpiece_tokenizer, "unk_token", "[UNK]")
    pieces = [tokenizer.tokenize(word) or [unk] for word in example.words]  # at least one sub-token a word
    max_tokens = max_seq_length - 2
    features = []
    for first, end in split_windows([len(p) for p in pieces], max_tokens):
        tokens, label_ids, positions = ["[CLS]"], [IGNORE_ID], []
        for i in range(first, end):
            word_pieces = pieces[i][:max_tokens]
            positions.append(len(tokens))
            tokens.extend(word_pieces)
            label_ids.extend([label_map[example.labels[i]]] + [IGNORE_ID] * (len(word_pieces) - 1))
        tokens.append("[SEP]")
        label_ids.append(IGNORE_ID)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = max_seq_length - len(input_ids)
        features.append(InputFeatures(
            example_index, first, positions, input_ids + [0] * padding, [1] * len(input_ids) + [0] * padding,
            [0] * max_seq_length, label_ids + [IGNORE_ID] * padding))
        if example_index < 5 and len(features) == 1:
            logging.info("*** Example %s ***\ntokens: %s\nlabel_ids: %s", example.guid,
                         " ".join(tokenization.printable_text(t) for t in tokens),
                         " ".join(str(x) for x in label_ids))
    return features


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """Every window's InputFeatures, in order; labels are checked at once, not when iterated."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]); got {max_seq_length}.")
    check_labels(examples, label_list)
    label_map = {label: i for i, label in enumerate(label_list)}
    return (feature for example_index, example in enumerate(examples)
            for feature in convert_example(example_index, example, label_map, max_seq_length, tokenizer))


_FEATURES = (*packing.INPUT_NAMES, "label_ids")  # the arrays with a sequence axis


def features_to_arrays(features):
    """[InputFeatures] -> (features dict, labels dict) of int32 numpy arrays [N, S]."""
    arrays = {name: np.array([getattr(f, name) for f in features], np.int32) for name in _FEATURES}
    return {name: arrays[name] for name in packing.INPUT_NAMES}, {"label_ids": arrays["label_ids"]}


# --- model and loss --------------------------------------------------------------------------------------------

def masked_loss(labels, outputs):
    """Per-example loss [B]: mean cross-entropy over the positions whose label id is >= 0 (0 if there are none)."""
    label_ids = tf.cast(labels["label_ids"], tf.int32)
    logits = tf.cast(outputs["logits"], tf.float32)
    weights = tf.cast(label_ids >= 0, tf.float32)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(label_ids, 0), logits=logits)
    return tf.reduce_sum(cross_entropy * weights, -1) / tf.maximum(tf.reduce_sum(weights, -1), 1.0)


# --- prediction ------------------------------------------------------------------------------------------------

def predict_windows(trainer, features, batch_size, fixed_batches=False, lengths=None):
    """Runs the model on the windows -> ([each window's predicted label ids per word], the Estimator's losses)."""
    outputs = list(prediction.predict_in_order(trainer, features_to_arrays(features), batch_size, lengths, _FEATURES,
                                               fixed_batches, with_loss=True))
    label_ids = (row for batch in outputs for row in np.argmax(batch["logits"], axis=-1))
    return ([ids[feature.word_positions].tolist() for feature, ids in zip(features, label_ids)],
            prediction.estimator_losses(outputs))


def rejoin(examples, features, window_predictions, label_list):
    """Window predictions -> each sentence's predicted labels, every word once."""
    predicted = [[None] * len(example.words) for example in examples]
    for feature, ids in zip(features, window_predictions):
        row = predicted[feature.example_index]
        for k, label_id in enumerate(ids):
            if row[feature.word_start + k] is not None:
                raise RuntimeError(f"Word {feature.word_start + k} of example {feature.example_index} is in two "
                                   f"windows.")
            row[feature.word_start + k] = label_list[label_id]
    for example, row in zip(examples, predicted):
        if None in row:
            raise RuntimeError(f"{example.guid}: word {row.index(None)} got no prediction.")
    return predicted


def entities_from_tags(text, words, tags, scores=None):
    """The entities of `text` from its `words`' (word, start, end) tags, grouped as seqeval does -> [{"type", "text",
    "start", "end", "score"}]; score: the words' mean `scores` (None without)."""
    if len(tags) != len(words) or (scores is not None and len(scores) != len(words)):
        raise ValueError(f"{len(words)} words, but {len(tags)} tags"
                         + ("" if scores is None else f" and {len(scores)} scores") + ": expected one per word.")
    entities = []
    for entity_type, first, last in get_entities(list(tags)):
        start, end = words[first][1], words[last][2]
        score = None if scores is None else float(sum(scores[first:last + 1])) / (last + 1 - first)
        entities.append({"type": entity_type, "text": text[start:end], "start": start, "end": end, "score": score})
    return entities


def compute_metrics(gold, predicted):
    """Entity-level seqeval metrics -> (results: precision, recall, f1, accuracy and
    <TYPE>_precision/_recall/_f1/_support; the per-type report text)."""
    if len(gold) != len(predicted) or any(len(g) != len(p) for g, p in zip(gold, predicted)):
        raise ValueError("gold and predicted label sequences differ in length.")
    results = collections.OrderedDict([
        ("precision", seqeval_metrics.precision_score(gold, predicted, zero_division=0)),
        ("recall", seqeval_metrics.recall_score(gold, predicted, zero_division=0)),
        ("f1", seqeval_metrics.f1_score(gold, predicted, zero_division=0)),
        ("accuracy", seqeval_metrics.accuracy_score(gold, predicted)),
    ])
    report = seqeval_metrics.classification_report(gold, predicted, digits=4, output_dict=True, zero_division=0)
    for name, scores in report.items():
        if name.endswith(" avg"):
            continue
        for key in ("precision", "recall", "f1-score", "support"):
            results[f"{name}_{key.replace('-score', '')}"] = scores[key]
    text = seqeval_metrics.classification_report(gold, predicted, digits=4, zero_division=0)
    return results, text


def entity_metrics(gold, predicted, label_list):
    """eval_metrics.json's figures (`class_metrics`): seqeval's per entity type and the words' tag confusion matrix."""
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True, zero_division=0)
    per_type = {name: (scores["precision"], scores["recall"], scores["f1-score"], scores["support"])
                for name, scores in report.items() if not name.endswith(" avg")}
    index = {label: i for i, label in enumerate(label_list)}
    true_ids, predicted_ids = ([index[label] for labels in sequences for label in labels]
                               for sequences in (gold, predicted))
    return class_metrics(per_type, label_list, true_ids, predicted_ids)


def conll_output(examples, predicted):
    """The CoNLL lines: `token gold predicted` per word, a blank line after each sentence."""
    lines = []
    for example, labels in zip(examples, predicted):
        for word, gold, pred in zip(example.words, example.labels, labels):
            lines.append(f"{word} {gold} {pred}\n")
        lines.append("\n")
    return "".join(lines)


# --- the task (bert_tf.tasks.runner runs it) ------------------------------------------------------------------

def resolve_label_list(output_dir, data_dir, label_list=None, do_train=False):
    """-> (labels, their source): `label_list` (comma-separated), else those the training run in output_dir recorded
    (`run_record.recorded_labels`), else data_dir/train.txt's sorted labels."""
    saved_path, saved = run_record.recorded_labels(output_dir)
    if label_list is not None:  # "" (--label_list=) is an error of `parse`, not "no list"
        labels = label_lists.parse(label_list)
        label_lists.check_unchanged(labels, "--label_list", saved_path, saved)
        return labels, "--label_list"
    if saved is not None:
        return saved, saved_path
    train_file = os.path.join(data_dir, "train.txt")
    if not fileio.exists(train_file):
        raise ValueError(f"No label list: pass --label_list, or keep the training run's {task_models.METADATA_FILE} in "
                         f"output_dir, or have {train_file}.")
    if not do_train:
        logging.warning("No %s in output_dir: using the sorted labels of %s; they must be the labels the "
                        "checkpoint was trained with.", task_models.METADATA_FILE, train_file)
    return get_labels(read_conll(train_file, "train")), train_file


class NerTask(Task):
    """run_ner.py's task: `data_dir`'s CoNLL-2003 files -> BertTokenClassifier (`label_list`: `resolve_label_list`)."""
    spec = task_models.REGISTRY["ner"]
    loss = staticmethod(masked_loss)

    def __init__(self, data_dir, label_list=None):
        self.data_dir = data_dir
        self.label_list_arg = label_list
        self.label_list = None
        self.examples = {}

    def check_flags(self, run):
        parse_class_weights(run.class_weights)

    def read_inputs(self, run, config):
        """Resolves the labels, reads and checks each input file before any model work, and weighs the loss by
        --class_weights."""
        self.label_list, source = resolve_label_list(run.output_dir, self.data_dir, self.label_list_arg,
                                                     run.do_train)
        odd = [label for label in self.label_list
               if label != "O" and not (len(label) > 2 and label[0] in "BIES" and label[1] == "-")]
        if odd:
            logging.warning("Labels %s are not in the IOB/IOBES form (O, B-X, I-X, ...) seqeval "
                            "expects; the entity-level metrics will not mean much.", ", ".join(odd))
        logging.info("Labels (%d, from %s): %s", len(self.label_list), source, " ".join(self.label_list))
        files = {"train": (run.do_train, os.path.join(self.data_dir, "train.txt")),
                 "dev": (run.do_eval, None), "test": (run.do_predict, os.path.join(self.data_dir, "test.txt"))}
        self.examples = {split: read_conll(path or dev_file(self.data_dir), split)
                         for split, (wanted, path) in files.items() if wanted}
        hint = "; --label_list can name labels train.txt lacks" if source.endswith("train.txt") else ""
        for examples in self.examples.values():
            check_labels(examples, self.label_list, f"the label list ({source}{hint})")
        if run.do_train and run.class_weights:
            tags = [label for example in self.examples["train"] for label in example.labels]
            self.loss = ClassWeightedLoss(masked_loss, class_weights(run.class_weights, self.label_list, tags))

    def train_data(self, run, tokenizer, trainer):
        """Writes work_dir/train.tf_record: the windows, int64 [max_seq_length] per feature."""
        schema = {name: tf.io.FixedLenFeature([run.max_seq_length], tf.int64) for name in _FEATURES}

        def decode(parsed):
            return {k: parsed[k] for k in packing.INPUT_NAMES}, {"label_ids": parsed["label_ids"]}

        features = convert_examples_to_features(self.examples["train"], self.label_list, run.max_seq_length,
                                                tokenizer)
        data = write_train_records(trainer, (f._asdict() for f in features), schema, decode, run.sequence_lengths,
                                   _FEATURES)
        logging.info("Training on %d sentences in %d windows", len(self.examples["train"]), data.num_examples)
        return data

    def _evaluate(self, run, tokenizer, trainer, split, batch_size):
        """Featurizes, predicts and rejoins a split -> (its examples, predicted labels per sentence, eval_* results and
        losses, report)."""
        examples = self.examples[split]
        features = list(convert_examples_to_features(examples, self.label_list, run.max_seq_length, tokenizer))
        logging.info("  Num examples = %d (%d windows)", len(examples), len(features))
        logging.info("  Batch size = %d", batch_size)
        window_predictions, losses = predict_windows(trainer, features, batch_size, run.fixed_batches,
                                                     run.sequence_lengths)
        predicted = rejoin(examples, features, window_predictions, self.label_list)
        metrics, report = compute_metrics([e.labels for e in examples], predicted)
        results = collections.OrderedDict((f"eval_{k}", v) for k, v in metrics.items())
        results.update(losses)
        return examples, predicted, results, report

    def evaluate(self, run, tokenizer, trainer):
        """Writes the dev set's eval_results.txt, eval_report.txt, eval_metrics.json and eval_predictions.txt; -> the
        results."""
        logging.info("***** Running evaluation *****")
        examples, predicted, results, report = self._evaluate(run, tokenizer, trainer, "dev", run.eval_batch_size)
        results["global_step"] = trainer.step
        result_files.write_eval_results(os.path.join(run.output_dir, "eval_results.txt"), results)
        logging.info("\n%s", report)
        fileio.write_text_atomically(os.path.join(run.output_dir, "eval_report.txt"), report)
        write_class_metrics(os.path.join(run.output_dir, "eval_metrics.json"),
                            entity_metrics([e.labels for e in examples], predicted, self.label_list))
        fileio.write_text_atomically(os.path.join(run.output_dir, "eval_predictions.txt"),
                                     conll_output(examples, predicted))
        return results

    def predict(self, run, tokenizer, trainer):
        """Writes the test set's test_results.txt (`token gold predicted` per word); -> the metrics against its gold
        labels."""
        logging.info("***** Running prediction *****")
        examples, predicted, results, _ = self._evaluate(run, tokenizer, trainer, "test", run.predict_batch_size)
        logging.info("Test set (its gold labels): f1 = %.4f, precision = %.4f, recall = %.4f",
                     results["eval_f1"], results["eval_precision"], results["eval_recall"])
        fileio.write_text_atomically(os.path.join(run.output_dir, "test_results.txt"),
                                     conll_output(examples, predicted))
        return results
