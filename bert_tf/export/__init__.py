"""Export: `exporter` (one call for every format: `export(task, export_dir, model | init_checkpoint=..., **options)`)
and the formats it writes: `saved_model` (TF Serving SavedModels with tensor and raw-text signatures), `entities`
(the NER SavedModel's entities, in graph), `tfhub` (the TF Hub encoder and preprocessing SavedModels of Model
Garden's export_tfhub.py) and `portable` (LiteRT and ONNX)."""
