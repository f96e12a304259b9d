"""The original `modeling.py`'s API, for code written against google-research/bert, on the Keras encoder.

    config = modeling.BertConfig.from_json_file("bert_config.json")
    model = modeling.BertModel(config, is_training=False, input_ids=ids, input_mask=mask, token_type_ids=types)
    model.restore("bert_model.ckpt")  # then the getters give the restored weights' outputs

Shapes: B = batch size, S = sequence length (F, T: from and to length of an attention mask), H = hidden_size,
V = vocab_size, L = num_hidden_layers.

The original's names, computed by `bert_tf.model`: `BertConfig`, `BertModel`, `gelu`, `get_activation`,
`get_assignment_map_from_checkpoint`, `dropout`, `layer_norm`, `layer_norm_and_dropout`, `create_initializer`,
`create_attention_mask_from_input_mask`, `transformer_model`, `get_shape_list`, `reshape_to_matrix`,
`reshape_from_matrix`, `assert_rank`. Absent: `embedding_lookup`, `embedding_postprocessor` and `attention_layer`,
whose arithmetic `bert_tf.model.encoder`'s BertEmbeddings and BertAttention do whole.

TF2 differences: `BertModel`, `transformer_model` and `layer_norm` create variables (no variable scopes), so run them
eagerly; the getters return the outputs of the weights at construction, or after `BertModel.restore`
(`tf.compat.v1.train.init_from_checkpoint` does not take Keras variables).
"""
import collections
import copy
import re
import weakref

import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.model import activations, encoder
from bert_tf.model.activations import gelu
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertModel as KerasBertModel
from bert_tf.model.encoder import TransformerBlock, attention_mask_adder, create_initializer

__all__ = [
    "BertConfig", "BertModel", "gelu", "get_activation", "get_assignment_map_from_checkpoint", "dropout",
    "layer_norm", "layer_norm_and_dropout", "create_initializer", "create_attention_mask_from_input_mask",
    "transformer_model", "get_shape_list", "reshape_to_matrix", "reshape_from_matrix", "assert_rank",
    "TransformerBlock", "attention_mask_adder", "KerasBertModel",
]

# The Keras encoders of the live BertModels: get_assignment_map_from_checkpoint names their variables.
_ENCODERS = weakref.WeakSet()


class BertModel:
    """The original's BertModel constructor and getters over the Keras encoder, held as `keras_model`."""

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None):
        """Builds the encoder and runs it on int32 [B, S] inputs (dropout only if `is_training`).
        `use_one_hot_embeddings` is ignored (a gather gives the same values); `scope` may only be "bert"."""
        if scope not in (None, "bert"):
            raise ValueError(f"scope={scope!r}: only the original's default scope 'bert' is supported (the "
                             f"checkpoint names are bert/...).")
        config = copy.deepcopy(config)
        if not is_training:
            config.hidden_dropout_prob = 0.0
            config.attention_probs_dropout_prob = 0.0
        input_ids = tf.convert_to_tensor(input_ids)
        batch_size, seq_length = get_shape_list(input_ids, expected_rank=2)
        if input_mask is None:
            input_mask = tf.ones([batch_size, seq_length], tf.int32)
        if token_type_ids is None:
            token_type_ids = tf.zeros([batch_size, seq_length], tf.int32)
        self._is_training = is_training
        self._inputs = {"input_ids": input_ids, "input_mask": tf.convert_to_tensor(input_mask),
                        "segment_ids": tf.convert_to_tensor(token_type_ids)}
        self.keras_model = encoder.BertModel(config)
        _ENCODERS.add(self.keras_model)
        self._compute_outputs()

    def _compute_outputs(self):
        outputs = self.keras_model(self._inputs, training=self._is_training)
        self.embedding_output = outputs["embedding_output"]
        self.all_encoder_layers = list(outputs["encoder_outputs"])
        self.sequence_output = outputs["sequence_output"]
        self.pooled_output = outputs["pooled_output"]
        self.embedding_table = self.keras_model.get_embedding_table()

    def restore(self, init_checkpoint):
        """Loads a checkpoint (`bert_tf.checkpoints.restore`) and recomputes the getters' outputs; returns its
        LoadReport."""
        report = checkpoints.restore(self.keras_model, init_checkpoint)
        self._compute_outputs()
        return report

    def get_pooled_output(self):
        """[B, H]: the first token's final hidden state through the tanh pooler."""
        return self.pooled_output

    def get_sequence_output(self):
        """[B, S, H]: the final hidden layer."""
        return self.sequence_output

    def get_all_encoder_layers(self):
        """L x [B, S, H]: every layer's output, the first layer's first."""
        return self.all_encoder_layers

    def get_embedding_output(self):
        """[B, S, H]: word + position + token type embeddings, after LayerNorm (and dropout when training)."""
        return self.embedding_output

    def get_embedding_table(self):
        """[V, H]: the word embedding variable."""
        return self.embedding_table


def get_activation(activation_string):
    """An activation name's function, as the original: a non-string as it is; None, "" and "linear": None; else
    `bert_tf.model.activations`' (ValueError for an unknown name)."""
    if not isinstance(activation_string, str):
        return activation_string
    if activation_string.lower() in ("", "linear"):
        return None
    return activations.get(activation_string)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """(assignment_map, initialized_variable_names) as the original's, for a TF1 checkpoint, the map's values
    variables. `tvars`: a BertModel's `keras_model` variables or TF1-named ones (`bert/...:0`)."""
    known = {id(variable): name for model in list(_ENCODERS)
             for name, variable in checkpoints.original_variable_map(model).items()}
    name_to_variable = collections.OrderedDict(
        (name, variable) for variable in tvars if (name := _original_name(variable, known)))
    assignment_map, initialized_variable_names = collections.OrderedDict(), {}
    for name, _ in tf.train.list_variables(init_checkpoint):
        if name in name_to_variable:
            assignment_map[name] = name_to_variable[name]
            initialized_variable_names[name] = 1
            initialized_variable_names[name + ":0"] = 1
    return assignment_map, initialized_variable_names


def _original_name(variable, known):
    """`variable`'s original name; None for an unknown Keras variable (its short name could match by chance)."""
    if id(variable) in known:
        return known[id(variable)]
    return None if isinstance(variable, keras.Variable) else re.sub(r":\d+$", "", variable.name)


def dropout(input_tensor, dropout_prob):
    """Dropout with `dropout_prob` the probability of dropping a value (None or 0.0: unchanged)."""
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


def layer_norm(input_tensor, name=None):
    """LayerNorm over the last dimension (epsilon 1e-12), with new gamma (ones) and beta (zeros) variables."""
    return encoder.make_layer_norm(name or "LayerNorm", None)(input_tensor)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
    """`layer_norm`, then `dropout`."""
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def create_attention_mask_from_input_mask(from_tensor, to_mask):
    """float32 [B, F, T] from `from_tensor` [B, F, ...] (its shape only) and int32 `to_mask` [B, T]."""
    batch_size, from_seq_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    to_seq_length = get_shape_list(to_mask, expected_rank=2)[1]
    to_mask = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]), tf.float32)
    return tf.ones([batch_size, from_seq_length, 1], tf.float32) * to_mask


def transformer_model(input_tensor, attention_mask=None, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
                      do_return_all_layers=False):
    """The original's post-LN Transformer of new `TransformerBlock`s on [B, S, H], optional [B, S, S] mask (1:
    attend), dropout wherever its probability is not 0: the last layer's output, or all with do_return_all_layers."""
    if hidden_size % num_attention_heads != 0:
        raise ValueError(f"The hidden size ({hidden_size}) is not a multiple of the number of attention heads "
                         f"({num_attention_heads})")
    batch_size, seq_length, input_width = get_shape_list(input_tensor, expected_rank=3)
    if input_width != hidden_size:
        raise ValueError(f"The width of the input tensor ({input_width}) != hidden size ({hidden_size})")
    if attention_mask is None:
        attention_mask = tf.ones([batch_size, seq_length, seq_length], tf.float32)
    # attention_mask_adder adds two axes after B: [B, 1, 1, F, T] -> the [B, 1, F, T] the blocks broadcast.
    mask_adder = tf.squeeze(attention_mask_adder(attention_mask), axis=1)
    outputs, x = [], input_tensor
    for i in range(num_hidden_layers):
        block = TransformerBlock(hidden_size, num_attention_heads, intermediate_size, intermediate_act_fn,
                                 attention_probs_dropout_prob, hidden_dropout_prob, initializer_range,
                                 name=f"layer_{i}")
        x = block(x, mask_adder, training=True)
        outputs.append(x)
    return outputs if do_return_all_layers else x


def get_shape_list(tensor, expected_rank=None, name=None):
    """The shape of `tensor` as a list: static dimensions as ints, the others as scalar int32 Tensors."""
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    shape = tensor.shape.as_list()
    if None in shape:
        dynamic = tf.shape(tensor)
        shape = [dynamic[i] if dim is None else dim for i, dim in enumerate(shape)]
    return shape


def reshape_to_matrix(input_tensor):
    """[..., W] (rank >= 2) as [-1, W]."""
    ndims = input_tensor.shape.ndims
    if ndims < 2:
        raise ValueError(f"Input tensor must have at least rank 2. Shape = {input_tensor.shape}")
    if ndims == 2:
        return input_tensor
    return tf.reshape(input_tensor, [-1, input_tensor.shape[-1]])


def reshape_from_matrix(output_tensor, orig_shape_list):
    """[M, W] back to orig_shape_list[:-1] + [W]."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, list(orig_shape_list[:-1]) + [width])


def assert_rank(tensor, expected_rank, name=None):
    """ValueError unless the rank of `tensor` is `expected_rank` (an int or a list of ints)."""
    expected = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    actual_rank = tensor.shape.ndims
    if actual_rank not in expected:
        name = name or getattr(tensor, "name", "tensor")
        raise ValueError(f"For the tensor `{name}`, the actual rank `{actual_rank}` (shape = {tensor.shape}) is "
                         f"not equal to the expected rank `{expected_rank}`")
