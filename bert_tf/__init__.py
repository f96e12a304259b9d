"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3."""
