"""Assigning name -> tensor maps, whatever format they were read from, to a model by original TF1 name:
`assign_by_name`, returning a `LoadReport` of what was loaded, missing and unused.
"""
import dataclasses

import numpy as np
from absl import logging

from bert_tf.checkpoints import name_map


@dataclasses.dataclass
class LoadReport:
    """What a checkpoint load did, by original variable name (or object path for unused ones of our checkpoints)."""
    checkpoint: str
    loaded: list
    missing: list  # variables of the model that the checkpoint lacks (left at their initial values)
    unused: list  # checkpoint variables the model has no place for (optimizer slots excluded)
    heads: list = dataclasses.field(default_factory=list)  # head attributes of the model loaded in full
    missing_heads: list = dataclasses.field(default_factory=list)  # head attributes left (partly) initialized

    def log(self):
        """Logs the details at INFO; missing heads and unused variables also as a WARNING each."""
        logging.info("Loaded %d variables from %s (heads: %s)", len(self.loaded), self.checkpoint,
                     ", ".join(self.heads) or "none")
        for name in self.missing:
            logging.info("  not in checkpoint (newly initialized): %s", name)
        for name in self.unused:
            logging.info("  in checkpoint but unused: %s", name)
        if self.missing_heads:
            logging.warning("%s has no trained %s head: newly initialized.", self.checkpoint,
                            " and ".join(self.missing_heads))
        if self.unused:
            logging.warning("%s: %s unused by this model.", self.checkpoint, describe_variables(self.unused))


def _span(numbers):
    """[4, 5, 6] -> "4..6"; [1, 3] -> "1,3"."""
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}..{numbers[-1]}"
    return ",".join(map(str, numbers))


def describe_variables(names):
    """A short account of variable names: encoder layers as a range ("bert/encoder/layer_4..5"), a few others."""
    layers = sorted({int(m.group(1)) for m in map(name_map.ENCODER_LAYER.match, names) if m})
    others = [n for n in names if not name_map.ENCODER_LAYER.match(n)]
    parts = ([f"bert/encoder/layer_{_span(layers)}"] if layers else []) + others[:3]
    return f"{', '.join(parts)}{', ...' if len(others) > 3 else ''} ({len(names)} variables)"


def shape_error(name, source, ckpt_shape, model_shape):
    """A ValueError naming the config key behind the first dimension that differs."""
    suffix = name.rsplit("/", 1)[-1]
    keys = name_map.SHAPE_KEYS.get(name) or {"output_weights": ("num_labels", "hidden_size"),
                                     "output_bias": ("num_labels",)}.get(suffix, ())
    dims = [i for i, (a, b) in enumerate(zip(ckpt_shape, model_shape)) if a != b] or [len(model_shape)]
    key = keys[dims[0]] if dims[0] < len(keys) else "hidden_size / intermediate_size"
    if name == "bert/embeddings/word_embeddings" and dims[0] < 2:
        return ValueError(f"{key} mismatch: {source} has {name} with {ckpt_shape[dims[0]]} "
                          f"{('rows', 'columns')[dims[0]]} but the model's config says {key}="
                          f"{model_shape[dims[0]]}; use the bert_config.json and vocab.txt that came with the "
                          f"checkpoint.")
    return ValueError(f"Shape mismatch for {name} (check `{key}`): {source} has {list(ckpt_shape)}, the model "
                      f"expects {list(model_shape)}.")


def assign_by_name(model, tensors, source, strict=False):
    """Assigns `tensors` (original name -> zero-argument getter of an array) to the model's variables; returns a
    LoadReport. `source`: the path errors name; `strict`: raise if a model variable is missing."""
    mapping = name_map.original_variable_map(model)
    loaded, missing = [], []
    for name, variable in mapping.items():
        if name not in tensors:
            missing.append(name)
            continue
        value = np.asarray(tensors[name]())
        if tuple(value.shape) != tuple(variable.shape):
            raise shape_error(name, source, value.shape, variable.shape)
        variable.assign(value.astype(variable.dtype))
        loaded.append(name)
    unused = sorted(n for n in tensors if n not in mapping and not name_map.OPTIMIZER_NAME.search(n))
    heads = [h for h in name_map.model_parts(model) if h != "bert"]
    lacking = [h for h in heads if any(name in missing for name, _ in model.heads[h])]
    report = LoadReport(source, loaded, missing, unused, [h for h in heads if h not in lacking], lacking)
    if strict and missing:
        raise ValueError(f"{source} lacks {len(missing)} variables the model needs, e.g. {missing[:3]}.")
    if not loaded:
        raise ValueError(f"{source} holds no variable of a BERT model under the original names "
                         f"(found e.g. {sorted(tensors)[:3]}).")
    return report
