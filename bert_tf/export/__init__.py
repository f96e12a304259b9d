"""Export: `saved_model` (TF Serving SavedModels with tensor and raw-text signatures, for every task)."""
