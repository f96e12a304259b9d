"""A task model's inputs made from its spec (`bert_tf.model.task_models.TaskSpec.inputs`), not from its name."""
import numpy as np


def for_spec(spec, features, positions):
    """The inputs of the model of `spec`, by name: `features` (int32 input_ids, input_mask, segment_ids [B, S]) for
    an input [B, S]; for [B, C, S] (SWAG's choices) C copies, the k-th rolled by k along S; `positions` (int32
    [B, P]) for an input of masked positions."""
    def value(spec_input):
        if "P" in spec_input.axes:
            return positions
        feature = features[spec_input.name]
        if len(spec_input.axes) == 2:
            return feature
        return np.stack([np.roll(feature, k, axis=1) for k in range(spec_input.axes[1])], axis=1)
    return {i.name: value(i) for i in spec.inputs}
