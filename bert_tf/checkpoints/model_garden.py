"""Model Garden (tensorflow/models `official.nlp`) BERT checkpoints in and out, in plain TensorFlow (TF Hub SavedModels:
`tfhub`).

In: `checkpoint_tensors` maps a TF2 checkpoint of a `BertEncoder` / `BertEncoderV2` or `BertPretrainerV2` to original
names through its object graph; what has no place is reported unused as "model_garden:<object path>". Out:
`save_model_garden_checkpoint` writes the object graph Model Garden's converter writes.

Layouts (Model Garden vs original): query/key/value kernel [H, N, D] vs [H, N*D], bias [N, D] vs [N*D], attention-output
kernel [N, D, H] vs [N*D, H]; next-sentence kernel [H, 2] vs output_weights [2, H].
"""
import collections

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.checkpoints import name_map, original

OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE = "VARIABLE_VALUE"
# Roots of a Model Garden training checkpoint that hold no model weights.
_TRAINING_STATE = ("optimizer", "global_step", "save_counter")

# (original name, Model Garden variable name, object path inside the MaskedLM layer); the layer also holds the word
# embeddings as `embedding_table`, and its bias as `output_bias/bias` too.
MASKED_LM_PATHS = [
    (f"cls/predictions/transform/{o}/{w}", f"bert/cls/predictions/transform/{o}/{w}", f"{p}/{w}")
    for o, p, names in (("dense", "dense", ("kernel", "bias")), ("LayerNorm", "layer_norm", ("gamma", "beta")))
    for w in names
] + [("cls/predictions/output_bias", "bert/cls/predictions/output_bias/bias", "bias")]


def to_original(layout, value):
    """A Model Garden array in `layout` (None: the original's) -> the original's shape."""
    if layout in (None, "transpose"):
        return value.T if layout else value
    return value.reshape({"heads_kernel": (value.shape[0], -1), "heads_bias": (-1,),
                          "heads_output": (-1, value.shape[-1])}[layout])


def to_model_garden(layout, value, num_heads):
    """The inverse of `to_original`, for `num_heads` attention heads."""
    if layout in (None, "transpose"):
        return value.T if layout else value
    return value.reshape({"heads_kernel": (value.shape[0], num_heads, -1),
                          "heads_bias": (num_heads, -1),
                          "heads_output": (num_heads, -1, value.shape[-1])}[layout])


class _ObjectGraph:
    """A TrackableObjectGraph walked breadth first: the shortest object path of each node, children by name."""

    def __init__(self, graph):
        self.nodes = graph.nodes
        self.paths = {0: ""}
        queue = collections.deque([0])
        while queue:
            node_id = queue.popleft()
            for child in self.nodes[node_id].children:
                if child.node_id not in self.paths:
                    self.paths[child.node_id] = f"{self.paths[node_id]}/{child.local_name}".lstrip("/")
                    queue.append(child.node_id)

    def child(self, node_id, path):
        """The node at `path` ("a/b/0") below node_id, or None."""
        for name in path.split("/"):
            children = {c.local_name: c.node_id for c in self.nodes[node_id].children}
            if name not in children:
                return None
            node_id = children[name]
        return node_id

    def find(self, *names):
        """The first node (breadth first) that has every child in `names`, or None."""
        for node_id in sorted(self.paths, key=lambda n: (self.paths[n].count("/"), self.paths[n])):
            if all(self.child(node_id, name) is not None for name in names):
                return node_id
        return None

    def value_key(self, node_id):
        """The checkpoint key of a variable node's value, or None."""
        keys = [a.checkpoint_key for a in self.nodes[node_id].attributes if a.name == _VALUE]
        return keys[0] if keys else None


def read_object_graph(reader):
    """The object graph of a TF2 checkpoint reader, or None for a name-based checkpoint."""
    if OBJECT_GRAPH not in reader.get_variable_to_shape_map():
        return None
    return _ObjectGraph(trackable_object_graph_pb2.TrackableObjectGraph.FromString(reader.get_tensor(OBJECT_GRAPH)))


def _next_sentence_nodes(graph):
    """(pooler dense node, logits node) of a BertPretrainerV2's `next_sentence` head, or (None, None)."""
    pooler = graph.child(0, "next_sentence.pooler_dense")
    heads = graph.find("classification_heads")
    if pooler is None or heads is None:
        return None, None
    container = graph.child(heads, "classification_heads")
    for head in graph.nodes[container].children:
        if graph.child(head.node_id, "dense") == pooler:
            return pooler, graph.child(head.node_id, "out_proj")
    return pooler, None


def checkpoint_tensors(reader):
    """Original name -> tensor getter for a Model Garden TF2 checkpoint of a BertEncoder or
    BertPretrainerV2; None for a checkpoint without a Model Garden encoder (an object with
    `_embedding_layer` and `_transformer_layers`).

    A `next_sentence` head's pooler dense becomes bert/pooler/dense (the encoder's own, untrained
    pooler is then unused). Other floating-point model variables are added without a getter:
    reported unused."""
    graph = read_object_graph(reader)
    encoder = graph.find("_embedding_layer", "_transformer_layers") if graph else None
    if encoder is None:
        return None
    layers = graph.child(encoder, "_transformer_layers")
    num_layers = len(graph.nodes[layers].children)
    rows = [(row.original, graph.child(encoder, row.model_garden_path), row.layout)
            for row in name_map.encoder_rows(num_layers)]
    masked_lm = graph.find("masked_lm")
    if masked_lm is not None:
        head = graph.child(masked_lm, "masked_lm")
        rows += [(orig, graph.child(head, path), None) for orig, _, path in MASKED_LM_PATHS]
    pooler, logits = _next_sentence_nodes(graph)
    if logits is not None:
        rows = [row for row in rows if not row[0].startswith("bert/pooler/")]
        rows += [(f"bert/pooler/dense/{w}", graph.child(pooler, w), None) for w in ("kernel", "bias")]
        rows += [("cls/seq_relationship/output_weights", graph.child(logits, "kernel"), "transpose"),
                 ("cls/seq_relationship/output_bias", graph.child(logits, "bias"), None)]
    keys = {orig: (graph.value_key(node), layout) for orig, node, layout in rows if node is not None}
    tensors = {orig: (lambda key=key, k=layout: to_original(k, reader.get_tensor(key)))
               for orig, (key, layout) in keys.items() if key}
    used = {node for _, node, _ in rows}
    floating = {key for key, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating}
    for node_id, path in graph.paths.items():
        key = graph.value_key(node_id)
        if node_id not in used and key in floating and path.split("/")[0] not in _TRAINING_STATE:
            tensors[f"model_garden:{path}"] = None
    return tensors


class _Node(tf.Module):
    """A plain trackable: its children are the attributes set on it, in the order they are set."""


def _set_path(node, path, value):
    """Sets `value` at `path` ("a/b/kernel") below `node`, creating the _Nodes on the way."""
    *parents, leaf = path.split("/")
    for name in parents:
        if name not in vars(node):
            setattr(node, name, _Node())
        node = getattr(node, name)
    setattr(node, leaf, value)


def _encoder_layers(num_layers):
    """(attribute path, `layer_with_weights-K`, `layer-M`) of each layer with weights of Model Garden's functional
    BertEncoder."""
    return ([("_embedding_layer", 0, 1), ("_position_embedding_layer", 1, 3), ("_type_embedding_layer", 2, 4),
             ("_embedding_norm_layer", 3, 6)]
            + [(f"_transformer_layers/{i}", 4 + i, 10 + i) for i in range(num_layers)]
            + [("_pooler_layer", 4 + num_layers, 11 + num_layers)])


def _encoder_trackable(variables, num_layers):
    """A trackable with a Model Garden BertEncoder's object graph for `variables` (object path -> tf.Variable): under
    the Keras layer indices first (checkpoint keys take the first shortest path), then the layers' attributes and Keras'
    aliases."""
    layers = {attr: _Node() for attr, _, _ in _encoder_layers(num_layers)}
    for path, variable in variables.items():
        attr = next(a for a in layers if path.startswith(a + "/"))
        _set_path(layers[attr], path[len(attr) + 1:], variable)
    position = layers["_position_embedding_layer"]
    position._position_embeddings = position.embeddings
    for i in range(num_layers):
        block = layers[f"_transformer_layers/{i}"]
        block._attention_layer_norm_kv = block._attention_layer_norm
    encoder = _Node()
    for attr, k, m in _encoder_layers(num_layers):
        setattr(encoder, f"layer_with_weights-{k}", layers[attr])
        setattr(encoder, f"layer-{m}", layers[attr])
    for attr in ("_pooler_layer", *(f"_transformer_layers/{i}" for i in range(num_layers)), "_embedding_norm_layer",
                 "_embedding_layer", "_position_embedding_layer", "_type_embedding_layer"):
        _set_path(encoder, attr, layers[attr])
    return encoder


def _masked_lm_trackable(variables, word_embeddings):
    """A trackable with a Model Garden MaskedLM layer's object graph for `variables`."""
    head = _Node()
    head.embedding_table = word_embeddings
    for path, variable in variables.items():
        if path == "bias":
            setattr(head, "output_bias/bias", variable)
        _set_path(head, path, variable)
    return head


def save_model_garden_checkpoint(original_tensors, config, checkpoint_prefix):
    """Writes `original_tensors` as the TF2 checkpoint Model Garden's tf2_bert_encoder_checkpoint_converter.py writes
    (`encoder`, and `masked_lm` where present; no next-sentence head), which
    `tf.train.Checkpoint(encoder=BertEncoder(...))` restores. Returns the prefix."""
    heads = config.num_attention_heads

    def variables(rows):
        return {path: tf.Variable(to_model_garden(layout, original_tensors[orig], heads), dtype=tf.float32)
                for orig, path, layout in rows}

    encoder = variables([(row.original, row.model_garden_path, row.layout)
                         for row in name_map.encoder_rows(config.num_hidden_layers)])
    objects = {"encoder": _encoder_trackable(encoder, config.num_hidden_layers)}
    if all(orig in original_tensors for orig, _, _ in MASKED_LM_PATHS):
        objects["masked_lm"] = _masked_lm_trackable(variables([(o, p, None) for o, _, p in MASKED_LM_PATHS]),
                                                    encoder["_embedding_layer/embeddings"])
    with original.staged_checkpoint(checkpoint_prefix) as staged:
        tf.train.Checkpoint(**objects).write(staged)
    return checkpoint_prefix
