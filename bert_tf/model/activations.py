"""Activation functions by their `hidden_act` name in bert_config.json.

| name                     | computes                                              | who uses it                     |
|--------------------------|-------------------------------------------------------|---------------------------------|
| `gelu`                   | 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))        | the original code's "gelu"      |
| `gelu_new`, `gelu_tanh`  | the same tanh approximation                           | Hugging Face names for it       |
| `gelu_exact`, `gelu_erf` | 0.5 x (1 + erf(x / sqrt(2)))                          | Hugging Face's "gelu" (!)       |
| `relu`, `tanh`, `linear` | as named                                              |                                 |

`checkpoints.bert_config_from_hf` maps a Hugging Face "gelu" to `gelu_exact`.
"""
from keras import ops


def gelu(x):
    """The original BERT's GELU: the tanh approximation."""
    return ops.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU with the exact Gaussian CDF (erf)."""
    return ops.gelu(x, approximate=False)


def linear(x):
    return x


_FUNCTIONS = {
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_tanh": gelu,
    "gelu_exact": gelu_exact,
    "gelu_erf": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": linear,
}
NAMES = frozenset(_FUNCTIONS)


def is_known(name):
    """Whether `name` is a supported `hidden_act`."""
    return isinstance(name, str) and name.lower() in _FUNCTIONS


def get(name):
    """The activation function of a `hidden_act` name (case-insensitive; None or "" mean linear)."""
    if callable(name):
        return name
    if not name:
        return linear
    key = str(name).lower()
    if key not in _FUNCTIONS:
        raise ValueError(f"Unsupported activation {name!r}; expected one of {sorted(NAMES)}.")
    return _FUNCTIONS[key]

