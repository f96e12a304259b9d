"""create_pretraining_data: `instances` (the original algorithm, exact mode), `wire` (Example/TFRecord bytes
without TensorFlow), `shards` (fast mode: shards of documents in worker processes), `beam` (Apache Beam); and for
run_pretraining, `dataset` (reading those records as the original does) and `dynamic_masking` (the masked-LM
predictions drawn afresh every epoch in the tf.data pipeline of pretraining)."""
