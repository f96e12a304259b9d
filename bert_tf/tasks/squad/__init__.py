"""SQuAD v1.1 / v2.0 question answering (the original run_squad.py): examples, features, TFRecords, post-processing.

Pipeline, every step with the original's rules:

1. `read_squad_examples`: each paragraph is split on whitespace (space, tab, CR, LF, U+202F) into `doc_tokens`,
   with `char_to_word_offset` mapping every character to its word. For training, the character answer span is
   projected to words; answers whose text cannot be recovered from those words are skipped (warned and counted).
2. `convert_examples_to_features`: WordPiece the question (truncated to max_query_length) and each word of the
   paragraph; for training, `_improve_answer_span` tightens the span to the tokenized answer. The paragraph is
   cut into windows of at most max_seq_length - len(query) - 3 tokens, `doc_stride` apart; each window is packed
   `[CLS] query [SEP] window [SEP]` with `token_to_orig_map` (position -> word) and `token_is_max_context`
   (whether this window gives the token its most context, `_check_is_max_context`). unique_ids count from
   1000000000. Training windows that do not contain the answer (and v2 impossible questions) point at [CLS].
3. `FeatureWriter`: TFRecords with the original schema (unique_ids, input_ids, input_mask, segment_ids, and for
   training start_positions, end_positions, is_impossible), written to a temporary name and renamed when
   complete. `make_dataset` reads them back as (features, labels) batches.
4. `write_predictions`: the n-best spans per example across its windows (`_get_best_indexes`), mapped back to the
   original text with `get_final_text`, softmaxed (`_compute_softmax`), and for v2 compared with the null score;
   writes predictions.json, nbest_predictions.json and (v2) null_odds.json exactly as the original formats them.


Modules: `examples` (reading), `features` (windows, TFRecords, the loss), `postprocess` (n-best, predictions
JSON; its docstring states the one deliberate difference from the original), `evaluate` (the official evaluation),
`task` (`SquadTask`). Their public names are importable from here.
"""
from bert_tf.tasks.squad.examples import (
    SquadExample,
    SquadFormatError,
    examples_from_json,
    has_answers,
    load_squad_json,
    read_predict_file,
    read_squad_examples,
    split_paragraph,
)
from bert_tf.tasks.squad.features import (
    EVAL_RECORD_FILE,
    FIRST_UNIQUE_ID,
    LABELS,
    MODEL_INPUTS,
    TRAIN_RECORD_FILE,
    DocSpan,
    FeatureWriter,
    InputFeatures,
    convert_examples_to_features,
    doc_spans_for,
    feature_to_example,
    generate_features,
    make_dataset,
    name_to_features,
    span_loss,
    validate_lengths,
    write_eval_features,
    write_train_features,
)
from bert_tf.tasks.squad.postprocess import (
    NBEST_FILE,
    NO_ANSWER_SCORE_DIFF,
    NULL_ODDS_FILE,
    PREDICTIONS_FILE,
    RawResult,
    compute_predictions,
    get_final_text,
    raw_results,
    write_json,
    write_predictions,
)
from bert_tf.tasks.squad.task import (
    SquadTask,
    evaluate_predictions,
    predict,
)

__all__ = [
    "SquadExample",
    "SquadFormatError",
    "examples_from_json",
    "has_answers",
    "load_squad_json",
    "read_predict_file",
    "read_squad_examples",
    "split_paragraph",
    "DocSpan",
    "EVAL_RECORD_FILE",
    "FIRST_UNIQUE_ID",
    "FeatureWriter",
    "InputFeatures",
    "LABELS",
    "MODEL_INPUTS",
    "TRAIN_RECORD_FILE",
    "convert_examples_to_features",
    "doc_spans_for",
    "feature_to_example",
    "generate_features",
    "make_dataset",
    "name_to_features",
    "span_loss",
    "validate_lengths",
    "write_eval_features",
    "write_train_features",
    "NBEST_FILE",
    "NO_ANSWER_SCORE_DIFF",
    "NULL_ODDS_FILE",
    "PREDICTIONS_FILE",
    "RawResult",
    "compute_predictions",
    "get_final_text",
    "raw_results",
    "write_json",
    "write_predictions",
    "SquadTask",
    "evaluate_predictions",
    "predict",
]
