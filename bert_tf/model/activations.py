"""Activation functions by their `hidden_act` name in bert_config.json: `gelu` is the original's tanh approximation
(Hugging Face's "gelu_new"), `gelu_exact` the GELU with erf, which Hugging Face calls "gelu"
(`checkpoints.bert_config_from_hf` maps it).
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

