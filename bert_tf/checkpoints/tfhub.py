"""TF Hub BERT SavedModels in, read without loading their functions (`tensorflow_hub` is not imported).

A TF Hub BERT SavedModel (Model Garden's `export_tfhub.py`) becomes a `HubModel`: its variables by Keras name, its
`vocab_file` asset and `do_lower_case` variable. `hub_tensors` maps them to the original names; `infer_bert_config`
reads the config off the weights and graph. bert-tf's own export (`bert_tf.export.tfhub`, layout "bert_tf") keeps
its Keras variable paths and a bert_config.json.
"""
import dataclasses
import os
import re

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf import fileio
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints.model_garden import MASKED_LM_PATHS, read_object_graph, to_original
from bert_tf.checkpoints.original import checkpoint_reader
from bert_tf.model.config import BertConfig

# Variables that identify a TF Hub BERT encoder's layout: (word embeddings, layer 0's query kernel) by name.
_HUB_LAYOUTS = {"model_garden": ("word_embeddings/embeddings", "transformer/layer_0/self_attention/query/kernel"),
                "bert_tf": ("embeddings/word_embeddings", "layer_0/attention/query/kernel")}


def is_saved_model(path):
    return bool(path) and fileio.exists(os.path.join(path, "saved_model.pb"))


@dataclasses.dataclass
class HubModel:
    """What bert-tf reads from a TF Hub BERT SavedModel (`read_hub_model`)."""
    path: str
    variables: dict  # Model Garden variable name (without ":0") -> zero-argument getter of its value
    shapes: dict  # Model Garden variable name -> shape (list)
    vocab_file: str | None  # its `vocab_file` asset, if any
    do_lower_case: bool | None  # its `do_lower_case` variable, if any
    hidden_act: str  # "gelu_exact" where the graph computes Erf or Erfc, else "gelu" (tanh)
    layout: str = "model_garden"  # or "bert_tf": bert-tf's own TF Hub export (its Keras variable paths)

    @property
    def vocab_size(self):
        return self.shapes[_HUB_LAYOUTS[self.layout][0]][0]

    @property
    def num_layers(self):
        pattern = re.compile(r"^(?:transformer/)?layer_(\d+)/")
        return len({m.group(1) for m in map(pattern.match, self.variables) if m})


def _checkpoint_keys(saved_graph, checkpoint_graph):
    """SavedObjectGraph node id -> its value's key in the variables/ checkpoint, for every variable node."""
    keys, stack, seen = {}, [(0, 0)], set()
    while stack:
        saved_id, ckpt_id = stack.pop()
        if saved_id in seen:
            continue
        seen.add(saved_id)
        if saved_graph.nodes[saved_id].WhichOneof("kind") == "variable":
            keys[saved_id] = checkpoint_graph.value_key(ckpt_id)
        ckpt_children = {c.local_name: c.node_id for c in checkpoint_graph.nodes[ckpt_id].children}
        stack += [(c.node_id, ckpt_children[c.local_name]) for c in saved_graph.nodes[saved_id].children
                  if c.local_name in ckpt_children]
    return keys


def read_hub_model(path):
    """A TF Hub BERT SavedModel directory as a HubModel; ValueError (naming `path`, its signatures and variables)
    if it is not a BERT encoder."""
    proto = saved_model_pb2.SavedModel()
    with fileio.open_file(os.path.join(path, "saved_model.pb"), "rb", name="") as f:
        proto.ParseFromString(f.read())
    meta_graph = proto.meta_graphs[0]
    saved_graph = meta_graph.object_graph_def
    prefix = os.path.join(path, "variables", "variables")
    reader = checkpoint_reader(prefix)
    checkpoint_graph = read_object_graph(reader)
    if checkpoint_graph is None:
        raise ValueError(f"{path} is a TF1 SavedModel (e.g. a hub.Module), not a TF2 TF Hub BERT encoder. A TF1 "
                         f"BERT module keeps the original variable names: pass its checkpoint {prefix} as "
                         f"init_checkpoint, with its bert_config.json and vocab.txt.")
    keys = _checkpoint_keys(saved_graph, checkpoint_graph)
    variables, shapes = {}, {}
    for node_id, key in keys.items():
        variable = saved_graph.nodes[node_id].variable
        name = re.sub(r":\d+$", "", variable.name)
        if key and tf.as_dtype(variable.dtype).is_floating and name not in variables:  # not counters, seeds
            variables[name] = lambda k=key: reader.get_tensor(k)
            shapes[name] = [d.size for d in variable.shape.dim]
    signatures = sorted(name for name in meta_graph.signature_def if not name.startswith("__"))
    layout = next((k for k, names in _HUB_LAYOUTS.items() if all(n in variables for n in names)), None)
    if layout is None:
        raise ValueError(f"{path} is a SavedModel but not a TF Hub BERT encoder (Model Garden's export_tfhub.py "
                         f"layout, with variables word_embeddings/embeddings and transformer/layer_N/..., or "
                         f"bert-tf's export_saved_model.py --format=tfhub): its signatures are {signatures} and its "
                         f"variables {sorted(variables)[:8]}{' ...' if len(variables) > 8 else ''} "
                         f"({len(variables)}).")
    root = {c.local_name: c.node_id for c in saved_graph.nodes[0].children}
    casing = keys.get(root.get("do_lower_case"))
    do_lower_case = bool(reader.get_tensor(casing)) if casing else None
    ops = {node.op for function in meta_graph.graph_def.library.function for node in function.node_def}
    hidden_act = "gelu_exact" if ops & {"Erf", "Erfc"} else "gelu"  # the exact GELU computes the error function
    vocab = saved_graph.nodes[root["vocab_file"]] if "vocab_file" in root else None
    vocab_file = (os.path.join(path, "assets", meta_graph.asset_file_def[vocab.asset.asset_file_def_index].filename)
                  if vocab is not None and vocab.WhichOneof("kind") == "asset" else None)
    return HubModel(path, variables, shapes, vocab_file, do_lower_case, hidden_act, layout)


def hub_tensors(hub, keras_paths=None):
    """Original name -> tensor getter for a HubModel's encoder and `.mlm` head, other variables as
    "tf_hub:<name>": None (unused). keras_paths (layout "bert_tf"): Keras path -> original name."""
    if hub.layout == "bert_tf":
        rows = [(keras_paths[name], name, None) for name in hub.variables if name in (keras_paths or {})]
    else:
        rows = [(row.original, row.model_garden, row.layout) for row in name_map.encoder_rows(hub.num_layers)]
        rows += [(orig, name, None) for orig, name, _ in MASKED_LM_PATHS]
    tensors = {orig: (lambda n=name, k=layout: to_original(k, hub.variables[n]()))
               for orig, name, layout in rows if name in hub.variables}
    used = {name for _, name, _ in rows}
    tensors.update({f"tf_hub:{name}": None for name in hub.variables if name not in used})
    return tensors


def infer_bert_config(hub):
    """A HubModel's BertConfig from its weights' shapes and graph (dropout, initializer_range: the defaults); logs
    it."""
    if hub.layout == "bert_tf":
        raise ValueError(f"{hub.path} is a bert-tf TF Hub export without its bert_config.json (bert-tf writes it "
                         f"beside saved_model.pb): pass --bert_config_file.")
    shapes = hub.shapes
    num_layers = hub.num_layers
    vocab_size, hidden_size = shapes["word_embeddings/embeddings"]
    values = dict(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                  num_attention_heads=shapes["transformer/layer_0/self_attention/query/kernel"][1],
                  intermediate_size=shapes["transformer/layer_0/intermediate/kernel"][1],
                  max_position_embeddings=shapes["position_embedding/embeddings"][0],
                  type_vocab_size=shapes["type_embeddings/embeddings"][0], hidden_act=hub.hidden_act)
    config = BertConfig.from_dict(values, source=hub.path)
    logging.info("%s has no bert_config.json: inferred %s from its weights' shapes and hidden_act=%s from its graph "
                 "(%s); dropout and initializer_range take the original's defaults.", hub.path,
                 ", ".join(f"{k}={v}" for k, v in values.items() if k != "hidden_act"), hub.hidden_act,
                 "it computes the error function" if hub.hidden_act == "gelu_exact"
                 else "no Erf/Erfc op: the tanh approximation")
    return config
