"""Real checkpoints written by the Trainer (one update, optimizer included) for any tiny task model of
bert_tf.model.task_models, with inputs and a loss made from the model itself."""
import numpy as np
import tensorflow as tf

from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer


def random_features(model, batch_size=2, seq_length=6, seed=0):
    """int32 inputs for every input of `model` (None dims -> batch_size / seq_length), values 0 or 1, which are
    valid ids, mask values, segment ids and masked positions alike."""
    rng = np.random.RandomState(seed)
    return {name: rng.randint(0, 2, [batch_size] + [d or seq_length for d in tensor.shape[1:]]).astype(np.int32)
            for name, tensor in model.input.items()}


def _loss(labels, outputs):
    """Per-example [B]: the mean square of every floating-point output."""
    del labels
    return tf.add_n([tf.reduce_mean(tf.reshape(tf.square(v), [tf.shape(v)[0], -1]), -1)
                     for v in outputs.values() if v.dtype.is_floating])


def train_one_step(build_model, output_dir):
    """Trains `build_model()` for one update with the Trainer; returns the trainer (its checkpoint: ckpt-1)."""
    trainer = Trainer(build_model, _loss, str(output_dir), strategy=distribute.get_strategy("one_device"),
                      learning_rate=1e-2)
    features = random_features(trainer.model)

    def dataset_fn(batch_size, ctx=None, seed=None):  # one fixed order: the seed is not used
        labels = {"unused": np.zeros(len(features["input_ids"]), np.int32)}
        return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(batch_size, drop_remainder=True)

    trainer.train(dataset_fn, 2, 1, 0)
    return trainer
