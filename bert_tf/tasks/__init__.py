"""Tasks: what each run script does, on one runner.

Modules: `task` (the `Task` contract and `TrainData`), `runner` (`RunConfig` and `run`: what every training script
shares), `run_record` (the settings a run records and a rerun must share), `evaluation` (evaluation during
training, the best checkpoint, early stopping), `result_files` (the result files as the original writes them),
`answers` (`bert_tf.load`: a run's or an export's model answering raw text), and one per script: `classifier`
(run_classifier.py), `squad` (run_squad.py), `ner` (run_ner.py), `swag` (run_swag.py) and `pretraining`
(run_pretraining.py).
"""
