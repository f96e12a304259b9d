"""The original `modeling.py`'s API, for code written against google-research/bert, on the Keras encoder.

    from bert_tf import modeling
    config = modeling.BertConfig.from_json_file("bert_config.json")
    model = modeling.BertModel(config, is_training=False, input_ids=ids, input_mask=mask, token_type_ids=types)
    model.restore("bert_model.ckpt")  # then the getters give the restored weights' outputs
    model.get_pooled_output(), model.get_sequence_output(), model.get_all_encoder_layers()

Shapes: B = batch size, S = sequence length (F, T: from and to length of an attention mask), H = hidden_size,
V = vocab_size, L = num_hidden_layers.

Of the original's public names, these are here, computed by `bert_tf.model` (config, activations, encoder):
`BertConfig`, `BertModel`, `gelu`, `get_activation`, `get_assignment_map_from_checkpoint`, `dropout`,
`layer_norm`, `layer_norm_and_dropout`, `create_initializer`, `create_attention_mask_from_input_mask`,
`transformer_model`, `get_shape_list`, `reshape_to_matrix`, `reshape_from_matrix`, `assert_rank`.

Absent: `embedding_lookup`, `embedding_postprocessor` and `attention_layer`. The library computes the embeddings
in one layer (`BertEmbeddings`: word, token type and position embeddings, LayerNorm, dropout) and attention with its
output projection, residual and LayerNorm in one (`BertAttention`); the original's separate steps (and
attention_layer's cross-attention and query/key/value activations) would be a second copy of that arithmetic.

TF2 differences:
- `BertModel`, `transformer_model` and `layer_norm` create variables, so they run eagerly, outside `tf.function`
  (which may create variables only on its first trace). For compiled inference, wrap `model.keras_model` in a
  tf.function.
- A BertModel's getters return values (eager tensors): the outputs of its weights at construction, and of the
  restored weights after `BertModel.restore`. Restore with that method: `tf.compat.v1.train.init_from_checkpoint`
  does not take Keras variables.
- TF2 keeps no variable scopes: `transformer_model` and `layer_norm` create new variables at their initial values on
  every call, as the original did inside the caller's scope, but nothing collects them. To keep or restore the
  weights, build the Keras layers instead (`TransformerBlock`, `bert_tf.model.encoder.BertModel`).

The library's Keras names are re-exported too: the layers (`BertEmbeddings`, `BertAttention`, `TransformerBlock`,
`BertPooler`), `KerasBertModel` (the Keras encoder, `bert_tf.model.encoder.BertModel`: its variables exist once it is
constructed; it is called on an inputs dict), `attention_mask_adder` and `LAYER_NORM_EPSILON`.
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
from bert_tf.model.encoder import (
    LAYER_NORM_EPSILON,
    BertAttention,
    BertEmbeddings,
    BertPooler,
    TransformerBlock,
    attention_mask_adder,
    create_initializer,
)
from bert_tf.model.encoder import BertModel as KerasBertModel

__all__ = [
    "BertConfig", "BertModel", "gelu", "get_activation", "get_assignment_map_from_checkpoint", "dropout",
    "layer_norm", "layer_norm_and_dropout", "create_initializer", "create_attention_mask_from_input_mask",
    "transformer_model", "get_shape_list", "reshape_to_matrix", "reshape_from_matrix", "assert_rank",
    "BertEmbeddings", "BertAttention", "TransformerBlock", "BertPooler", "LAYER_NORM_EPSILON",
    "attention_mask_adder", "KerasBertModel",
]

# The Keras encoders of the live BertModels: get_assignment_map_from_checkpoint names their variables.
_ENCODERS = weakref.WeakSet()


class BertModel:
    """BERT ("Bidirectional Encoder Representations from Transformers") with the original's constructor and getters,
    computed by the library's Keras encoder, held as `keras_model` (a `bert_tf.model.encoder.BertModel`).

        model = modeling.BertModel(config, is_training=True, input_ids=ids, input_mask=mask, token_type_ids=types)
        model.restore(init_checkpoint)
        logits = tf.matmul(model.get_pooled_output(), label_embeddings)
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None):
        """Builds the Keras encoder and runs it on the inputs (with dropout if `is_training`).

        Args:
          config: `BertConfig`; copied, with both dropout probabilities 0 unless `is_training`.
          is_training: bool: whether dropout is applied.
          input_ids: int32 Tensor [B, S].
          input_mask: (optional) int32 Tensor [B, S], 1 for real tokens; default all ones.
          token_type_ids: (optional) int32 Tensor [B, S]; default all zeros.
          use_one_hot_embeddings: accepted for the original's callers; the word embeddings are gathered either way
            (the same values; the original offered the one-hot matmul for TPUs).
          scope: None or "bert": the variables have the original's `bert/...` names (see
            `get_assignment_map_from_checkpoint`); another scope would name checkpoint variables differently.

        Raises:
          ValueError: input_ids is not of rank 2, or another scope is asked for.
        """
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
        """Loads `init_checkpoint` into `keras_model` with `bert_tf.checkpoints.restore` (an original TF1 checkpoint
        by variable name, one of bert-tf's, a Model Garden checkpoint or a TF Hub SavedModel; an encoder that does
        not fit the config is an error) and recomputes the getters' outputs from the restored weights.

        Returns: the `checkpoints.LoadReport` (loaded, missing and unused variables by original name).
        """
        report = checkpoints.restore(self.keras_model, init_checkpoint)
        self._compute_outputs()
        return report

    def get_pooled_output(self):
        """float Tensor [B, H]: the first token's final hidden state through the tanh pooler dense layer."""
        return self.pooled_output

    def get_sequence_output(self):
        """float Tensor [B, S, H]: the final hidden layer of the encoder."""
        return self.sequence_output

    def get_all_encoder_layers(self):
        """list of L float Tensors [B, S, H]: every encoder layer's output, the first layer's first."""
        return self.all_encoder_layers

    def get_embedding_output(self):
        """float Tensor [B, S, H]: the input to the transformer: word + position + token type embeddings, after
        LayerNorm (and dropout when training)."""
        return self.embedding_output

    def get_embedding_table(self):
        """The word embedding variable [V, H]."""
        return self.embedding_table


def get_activation(activation_string):
    """Maps an activation name to its function, like the original: a non-string is returned as it is; None, "" and
    "linear" give None; the library's names (`bert_tf.model.activations`: "gelu", "relu", "tanh", "gelu_exact",
    ...) give their function.

    Raises:
      ValueError: an unknown name.
    """
    if not isinstance(activation_string, str):
        return activation_string
    if activation_string.lower() in ("", "linear"):
        return None
    return activations.get(activation_string)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """The variables of `tvars` that `init_checkpoint` holds, by original name, like the original.

    Args:
      tvars: variables: those of the `keras_model` of a BertModel of this module (named by
        `checkpoints.original_variable_map`, e.g. `bert/encoder/layer_0/attention/self/query/kernel`; Keras' own
        names are short), or variables whose `name` is the original name (`bert/...:0`, as TF1 code created them).
      init_checkpoint: an original TF1 (name-based) checkpoint prefix.

    Returns:
      (assignment_map, initialized_variable_names): an OrderedDict, in the checkpoint's order, of checkpoint name ->
      variable (a variable object, where the original's TF1 graph gave the name), and a dict with each such name and
      `name + ":0"` as keys (value 1). Restore a BertModel with `BertModel.restore`.
    """
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
    """The original name of `variable`: `known[id(variable)]`, else a TF1 variable's own name without ":0"; None for
    another Keras variable (its own name is short, "kernel", and would match a checkpoint name by chance)."""
    if id(variable) in known:
        return known[id(variable)]
    return None if isinstance(variable, keras.Variable) else re.sub(r":\d+$", "", variable.name)


def dropout(input_tensor, dropout_prob):
    """Dropout with `dropout_prob` the probability of dropping a value (None or 0.0: the input unchanged)."""
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
    """A 3-D attention mask from a 2-D one: every `from` position may attend to the `to` positions of `to_mask`.

    Args:
      from_tensor: Tensor [B, F] or [B, F, ...] (only its shape is used).
      to_mask: int32 Tensor [B, T], 1 for positions that may be attended to.

    Returns:
      float32 Tensor [B, F, T].
    """
    batch_size, from_seq_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    to_seq_length = get_shape_list(to_mask, expected_rank=2)[1]
    to_mask = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]), tf.float32)
    return tf.ones([batch_size, from_seq_length, 1], tf.float32) * to_mask


def transformer_model(input_tensor, attention_mask=None, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
                      do_return_all_layers=False):
    """The multi-layer Transformer encoder of "Attention is All You Need" (post-LN), as the original's: new
    `TransformerBlock`s `layer_0` ... (new variables), dropout applied wherever its probability is not 0.

    Args:
      input_tensor: float Tensor [B, S, hidden_size].
      attention_mask: (optional) int32 or float Tensor [B, S, S], 1 where attention is allowed, 0 where not.
      intermediate_act_fn: the feed-forward activation (a function; None for linear).
      do_return_all_layers: return every layer's output instead of the last one.
      The others: as in `BertConfig`.

    Returns:
      float Tensor [B, S, hidden_size], the last layer's output; or a list of num_hidden_layers of them.

    Raises:
      ValueError: hidden_size is not a multiple of num_attention_heads, or the input's width is not hidden_size.
    """
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
    """The shape of `tensor` as a list: static dimensions as Python ints, the others as scalar int32 Tensors.

    Raises:
      ValueError: `expected_rank` (an int or a list of ints) is given and the rank is not one of them.
    """
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    shape = tensor.shape.as_list()
    if None in shape:
        dynamic = tf.shape(tensor)
        shape = [dynamic[i] if dim is None else dim for i, dim in enumerate(shape)]
    return shape


def reshape_to_matrix(input_tensor):
    """A tensor of rank >= 2 [..., W] as a matrix [-1, W].

    Raises:
      ValueError: the rank is below 2.
    """
    ndims = input_tensor.shape.ndims
    if ndims < 2:
        raise ValueError(f"Input tensor must have at least rank 2. Shape = {input_tensor.shape}")
    if ndims == 2:
        return input_tensor
    return tf.reshape(input_tensor, [-1, input_tensor.shape[-1]])


def reshape_from_matrix(output_tensor, orig_shape_list):
    """A matrix [M, W] back to the rank of `orig_shape_list` (a `get_shape_list`): orig_shape_list[:-1] + [W]."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, list(orig_shape_list[:-1]) + [width])


def assert_rank(tensor, expected_rank, name=None):
    """Raises ValueError if the rank of `tensor` is not `expected_rank` (an int, or a list of ints)."""
    expected = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    actual_rank = tensor.shape.ndims
    if actual_rank not in expected:
        name = name or getattr(tensor, "name", "tensor")
        raise ValueError(f"For the tensor `{name}`, the actual rank `{actual_rank}` (shape = {tensor.shape}) is "
                         f"not equal to the expected rank `{expected_rank}`")
