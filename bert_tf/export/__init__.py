"""Export: `exporter` (one call for every format) and the formats it writes: `saved_model` (TF Serving, tensor and
raw-text signatures), `entities` (the NER SavedModel's in-graph entities), `tfhub` (Model Garden's TF Hub SavedModels)
and `portable` (LiteRT and ONNX).
"""
