"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Importing bert_tf (as every run script does before TensorFlow) hides TensorFlow's C++ start-up messages (CUDA stub
lines, a `cuInit` error on a machine without a GPU, oneDNN notices): TF_CPP_MIN_LOG_LEVEL defaults to 3 where it is
not set. Set it yourself to see them, e.g. `TF_CPP_MIN_LOG_LEVEL=0 python run_scripts/run_classifier.py ...`. It
has no effect once TensorFlow is imported.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
