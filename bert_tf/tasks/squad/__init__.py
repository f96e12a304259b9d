"""SQuAD v1.1 / v2.0 question answering (the original run_squad.py), each step with the original's rules.

Modules: `examples` (SQuAD json -> SquadExamples), `features` (windows, the original TFRecords, the loss), `postprocess`
(n-best spans -> the original's JSON files; its one deliberate difference), `evaluate` (the official evaluation), `task`
(SquadTask). Their public names are importable from here.
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
    TRAIN_RECORD_FILE,
    FeatureWriter,
    InputFeatures,
    convert_examples_to_features,
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
    predict,
)

__all__ = [
    "SquadExample", "SquadFormatError", "examples_from_json", "has_answers", "load_squad_json", "read_predict_file",
    "read_squad_examples", "split_paragraph", "EVAL_RECORD_FILE", "FIRST_UNIQUE_ID", "FeatureWriter", "InputFeatures",
    "LABELS", "TRAIN_RECORD_FILE", "convert_examples_to_features", "feature_to_example", "generate_features",
    "make_dataset", "name_to_features", "span_loss", "validate_lengths", "write_eval_features", "write_train_features",
    "NBEST_FILE", "NO_ANSWER_SCORE_DIFF", "NULL_ODDS_FILE", "PREDICTIONS_FILE", "RawResult", "compute_predictions",
    "get_final_text", "raw_results", "write_json", "write_predictions", "SquadTask", "predict",
]
