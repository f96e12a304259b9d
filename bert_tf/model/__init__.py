"""The model: `config` (bert_config.json), `activations`, `encoder` (the Keras layers mirroring the original
modeling.py), `heads` (task heads) and `task_models` (the encoder plus heads, one model per task)."""
