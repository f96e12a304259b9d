"""SQuAD json -> examples, as the original read_squad_examples: each paragraph split on whitespace (space, tab, CR, LF,
U+202F) into `doc_tokens`; for training, the answer span projected to words, answers whose text cannot be recovered
skipped and counted. Bad input fails naming the file and position.
"""
import dataclasses
import json

from absl import logging

from bert_tf import fileio
from bert_tf.text import tokenization


class SquadFormatError(ValueError):
    """A SQuAD JSON file that cannot be read or does not have the SQuAD structure."""


@dataclasses.dataclass
class SquadExample:
    """One question on one paragraph; start/end_position: word indexes into doc_tokens (-1 if impossible)."""
    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


def load_squad_json(input_file):
    """The parsed JSON object of a SQuAD file; clear errors for a missing file or malformed JSON."""
    text = fileio.read_text(input_file, "SQuAD file", encoding="utf-8-sig")
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as e:
        raise SquadFormatError(f"{input_file}: malformed JSON at line {e.lineno}, column {e.colno} "
                               f"(char {e.pos}): {e.msg}") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f"{input_file}: expected a JSON object with a \"data\" list (the SQuAD format).")
    return dataset


def _field(obj, key, kind, where, source):
    if not isinstance(obj, dict) or key not in obj:
        raise SquadFormatError(f"{source}: {where} has no \"{key}\".")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SquadFormatError(f"{source}: {where}.{key} should be {names}, got {type(value).__name__}.")
    return value


def _is_whitespace(c):
    return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def split_paragraph(paragraph_text):
    """(doc_tokens, char_to_word_offset): the original's whitespace split and each character's word index."""
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if _is_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def examples_from_json(dataset, is_training, version_2_with_negative=False, source="<squad>"):
    """(examples, num_skipped) from a parsed SQuAD object; see `read_squad_examples`."""
    examples = []
    skipped = 0
    for i, entry in enumerate(_field(dataset, "data", list, "the file", source)):
        for j, paragraph in enumerate(_field(entry, "paragraphs", list, f"data[{i}]", source)):
            where = f"data[{i}].paragraphs[{j}]"
            doc_tokens, char_to_word_offset = split_paragraph(_field(paragraph, "context", str, where, source))
            for k, qa in enumerate(_field(paragraph, "qas", list, where, source)):
                qa_where = f"{where}.qas[{k}]"
                qas_id = _field(qa, "id", (str, int), qa_where, source)
                question_text = _field(qa, "question", str, qa_where, source)
                start_position = end_position = orig_answer_text = None
                is_impossible = False
                if is_training:
                    if version_2_with_negative:
                        is_impossible = bool(qa.get("is_impossible", False))
                    answers = _field(qa, "answers", list, qa_where, source)
                    if len(answers) != 1 and not is_impossible:
                        raise SquadFormatError(
                            f"{source}: {qa_where} (id {qas_id!r}) has {len(answers)} answers; for training, each "
                            f"question should have exactly 1 answer.")
                    if not is_impossible:
                        answer = answers[0]
                        orig_answer_text = _field(answer, "text", str, f"{qa_where}.answers[0]", source)
                        answer_offset = _field(answer, "answer_start", int, f"{qa_where}.answers[0]", source)
                        answer_end = answer_offset + len(orig_answer_text) - 1
                        actual_text = None
                        if 0 <= answer_offset <= answer_end < len(char_to_word_offset):
                            start_position = char_to_word_offset[answer_offset]
                            end_position = char_to_word_offset[answer_end]
                            # Keep only answers whose text can be recovered from the document's words.
                            actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
                        cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
                        if actual_text is None or actual_text.find(cleaned_answer_text) == -1:
                            logging.warning("Could not find answer of %s: '%s' vs. '%s'", qas_id, actual_text,
                                            cleaned_answer_text)
                            skipped += 1
                            continue
                    else:
                        start_position = end_position = -1
                        orig_answer_text = ""
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens,
                    orig_answer_text=orig_answer_text, start_position=start_position, end_position=end_position,
                    is_impossible=is_impossible))
    return examples, skipped


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """A SQuAD JSON file -> [SquadExample], as the original reads it. For training each question needs one answer (v2:
    or is_impossible)."""
    examples, skipped = examples_from_json(load_squad_json(input_file), is_training, version_2_with_negative,
                                           source=input_file)
    if skipped:
        logging.warning("Skipped %d question(s) of %s whose answer text could not be found in the context.",
                        skipped, input_file)
    return examples


def read_predict_file(input_file, version_2_with_negative=False):
    """(parsed SQuAD object, examples) of a file to predict on; SquadFormatError when it holds no question."""
    dataset = load_squad_json(input_file)
    examples, _ = examples_from_json(dataset, is_training=False, version_2_with_negative=version_2_with_negative,
                                     source=input_file)
    if not examples:
        raise SquadFormatError(f"{input_file}: no questions to predict (every paragraph's \"qas\" list is empty, "
                               "or \"data\" is).")
    return dataset, examples


def has_answers(dataset):
    """True if a parsed SQuAD object carries gold answers (a dev set, not a test set)."""
    return any(qa.get("answers") or "is_impossible" in qa for entry in dataset.get("data", [])
               for paragraph in entry.get("paragraphs", []) for qa in paragraph.get("qas", []))
