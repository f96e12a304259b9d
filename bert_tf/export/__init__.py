"""Export: `saved_model` (TF Serving SavedModels with tensor and raw-text signatures, for every task) and `tfhub`
(the TF Hub BERT encoder and preprocessing SavedModels of Model Garden's export_tfhub.py)."""
