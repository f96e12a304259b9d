"""Sentence (pair) classification: the data side of the original run_classifier.py, plus GLUE extras.

What matches the original exactly:
* the processors `cola`, `mnli`, `mrpc`, `xnli` read their files the same way (tab-separated, no quote character,
  the same header rows skipped, the same columns, guids and labels);
* `convert_single_example` packs `[CLS] a [SEP] (b [SEP])` with the same truncation and zero padding, including
  `PaddingInputExample` for fixed-size eval batches (`is_real_example` = 0);
* `file_based_convert_examples_to_features` writes the same TFRecord schema (`input_ids`, `input_mask`,
  `segment_ids`, `label_ids`, `is_real_example`, all int64) under the same file names;
* `test_results.tsv` holds one line of tab-separated class probabilities per real test example, formatted by
  `str()` of a float32 as the original's Estimator output was, and `eval_results.txt` holds `key = value` lines
  sorted by key with `eval_accuracy`, `eval_loss`, `global_step` and `loss`.

What bert-tf adds: the remaining GLUE tasks (`sst-2`, `qqp`, `qnli`, `rte`, `sts-b` as regression, `wnli`), the
MNLI mismatched dev/test sets, each task's GLUE metric in `eval_results.txt` (MCC for CoLA, F1 for MRPC/QQP,
Pearson/Spearman for STS-B), GLUE submission files (`CoLA.tsv`, `MNLI-m.tsv`, ...), and a generic `tsv` task
whose files carry a header naming their columns. Errors name the file and line. Every output file is written
under a temporary name and renamed when complete.

Modules: `processors` (examples, the task processors), `features` (packing, the TFRecord schema), `metrics`
(the Estimator's figures, GLUE metrics), `task` (the loss, evaluation, prediction, `ClassifierTask`). Their public
names are importable from here, and so are the losses (`bert_tf.training.losses`).
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
    GLUE_METRICS,
    eval_metrics,
    glue_metrics,
    task_key,
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
    evaluate,
    format_submission,
    loss_fn_for,
    predict,
    run_model,
)
from bert_tf.training.losses import classification_loss, regression_loss

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
    "GLUE_METRICS",
    "classification_loss",
    "eval_metrics",
    "glue_metrics",
    "loss_fn_for",
    "regression_loss",
    "task_key",
    "ClassifierTask",
    "evaluate",
    "format_submission",
    "predict",
    "run_model",
]
