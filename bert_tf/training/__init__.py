"""Training: the original optimizer, tf.distribute strategies, and the training loop shared by every script.

Modules: `config` (RunConfig: a run's settings), `optimization` (the original AdamWeightDecay and schedule; NVIDIA's
LAMB recipe), `losses` (a task's loss and metrics over an update's whole batch), `update` (one update: accumulation,
all-reduce, clipping, the optimizer), `layers` (which weights train, at which rate), `feed` (the loop's input, dealt to
the replicas), `run_state` (the checkpointed state: checkpoints, resume), `prediction` (evaluation and prediction of a
task model: Predictor; predict_in_order, the one prediction loop), `summaries` (TensorBoard while training: each event
uploaded once on a URL), `distribute` (strategies, precision, workers), `peers` (whether the other workers answer,
without TensorFlow), `devices` (where a run runs, logged), `machine` (what the machine has, without TensorFlow) and
`trainer` (the loop).
"""
