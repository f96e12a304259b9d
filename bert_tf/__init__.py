"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Importing bert_tf (as every run script does before TensorFlow) hides TensorFlow's C++ start-up messages (CUDA stub
lines, a `cuInit` error on a machine without a GPU, oneDNN notices): TF_CPP_MIN_LOG_LEVEL defaults to 3 where it is
not set. Set it yourself to see them, e.g. `TF_CPP_MIN_LOG_LEVEL=0 python run_scripts/run_classifier.py ...`. It
has no effect once TensorFlow is imported.

At exit, after every other exit handler, the objects still alive are frozen (`gc.freeze`): the interpreter's last
garbage collections then skip them. A process that traced a model holds millions of them (graphs, Keras objects),
and those collections took 2 to 40 s after run_classifier.py had written its results (MiniLM, 2 loaded cores).
Nothing is lost: the operating system frees the memory, and Python never promised `__del__` at exit.
"""
import atexit
import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
atexit.register(gc.freeze)  # registered first, so run last
