"""Export: `exporter` (one call for every format: `export(ExportRequest(...), model | init_checkpoint)`), and the
formats it writes: `saved_model` (TF Serving SavedModels with tensor and raw-text signatures, for every task),
`tfhub` (the TF Hub BERT encoder and preprocessing SavedModels of Model Garden's export_tfhub.py) and `portable`
(LiteRT and ONNX, for runtimes without TensorFlow)."""
