"""Answers from raw text: `bert_tf.load(path)` -> a task's model whose `.predict(...)` answers plain strings, in order,
as the run scripts would predict them. `path`: a training run's output_dir (best/ weights, else the latest checkpoint;
model_metadata.json, written by `run_record.record_model`) or an export (a version, or export_dir: its highest).

| task        | .predict(...)       | one answer                                                     |
|-------------|---------------------|----------------------------------------------------------------|
| classifier  | texts[, texts_b]    | {"label": ..., "probabilities": {label: p, ...}}               |
| multi_label | texts[, texts_b]    | {"labels": [those at or above their thresholds], "probabilities"} |
| regression  | texts[, texts_b]    | {"score": ...}                                                 |
| squad       | questions, contexts | {"answer": context[start:end], "start", "end", "score"}        |
| ner         | texts               | {"entities": [{"type", "text", "start", "end", "score"}, ...]} |
| swag        | contexts, choices   | {"choice": the likeliest's index, "probabilities": [p, ...]}   |
"""
import collections
import inspect
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import classifier, evaluation, ner, run_record, squad, swag
from bert_tf.tasks.classifier.features import features_to_arrays
from bert_tf.text import packing, tokenization
from bert_tf.training import prediction

PREDICTIONS_FILE = "predictions.jsonl"  # --predict_text_file's answers, in output_dir
EXPORT_METADATA = os.path.join("assets.extra", "export_metadata.json")


def check_text_file(path, task):
    """Raises before any work unless --predict_text_file `path` exists and `task` (a spec name) answers texts."""
    if ANSWERS.get(task) not in (TextClassifier, EntityTagger):
        raise ValueError(f"--predict_text_file: the {task} task answers no plain texts (the classifiers and NER do).")
    if not fileio.exists(path):
        raise FileNotFoundError(f"--predict_text_file={path}: no such file.")


def answer_text_file(run, task, tokenizer, trainer):
    """Answers each line of `run.predict_text_file` (a classifier's pair: tab-separated) into
    output_dir/PREDICTIONS_FILE, a JSON object per line, in order."""
    text = fileio.read_text(run.predict_text_file, "--predict_text_file")
    lines = [line.rstrip("\r") for line in text.split("\n")]
    lines = lines[:-1] if lines and not lines[-1] else lines  # the line break that ends the file
    meta = {**task_models.metadata(task.spec.name, trainer.model, task.label_list, run.do_lower_case,
                                   run.max_seq_length), **task.answer_settings}
    answerer = ANSWERS[meta["task"]](trainer, tokenizer, meta, run.predict_batch_size)
    logging.info("***** Answering the %d lines of %s *****", len(lines), run.predict_text_file)
    if isinstance(answerer, TextClassifier):
        pairs = [line.split("\t", 1) + [None] for line in lines]
        answers = answerer.predict([pair[0] for pair in pairs], [pair[1] for pair in pairs])
    else:
        answers = answerer.predict(lines)
    fileio.write_text_atomically(os.path.join(run.output_dir, PREDICTIONS_FILE),
                                 "".join(json.dumps(answer, ensure_ascii=False) + "\n" for answer in answers))


def load(path, batch_size=32):
    """The model at `path` (module docstring) for its task's `.predict`, `batch_size` texts at a time."""
    version = _export_version(path)
    if version:
        meta = fileio.read_json(os.path.join(version, EXPORT_METADATA), "Export metadata")
        vocab_file = os.path.join(version, "assets", run_record.VOCAB_FILE)
        if meta.get("text_ops") == "tf_text":
            import tensorflow_text  # noqa: F401 (registers the ops its signatures use)
        saved = tf.saved_model.load(version)  # kept by the closure: its signatures read its variables
        model = lambda inputs: saved.signatures["serving_default"](**inputs)  # noqa: E731
    elif fileio.exists(os.path.join(path, task_models.METADATA_FILE)):
        meta = fileio.read_json(os.path.join(path, task_models.METADATA_FILE), "Model metadata")
        vocab_file = os.path.join(path, run_record.VOCAB_FILE)
        model = _restored_run(path, meta)
    else:
        raise FileNotFoundError(f"{path}: neither a training run's output_dir (no {task_models.METADATA_FILE}: it is "
                                f"written when a run trains) nor an export (no {EXPORT_METADATA}).")
    if meta["task"] not in ANSWERS:
        raise ValueError(f"{path} holds a {meta['task']} model; bert_tf.load answers the tasks "
                         f"{', '.join(ANSWERS)}.")
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=meta["do_lower_case"])
    return ANSWERS[meta["task"]](prediction.Predictor(model), tokenizer, meta, batch_size)


def _export_version(path):
    """The version directory of the export at `path` (itself, or its highest numbered version), or None."""
    if fileio.exists(os.path.join(path, EXPORT_METADATA)):
        return path
    versions = [int(name) for name in fileio.listdir(path) if name.isdigit()] if fileio.isdir(path) else []
    latest = os.path.join(path, str(max(versions))) if versions else None
    return latest if latest and fileio.exists(os.path.join(latest, EXPORT_METADATA)) else None


def _restored_run(output_dir, meta):
    """`meta`'s Keras task model with the run's best weights, else its latest checkpoint's."""
    spec = task_models.REGISTRY[meta["task"]]
    model = spec.build(BertConfig.from_dict(meta["bert_config"], os.path.join(output_dir, task_models.METADATA_FILE)),
                       len(meta["labels"]) if spec.labelled else None, restored=True,
                       **{name: meta.get(name) for name in spec.options})
    weights = (checkpoints.latest_checkpoint(os.path.join(output_dir, evaluation.BEST_DIR))
               or checkpoints.latest_checkpoint(output_dir))
    if not weights:
        raise FileNotFoundError(f"{output_dir} holds no checkpoint to load.")
    checkpoints.restore(model, weights, spec.head_names)
    return lambda inputs: model(inputs, training=False)


class _Answerer:
    """A task's model answering raw text `batch_size` texts at a time, as `meta` (its run's record) says."""

    def __init__(self, predictor, tokenizer, meta, batch_size):
        self.predictor, self.tokenizer, self.batch_size = predictor, tokenizer, batch_size
        self.max_seq_length, self.labels = meta["max_seq_length"], meta.get("labels")

    def _batches(self, inputs, count, pad=False):
        """The model's outputs on the `count` examples of `inputs`, batch by batch in order, with a progress bar."""
        batches = prediction.predict_in_order(self.predictor, inputs, self.batch_size,
                                              lengths_lib.SequenceLengths(pad=pad), packing.INPUT_NAMES)
        return tqdm(batches, total=-(-count // self.batch_size), desc="predict", unit="batch",
                    disable=count <= 4 * self.batch_size)


class TextClassifier(_Answerer):
    """A classifier, multi-label or regression model answering texts or pairs, windowed and pooled as its run's
    `answer_settings` say."""

    def __init__(self, predictor, tokenizer, meta, batch_size):
        super().__init__(predictor, tokenizer, meta, batch_size)
        self.task = meta["task"]
        self.doc_stride = meta.get("doc_stride", 0)
        self.window_pooling = meta.get("window_pooling", packing.WINDOW_POOLINGS[0])
        self.thresholds = meta.get("thresholds") or (
            [task_models.DEFAULT_THRESHOLD] * len(self.labels) if self.task == "multi_label" else None)

    def predict(self, texts, texts_b=None):
        """One answer per text of `texts` (paired with `texts_b`'s if given)."""
        texts = list(texts)
        pairs = [None] * len(texts) if texts_b is None else list(texts_b)
        if len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} texts_b: give one second text per text.")
        outputs = self._outputs(texts, pairs)
        if self.task == "regression":
            return [{"score": float(score)} for score in outputs["predictions"]]
        answers = []
        for row in outputs["probabilities"]:
            answer = ({"label": self.labels[int(np.argmax(row))]} if self.thresholds is None else
                      {"labels": [label for label, p, t in zip(self.labels, row, self.thresholds) if p >= t]})
            answers.append({**answer, "probabilities": dict(zip(self.labels, map(float, row)))})
        return answers

    def _outputs(self, texts, pairs):
        """{name: [len(texts), ...]}: the outputs, as run_classifier.py packs, windows and pools."""
        regression, multi_label = self.task == "regression", self.task == "multi_label"
        label = 0.0 if regression else [] if multi_label else self.labels[0]  # unused: no loss is computed
        label_list = None if regression else self.labels
        features, cut = [], collections.Counter()
        for i, (text, pair) in enumerate(zip(texts, pairs)):
            if not isinstance(text, str) or not (pair is None or isinstance(pair, str)):
                raise TypeError(f"Text {i}: expected a str (and texts_b's a str), got {text!r}, {pair!r}.")
            example = classifier.InputExample(str(i), text, pair or None, label, source=f"text {i}")
            features += classifier.convert_example_windows(i, example, label_list, self.max_seq_length,
                                                           self.tokenizer, cut, multi_label, self.doc_stride)
        packing.log_cut(cut, "The texts", self.max_seq_length, packing.DOC_STRIDE_KEEPS)
        if not features:
            return {"probabilities": np.zeros((0, len(self.labels or ()))), "predictions": np.zeros(0)}
        inputs, _ = features_to_arrays(features, self.max_seq_length, regression,
                                       (len(self.labels),) if multi_label else ())
        batches = self._batches(inputs, len(features))
        if self.doc_stride:
            batches = classifier.pool_windows(batches, features, self.batch_size, self.window_pooling, multi_label)
        parts = list(batches)
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


class SpanAnswerer(_Answerer):
    """A SQuAD model answering questions on contexts as run_squad.py predicts (start, end: code points in the context;
    score: the n-best probability; SQuAD 2.0's no-answer: "" and None). Settings: the run's `answer_settings`, for an
    export run_squad.py's defaults."""

    def __init__(self, predictor, tokenizer, meta, batch_size):
        super().__init__(predictor, tokenizer, meta, batch_size)
        self.do_lower_case = meta["do_lower_case"]
        defaults = {name: p.default for name, p in inspect.signature(squad.SquadTask).parameters.items()}
        self.settings = {name: meta.get(name, defaults[name]) for name in squad.SquadTask.ANSWER_SETTINGS}

    def predict(self, questions, contexts):
        """One answer per question of `questions` on its context of `contexts`."""
        questions, contexts = list(questions), list(contexts)
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts: give one context per "
                             f"question.")
        for i, (question, context) in enumerate(zip(questions, contexts)):
            if not (isinstance(question, str) and isinstance(context, str)):
                raise TypeError(f"Question {i}: expected a str question and context, got {question!r}, {context!r}.")
        if not questions:
            return []
        examples = [squad.SquadExample(qas_id=str(i), question_text=question,
                                       doc_tokens=squad.split_paragraph(context)[0])
                    for i, (question, context) in enumerate(zip(questions, contexts))]
        settings = self.settings
        features = squad.convert_examples_to_features(examples, self.tokenizer, self.max_seq_length,
                                                      settings["doc_stride"], settings["max_query_length"], False)
        inputs = {name: np.array([getattr(f, name) for f in features], np.int32).reshape(len(features), -1)
                  for name in packing.INPUT_NAMES}
        results = squad.raw_results(features, self._batches(inputs, len(features), pad=True))
        spans = {}
        predictions, _, _ = squad.compute_predictions(
            examples, features, results, settings["n_best_size"], settings["max_answer_length"], self.do_lower_case,
            settings["version_2_with_negative"], settings["null_score_diff_threshold"], answer_spans=spans)
        answers = []
        for example, context in zip(examples, contexts):
            span, score = spans[example.qas_id]
            if span is None:  # SQuAD 2.0's no answer
                answers.append({"answer": predictions[example.qas_id], "start": None, "end": None, "score": score})
                continue
            start, end = _context_span(context, span)
            answers.append({"answer": context[start:end], "start": start, "end": end, "score": score})
        return answers


def _context_span(context, span):
    """(start, end) in `context` of an answer's place (`squad.compute_predictions`' answer_spans:
    first and last word, start and end in those words joined by single spaces)."""
    first_word, last_word, start, end = span
    words, char_to_word_offset = squad.split_paragraph(context)
    positions = []  # of each character of those words joined by single spaces, in `context`
    for word in range(first_word, last_word + 1):
        first = char_to_word_offset.index(word)  # the word's first character (the spaces after it share its index)
        positions += [*range(first, first + len(words[word])), None]
    return positions[start], positions[end - 1] + 1


class EntityTagger(_Answerer):
    """An NER model answering texts with entities: BasicTokenizer's words tagged as run_ner.py does, grouped by
    `ner.entities_from_tags`; score: the words' mean probability."""

    def predict(self, texts):
        """One answer per text of `texts`."""
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"Text {i} is a {type(text).__name__}, not a str: {text!r}.")
        words = [self.tokenizer.basic_tokenizer.tokenize_with_offsets(text) for text in texts]
        examples = [ner.InputExample(str(i), [word for word, _, _ in text_words], [self.labels[0]] * len(text_words),
                                     "<text>", 1) for i, text_words in enumerate(words)]
        features = list(ner.convert_examples_to_features(examples, self.labels, self.max_seq_length,
                                                         self.tokenizer))
        tags = [[None] * len(example.words) for example in examples]
        scores = [[None] * len(example.words) for example in examples]
        if features:
            batches = self._batches(ner.features_to_arrays(features)[0], len(features))
            for feature, logits in zip(features, (row for batch in batches for row in batch["logits"])):
                rows = np.asarray(logits, np.float32)[feature.word_positions]  # each word's first wordpiece
                probabilities = np.exp(rows - rows.max(-1, keepdims=True))
                probabilities /= probabilities.sum(-1, keepdims=True)
                for k, row in enumerate(probabilities):
                    tags[feature.example_index][feature.word_start + k] = self.labels[int(row.argmax())]
                    scores[feature.example_index][feature.word_start + k] = float(row.max())
        return [{"entities": ner.entities_from_tags(text, text_words, text_tags, text_scores)}
                for text, text_words, text_tags, text_scores in zip(texts, words, tags, scores)]


class ChoiceAnswerer(_Answerer):
    """A multiple-choice (SWAG) model: each choice packed with its context as run_swag.py packs them."""

    def predict(self, contexts, choices):
        """One answer per context of `contexts` with its swag.NUM_CHOICES choices."""
        contexts, choices = list(contexts), [list(endings) for endings in choices]
        if len(contexts) != len(choices):
            raise ValueError(f"{len(contexts)} contexts but {len(choices)} lists of choices: give one per context.")
        for i, (context, endings) in enumerate(zip(contexts, choices)):
            if not (isinstance(context, str) and len(endings) == swag.NUM_CHOICES
                    and all(isinstance(ending, str) for ending in endings)):
                raise ValueError(f"Context {i}: expected a str and {swag.NUM_CHOICES} str choices, got {context!r}, "
                                 f"{endings!r}.")
        examples = [swag.InputExample(str(i), context, "", endings, None, "<text>", i)
                    for i, (context, endings) in enumerate(zip(contexts, choices))]
        features = list(swag.convert_examples_to_features(examples, self.max_seq_length, self.tokenizer,
                                                          "The choices"))
        probabilities, _ = swag.predict_probabilities(self.predictor, features, self.batch_size, False,
                                                      lengths=lengths_lib.SequenceLengths())
        return [{"choice": int(row.argmax()), "probabilities": [float(p) for p in row]} for row in probabilities]


ANSWERS = {"classifier": TextClassifier, "multi_label": TextClassifier, "regression": TextClassifier,
           "squad": SpanAnswerer, "ner": EntityTagger, "swag": ChoiceAnswerer}
