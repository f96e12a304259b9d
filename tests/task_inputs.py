"""A task model's inputs made from its Keras inputs (`model.input`), not from its task's name."""
import numpy as np

from bert_tf.text.packing import INPUT_NAMES


def for_model(model, features, positions):
    """The inputs of `model`, by name: `features` (int32 input_ids, input_mask, segment_ids [B, S]) for an input
    [B, S]; for [B, C, S] (SWAG's choices) C copies, the k-th rolled by k along S; `positions` (int32 [B, P]) for an
    input of masked positions."""
    def value(name, shape):
        if name not in INPUT_NAMES:
            return positions
        feature = features[name]
        if len(shape) == 2:
            return feature
        return np.stack([np.roll(feature, k, axis=1) for k in range(shape[1])], axis=1)
    return {name: value(name, x.shape) for name, x in model.input.items()}
