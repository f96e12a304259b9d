"""Sentence (pair) classification: the original run_classifier.py's names, plus the other GLUE tasks
and tasks for your own data (`tsv`, `csv`, `jsonl`). Modules: `processors` (examples), `features`
(packing, the TFRecords), `metrics`, `task` (losses, evaluation, prediction, `ClassifierTask`);
their public names are importable from here.
"""
from bert_tf.tasks.classifier.features import (
    InputFeatures,
    check_dev_labels,
    convert_example_windows,
    convert_examples_to_features,
    convert_single_example,
    decode_record,
    example_label_id,
    file_based_convert_examples_to_features,
    file_based_input_fn_builder,
    name_to_features,
)
from bert_tf.tasks.classifier.metrics import (
    eval_metrics,
    glue_metrics,
)
from bert_tf.tasks.classifier.processors import (
    PROCESSORS,
    ColaProcessor,
    DataProcessor,
    InputExample,
    MnliProcessor,
    MrpcProcessor,
    PaddingInputExample,
    QnliProcessor,
    QqpProcessor,
    RteProcessor,
    Sst2Processor,
    StsbProcessor,
    TsvLine,
    TsvProcessor,
    WnliProcessor,
    XnliProcessor,
    get_processor,
    prepare_label_list,
    read_tsv,
    register_processor,
)
from bert_tf.tasks.classifier.task import (
    ClassifierTask,
    classification_loss,
    format_submission,
    pool_windows,
    regression_loss,
)

__all__ = [
    "ColaProcessor", "DataProcessor", "InputExample", "MnliProcessor", "MrpcProcessor", "PROCESSORS",
    "PaddingInputExample", "QnliProcessor", "QqpProcessor", "RteProcessor", "Sst2Processor", "StsbProcessor", "TsvLine",
    "TsvProcessor", "WnliProcessor", "XnliProcessor", "get_processor", "prepare_label_list", "read_tsv",
    "register_processor", "InputFeatures", "check_dev_labels", "convert_example_windows",
    "convert_examples_to_features", "convert_single_example", "decode_record", "example_label_id",
    "file_based_convert_examples_to_features", "file_based_input_fn_builder", "name_to_features", "classification_loss",
    "eval_metrics", "glue_metrics", "regression_loss", "ClassifierTask", "format_submission", "pool_windows",
]
