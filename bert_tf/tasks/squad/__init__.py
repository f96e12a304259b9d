"""SQuAD v1.1 / v2.0 question answering (the original run_squad.py). Modules: `examples`, `features`
(windows, the TFRecords, the loss), `postprocess` (n-best spans -> the JSON files; its one
deliberate difference), `evaluate` (the official evaluation), `task` (SquadTask); the original's
public names, and those other modules use, are importable from here.
"""
from bert_tf.tasks.squad.examples import (
    SquadExample,
    SquadFormatError,
    examples_from_json,
    read_predict_file,
    read_squad_examples,
    split_paragraph,
)
from bert_tf.tasks.squad.features import (
    FeatureWriter,
    InputFeatures,
    convert_examples_to_features,
    make_dataset,
    span_loss,
    validate_lengths,
    write_eval_features,
    write_train_features,
)
from bert_tf.tasks.squad.postprocess import (
    NO_ANSWER_SCORE_DIFF,
    RawResult,
    compute_predictions,
    get_final_text,
    raw_results,
    write_predictions,
)
from bert_tf.tasks.squad.task import (
    SquadTask,
    predict,
)

__all__ = [
    "SquadExample", "SquadFormatError", "examples_from_json", "read_predict_file", "read_squad_examples",
    "split_paragraph", "FeatureWriter", "InputFeatures", "convert_examples_to_features", "make_dataset", "span_loss",
    "validate_lengths", "write_eval_features", "write_train_features", "NO_ANSWER_SCORE_DIFF", "RawResult",
    "compute_predictions", "get_final_text", "raw_results", "write_predictions", "SquadTask", "predict",
]
