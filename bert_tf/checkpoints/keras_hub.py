"""KerasHub BERT presets in and out; keras-hub (the `ecosystem` extra) is imported only to read or write one.

A preset is a directory: config.json (a serialized `keras_hub>BertBackbone`), model.weights.h5, tokenizer.json with
assets/tokenizer/vocabulary.txt, metadata.json; a task's preset adds task.json, task.weights.h5 and preprocessor.json.
In: `read_preset`, `preset_tensors`. Out: `save_preset`, committed into output_dir as a whole.

Layouts: attention kernels per head as in `model_garden`; Dense kernels [in, out]. BertBackbone computes the tanh GELU
only: relu, tanh and linear models are refused, gelu_exact ones written with a warning.
"""
import contextlib
import dataclasses
import functools
import os

from absl import logging

from bert_tf import fileio
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints.model_garden import to_model_garden, to_original
from bert_tf.model import activations, task_models
from bert_tf.model.config import BertConfig, check_exact_vocab_size
from bert_tf.text import tokenization

CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.weights.h5", "model.weights.json")  # one file, or the index of sharded weights
TASK_FILE, TASK_WEIGHTS_FILE, TOKENIZER_FILE = "task.json", "task.weights.h5", "tokenizer.json"
BACKBONE_CLASS, TOKENIZER_CLASS = "keras_hub>BertBackbone", "keras_hub>BertTokenizer"
# What the tanh GELU does to a model trained with the exact one (tests/checkpoints/test_keras_hub.py checks it).
GELU_EXACT_DIFFERENCE = ("on the real MiniLM-L6-H384 over 200 real sentences the tanh form moved the sequence "
                         "outputs by up to 7.9e-3 (3.6e-4 on average), the pooled output by up to 3.0e-4, and its "
                         "sentence embeddings to a cosine of 0.999998 with the exact ones")

# The KerasHub task whose head bert-tf maps (a classifier's), and that head's (original name,
# KerasHub path, layout); a preset of another task reads and writes as its backbone.
CLASSIFIER_CLASS = "BertTextClassifier"
_CLASSIFIER_ROWS = [("output_weights", "logits/kernel", "transpose"),
                    ("output_bias", "logits/bias", None)]


def _keras_hub():
    """keras_hub, or an ImportError naming the extra to install."""
    try:
        import keras_hub
    except ImportError as e:
        raise ImportError("KerasHub presets need keras-hub: pip install 'bert-tf[ecosystem]' (or pip install "
                          "keras-hub).") from e
    return keras_hub


def encoder_rows(num_layers):
    """(original name, KerasHub variable path, layout) of every encoder variable of a `num_layers` BERT."""
    return [(row.original, row.keras_hub, row.layout) for row in name_map.encoder_rows(num_layers)]


@dataclasses.dataclass
class Preset:
    """What bert-tf reads from a KerasHub BERT preset's JSON files (`read_preset`)."""
    path: str
    config: BertConfig  # from config.json: hidden_act "gelu", the tanh form KerasHub computes
    vocab_file: str | None  # assets/tokenizer/vocabulary.txt, if the preset has a tokenizer
    do_lower_case: bool | None  # tokenizer.json's lowercase, if the preset has a tokenizer
    task: str | None  # task.json's class (e.g. "BertTextClassifier"), or None

    @property
    def vocab_size(self):
        return self.config.vocab_size


def _registered(path, what):
    """(the JSON object at path, its registered_name), or a ValueError naming the file."""
    value = fileio.read_json(path, what)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object (a serialized Keras object), got {type(value).__name__}.")
    return value, value.get("registered_name")


def is_preset(path):
    """Whether `path` is a KerasHub preset: its config.json names a `registered_name`, whatever the architecture."""
    config = os.path.join(path, CONFIG_FILE) if path else None
    return bool(path) and fileio.isfile(config) and "registered_name" in (fileio.read_json(config, "config") or {})


def bert_config_from_keras_hub(backbone, source):
    """A BertBackbone's config -> BertConfig: its one dropout for both of the original's, hidden_act "gelu" (tanh),
    initializer_range 0.02."""
    keys = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")
    missing = [k for k in keys if k not in backbone]
    if missing:
        raise ValueError(f"{source}: the BertBackbone config lacks {', '.join(missing)}.")
    dropout = backbone.get("dropout", 0.1)
    values = dict(vocab_size=backbone["vocabulary_size"], hidden_size=backbone["hidden_dim"],
                  num_hidden_layers=backbone["num_layers"], num_attention_heads=backbone["num_heads"],
                  intermediate_size=backbone["intermediate_dim"], hidden_act="gelu", hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout,
                  max_position_embeddings=backbone.get("max_sequence_length", 512),
                  type_vocab_size=backbone.get("num_segments", 2), initializer_range=0.02)
    return BertConfig.from_dict(values, source=source)


def _tokenizer_files(path, config):
    """(vocabulary file or None, lowercase or None) of the preset's tokenizer.json; raises unless its vocabulary has the
    backbone's size. Warns where lowercase and strip_accents differ."""
    tokenizer_json = os.path.join(path, TOKENIZER_FILE)
    if not fileio.isfile(tokenizer_json):
        return None, None
    tokenizer, name = _registered(tokenizer_json, "KerasHub tokenizer config")
    if name != TOKENIZER_CLASS:
        raise ValueError(f"{tokenizer_json} registers {name!r}, not {TOKENIZER_CLASS!r}: not a BERT WordPiece "
                         f"tokenizer.")
    settings = tokenizer.get("config", {})
    asset_dir = os.path.splitext(settings.get("config_file", TOKENIZER_FILE))[0]
    vocab_file = os.path.join(path, "assets", asset_dir, "vocabulary.txt")
    if not fileio.isfile(vocab_file):
        raise FileNotFoundError(f"{vocab_file} not found: {tokenizer_json} names a tokenizer whose vocabulary "
                                f"KerasHub keeps there.")
    size = len(tokenization.load_vocab(vocab_file))
    if size != config.vocab_size:
        raise ValueError(f"{vocab_file} has {size} tokens but {os.path.join(path, CONFIG_FILE)} says "
                         f"vocabulary_size={config.vocab_size}: the preset's vocabulary does not fit its backbone.")
    lowercase, strip_accents = bool(settings.get("lowercase", False)), bool(settings.get("strip_accents", False))
    if lowercase != strip_accents:
        _warn_casing(tokenizer_json, lowercase, strip_accents)
    return vocab_file, lowercase


@functools.cache
def _warn_casing(tokenizer_json, lowercase, strip_accents):
    """Warns (once per file and setting) that a preset's casing differs from do_lower_case=lowercase."""
    logging.warning("%s: lowercase=%s but strip_accents=%s (KerasHub's converter of Hugging Face BERTs writes that); "
                    "bert-tf's do_lower_case, the original's, lower-cases and strips accents together, so it "
                    "tokenizes with do_lower_case=%s: ids differ from KerasHub's on words with accents.",
                    tokenizer_json, lowercase, strip_accents, lowercase)


def read_preset(path):
    """Reads a KerasHub BERT preset's JSON files into a Preset (nothing built, keras-hub not imported).

    ValueError naming the file for another architecture, a non-BERT tokenizer or a vocabulary of the wrong size;
    FileNotFoundError naming the missing weights or vocabulary file.
    """
    config_json = os.path.join(path, CONFIG_FILE)
    backbone, name = _registered(config_json, "KerasHub preset config")
    if name != BACKBONE_CLASS:
        raise ValueError(f"{config_json} registers {name!r}: a KerasHub preset of another architecture than BERT "
                         f"(bert-tf reads {BACKBONE_CLASS!r} presets).")
    if not any(fileio.isfile(os.path.join(path, f)) for f in WEIGHTS_FILES):
        raise FileNotFoundError(f"{os.path.join(path, WEIGHTS_FILES[0])} not found: the KerasHub preset {path} has "
                                f"no backbone weights.")
    config = bert_config_from_keras_hub(backbone.get("config", {}), config_json)
    vocab_file, lowercase = _tokenizer_files(path, config)
    task = None
    task_json = os.path.join(path, TASK_FILE)
    if fileio.isfile(task_json):
        task = (_registered(task_json, "KerasHub task config")[1] or "").rpartition(">")[2]
        if task == CLASSIFIER_CLASS and not fileio.isfile(os.path.join(path, TASK_WEIGHTS_FILE)):
            raise FileNotFoundError(f"{os.path.join(path, TASK_WEIGHTS_FILE)} not found: {task_json} is a {task} "
                                    f"whose head weights KerasHub keeps there.")
    return Preset(path, config, vocab_file, lowercase, task)


@contextlib.contextmanager
def _local_preset(path):
    """The preset directory on local disk: itself, or a copy of a URL's files."""
    if not fileio.is_url(path):
        yield path
        return
    with fileio.local_directory() as local:
        fileio.copy_tree(path, local)
        yield local


def preset_tensors(path):
    """Original name -> tensor getter of a KerasHub BERT preset's backbone and classifier head;
    other variables are added as "keras_hub:<name>" without a getter: reported unused."""
    preset = read_preset(path)
    models = _keras_hub().models
    classifier = preset.task == CLASSIFIER_CLASS
    with _local_preset(preset.path) as local:  # in float32
        if classifier:
            model = models.BertTextClassifier.from_preset(local, preprocessor=None, dtype="float32")
        else:
            model = models.BertBackbone.from_preset(local, dtype="float32")
    values = {variable.path: variable.numpy() for variable in model.weights}
    rows = encoder_rows(preset.config.num_hidden_layers) + (_CLASSIFIER_ROWS if classifier else [])
    tensors = {name: (lambda v=values[p], k=layout: to_original(k, v)) for name, p, layout in rows if p in values}
    used = {p for _, p, _ in rows}
    tensors.update({f"keras_hub:{p}": None for p in values if p not in used})
    if preset.task and not classifier:
        tensors[f"keras_hub:{TASK_WEIGHTS_FILE} ({preset.task})"] = None
    return tensors


def check_preset_writable(config, output_dir, vocab_file=None):
    """`save_preset`'s checks, for a caller to run before its work: keras-hub importable, the activation (gelu_exact:
    a warning, `GELU_EXACT_DIFFERENCE`), the vocabulary's size, output_dir (empty or a preset)."""
    _keras_hub()
    function = activations.get(config.hidden_act)
    if function is activations.gelu_exact:
        logging.warning("%s: the model computes the exact GELU (hidden_act=%s) but KerasHub's BertBackbone computes "
                        "the tanh form: the preset is written, and computes differently (%s). Fine-tune it further "
                        "in KerasHub, or keep the original release, where that matters.", output_dir,
                        config.hidden_act, GELU_EXACT_DIFFERENCE)
    elif function is not activations.gelu:
        raise ValueError(f"hidden_act={config.hidden_act!r}: KerasHub's BertBackbone computes the tanh GELU only "
                         f"(bert-tf's 'gelu'), so this model cannot be written as a KerasHub preset ({output_dir}).")
    if vocab_file:
        check_exact_vocab_size(config, tokenization.load_vocab(vocab_file), vocab_file, "a KerasHub preset")
    if fileio.isdir(output_dir) and fileio.walk_files(output_dir) and not is_preset(output_dir):
        raise ValueError(f"{output_dir} holds files ({sorted(fileio.listdir(output_dir))[:5]}) and is not a KerasHub "
                         f"preset: a preset replaces its directory's content as a whole; choose an empty or new "
                         f"output directory.")


def _build(keras_hub, tensors, config, vocab_file, do_lower_case):
    """(KerasHub model, tokenizer or None) of `tensors`: BertBackbone, or a BertTextClassifier where
    they hold its head."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size, dtype="float32")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=do_lower_case,
                                               strip_accents=do_lower_case) if vocab_file else None
    rows = encoder_rows(config.num_hidden_layers)
    model = backbone
    if all(name in tensors for name, _, _ in _CLASSIFIER_ROWS):
        task_class = keras_hub.models.BertTextClassifier
        preprocessor = task_class.preprocessor_cls(
            tokenizer, sequence_length=min(512, config.max_position_embeddings)) if tokenizer else None
        num_classes = tensors["output_bias"].shape[0]  # [num_labels]
        model = task_class(backbone, num_classes, preprocessor=preprocessor, dropout=config.hidden_dropout_prob)
        rows += _CLASSIFIER_ROWS
    variables = {variable.path: variable for variable in model.weights}
    for name, path, layout in rows:
        variables[path].assign(to_model_garden(layout, tensors[name], config.num_attention_heads))
    return model, tokenizer


def export_preset(model, output_dir, vocab_file=None, do_lower_case=True):
    """`save_preset` of a model's variables by original name; returns output_dir."""
    config = task_models.encoder_of(model).config
    return save_preset(name_map.model_tensors(model), config, output_dir, vocab_file, do_lower_case)


def save_preset(tensors, config, output_dir, vocab_file=None, do_lower_case=True):
    """Writes `tensors` (original name -> array) as a KerasHub preset: BertBackbone, a BertTokenizer
    with vocab_file, and a classifier head's BertTextClassifier with its preprocessor; other heads
    are left out. Checked by `check_preset_writable` first, written locally, then committed
    (config.json last). Returns output_dir."""
    check_preset_writable(config, output_dir, vocab_file)
    keras_hub = _keras_hub()
    with fileio.local_directory() as local:
        local_vocab = os.path.join(local, "vocab.txt") if vocab_file else None
        if vocab_file:
            fileio.copy_file(vocab_file, local_vocab)
        model, tokenizer = _build(keras_hub, tensors, config, local_vocab, do_lower_case)
        preset_dir = os.path.join(local, "preset")
        model.save_to_preset(preset_dir)
        if tokenizer is not None and getattr(model, "preprocessor", None) is None:  # a task's preprocessor saved it
            tokenizer.save_to_preset(preset_dir)
        with fileio.staged_directory(output_dir, key=CONFIG_FILE) as staging:
            fileio.copy_tree(preset_dir, staging)
    return output_dir
