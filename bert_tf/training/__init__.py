"""Training: the original optimizer, tf.distribute strategies, and the training loop shared by every script.

Modules: `config` (RunConfig), `optimization` (AdamWeightDecay and its schedule; LAMB), `losses` (loss and metrics
over an update's batch), `update` (one update), `layers` (which weights train, at which rate), `prediction`
(evaluation and prediction), `summaries` (TensorBoard), `distribute` (strategies, precision, workers), `peers`
(whether other workers answer), `devices` (where a run runs), `machine` (what the machine has) and `trainer` (the
loop, its input and checkpoints).
"""
