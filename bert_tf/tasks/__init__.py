"""Tasks: what each run script does, on one runner.

Modules: `task` (the `Task` contract), `runner` (`RunConfig`, `run`), `run_record` (the settings a rerun must share),
`evaluation` (evaluation during training, best checkpoint, early stopping), `result_files` (the original's result
files), `answers` (`bert_tf.load`: answers from raw text), and one per script: `classifier`, `squad`, `ner`, `swag` and
`pretraining`.
"""
