"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

The packages, from the bottom up (each imports only the ones before it): `text` (tokenization and packing), `data`
and `resources` (files, records, corpora, vocabularies, pretraining data), `model` (the encoder and task models),
`checkpoints` (loading and converting original, bert-tf, Model Garden, TF Hub and Hugging Face checkpoints),
`training` (the optimizer, distribution strategies and the training loop), `export` (SavedModels for serving and TF
Hub) and `tasks` (what each run script does). `modeling` and `tokenization` are drop-ins for the original's modules.

Importing the library changes nothing in the process (no environment variable, import hook or exit handler). The
run scripts' own start-up and exit defaults (TensorFlow's environment, `gc.freeze` at exit, Keras' extras loaded
on first use) live in `bert_tf.script_setup`, which only scripts import (the run scripts through `bert_tf.flags`, the
benchmarks in their `__main__` block).
"""
