"""create_pretraining_data: `instances` (the original algorithm), `wire` (TFRecord bytes without TensorFlow),
`shards` (worker processes), `beam` (Apache Beam); for run_pretraining, `dataset` (reading the records) and
`dynamic_masking` (masks drawn afresh every epoch)."""
