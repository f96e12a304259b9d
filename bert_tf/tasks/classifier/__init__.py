"""Sentence (pair) classification: the data side of the original run_classifier.py, plus GLUE extras.

As the original: the processors `cola`, `mnli`, `mrpc`, `xnli` (the same columns, header rows, guids, labels), the
packing and TFRecord schema (`features`), test_results.tsv (float32 probabilities as the Estimator printed them) and
eval_results.txt (`key = value`, sorted). Added: the other GLUE tasks (`sts-b` as regression), MNLI mismatched, each
task's GLUE metric, the GLUE submission files, and a `tsv` task whose header names its columns. Errors name the file
and line; every output file is written under a temporary name and renamed when complete.

Modules: `processors` (examples), `features` (packing, the TFRecords), `metrics` (the Estimator's figures, GLUE
metrics), `task` (the loss, evaluation, prediction, `ClassifierTask`). Their public names are importable from here,
and so are the losses (`bert_tf.training.losses`).
"""
from bert_tf.tasks.classifier.features import (
    InputFeatures,
    check_dev_labels,
    convert_examples_to_features,
    convert_single_example,
    decode_record,
    example_label_id,
    feature_to_tf_example,
    file_based_convert_examples_to_features,
    file_based_dataset,
    file_based_input_fn_builder,
    name_to_features,
)
from bert_tf.tasks.classifier.metrics import (
    eval_metrics,
    glue_metrics,
)
from bert_tf.tasks.classifier.processors import (
    LABEL_LIST_FILE,
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
    pad_examples,
    prepare_label_list,
    read_tsv,
    register_processor,
)
from bert_tf.tasks.classifier.task import (
    ClassifierTask,
    classification_loss,
    evaluate,
    format_submission,
    loss_fn_for,
    predict,
    regression_loss,
    run_model,
)

__all__ = [
    "ColaProcessor",
    "DataProcessor",
    "InputExample",
    "LABEL_LIST_FILE",
    "MnliProcessor",
    "MrpcProcessor",
    "PROCESSORS",
    "PaddingInputExample",
    "QnliProcessor",
    "QqpProcessor",
    "RteProcessor",
    "Sst2Processor",
    "StsbProcessor",
    "TsvLine",
    "TsvProcessor",
    "WnliProcessor",
    "XnliProcessor",
    "get_processor",
    "pad_examples",
    "prepare_label_list",
    "read_tsv",
    "register_processor",
    "InputFeatures",
    "check_dev_labels",
    "convert_examples_to_features",
    "convert_single_example",
    "decode_record",
    "example_label_id",
    "feature_to_tf_example",
    "file_based_convert_examples_to_features",
    "file_based_dataset",
    "file_based_input_fn_builder",
    "name_to_features",
    "classification_loss",
    "eval_metrics",
    "glue_metrics",
    "loss_fn_for",
    "regression_loss",
    "ClassifierTask",
    "evaluate",
    "format_submission",
    "predict",
    "run_model",
]
