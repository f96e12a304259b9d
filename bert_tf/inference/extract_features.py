"""Feature extraction (the original extract_features.py): per-token activations of chosen encoder layers.

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: JSON lines in the original's form,
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}, ...]}, ...]}`
with every value rounded to 6 decimals.
"""
import collections
import json
import re

import numpy as np
from absl import logging
from tqdm import tqdm

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.model.config import check_max_seq_length
from bert_tf.model.encoder import BertModel
from bert_tf.text import packing, tokenization
from bert_tf.training import devices, prediction

InputExample = collections.namedtuple("InputExample", ["unique_id", "text_a", "text_b"])
InputFeatures = collections.namedtuple(
    "InputFeatures", ["unique_id", "tokens", "input_ids", "input_mask", "input_type_ids"])

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(input_file):
    """Reads `input_file` (one example per line; `a ||| b` for pairs) like the original: every line, stripped."""
    if not fileio.exists(input_file):
        raise FileNotFoundError(f"Input file not found: {input_file}")
    examples = []
    with fileio.open_file(input_file, "rb", name="") as reader:
        for unique_id, raw in enumerate(reader):
            line = tokenization.convert_to_unicode(raw).strip()
            match = _PAIR.match(line)
            text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
            examples.append(InputExample(unique_id, text_a, text_b))
    return examples


def convert_examples_to_features(examples, seq_length, tokenizer):
    """Tokenizes and packs examples as the original: [CLS] a [SEP] (b [SEP]), truncated (and says so), zero-padded."""
    if seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]); got {seq_length}.")
    features, cut = [], collections.Counter()
    for example in examples:
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
        tokens, segment_ids = packing.pack_tokens(tokenizer.tokenize(example.text_a), tokens_b or None, seq_length,
                                                  cut=cut)
        features.append(InputFeatures(example.unique_id, tokens, *packing.pad_inputs(
            tokenizer.convert_tokens_to_ids(tokens), segment_ids, seq_length)))
        if len(features) <= 5:
            logging.info("unique_id: %s tokens: %s", example.unique_id,
                         " ".join(tokenization.printable_text(t) for t in tokens))
    packing.log_cut(cut, "The input file", seq_length)
    return features


def parse_layers(layers, num_hidden_layers):
    """"-1,-2,-3,-4" -> [-1, -2, -3, -4], checked against the model depth."""
    try:
        indexes = [int(x) for x in layers.split(",")]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {layers!r}.") from None
    for index in indexes:
        if not -num_hidden_layers <= index < num_hidden_layers:
            raise ValueError(f"Layer index {index} is out of range for a model with {num_hidden_layers} layers "
                             f"(valid: {-num_hidden_layers}..{num_hidden_layers - 1}).")
    return indexes


def predict_layers(model, features, layer_indexes, batch_size=32, jit_compile=False, lengths=None):
    """Yields (feature, [activations [seq, H] for each layer index]) in input order, `seq` covering at least the
    feature's tokens; `lengths` (None: max_seq_length) runs length-sorted batches, the same to float rounding."""
    seq_length = len(features[0].input_ids) if features else 0
    inputs = {name: np.array([getattr(f, "input_type_ids" if name == "segment_ids" else name) for f in features],
                             np.int32).reshape(len(features), seq_length) for name in packing.INPUT_NAMES}

    def layers(batch):
        outputs = model(batch, training=False)
        return {f"layer_{k}": outputs["encoder_outputs"][i] for k, i in enumerate(layer_indexes)}

    outputs = prediction.predict_in_order(prediction.Predictor(layers, use_xla=jit_compile), inputs, batch_size,
                                          lengths, packing.INPUT_NAMES)
    rows = iter(features)
    for batch in tqdm(outputs, total=-(-len(features) // batch_size), desc="extract_features", unit="batch",
                      disable=len(features) <= batch_size):
        layer_outputs = [batch[f"layer_{k}"] for k in range(len(layer_indexes))]
        for row in range(len(layer_outputs[0])):
            yield next(rows), [o[row] for o in layer_outputs]


def feature_json(feature, layer_indexes, layer_values):
    """One output line's object, with the original's key order and 6-decimal rounding."""
    return collections.OrderedDict([
        ("linex_index", feature.unique_id),
        ("features", [collections.OrderedDict([
            ("token", token),
            ("layers", [collections.OrderedDict([("index", index), ("values", [round(float(x), 6) for x in v[i]])])
                        for index, v in zip(layer_indexes, layer_values)]),
        ]) for i, token in enumerate(feature.tokens)]),
    ])


def write_jsonl(output_file, objects):
    """Writes JSON lines to a temporary name and renames it to `output_file` when complete."""
    with fileio.atomic_write(output_file) as writer:
        for obj in objects:
            writer.write(json.dumps(obj) + "\n")


def extract_features(model, tokenizer, input_file, output_file, layers="-1,-2,-3,-4", max_seq_length=128,
                     batch_size=32, jit_compile=False, lengths=None):
    """The whole job: read, featurize, run the encoder, write the JSONL. Returns the number of examples.
    `lengths`: see `predict_layers`.

    Raises ValueError for an empty `input_file` (before anything is written)."""
    config = model.config
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    check_max_seq_length(config, max_seq_length)
    examples = read_examples(input_file)
    if not examples:
        # The original exits 0 having written nothing (its lazily opened output file is never created).
        raise ValueError(f"Input file {input_file} is empty: expected one example per line.")
    features = convert_examples_to_features(examples, max_seq_length, tokenizer)
    results = predict_layers(model, features, layer_indexes, batch_size, jit_compile, lengths)
    write_jsonl(output_file, (feature_json(f, layer_indexes, values) for f, values in results))
    return len(features)


def run(input_file, output_file, bert_config_file=None, vocab_file=None, init_checkpoint=None,
        layers="-1,-2,-3,-4", max_seq_length=128, do_lower_case=None, batch_size=32, use_xla=False,
        pad_to_max_seq_length=False, seq_length_multiple=None):
    """What extract_features.py does, with any checkpoint `checkpoints.load_pretrained` reads (none: random weights,
    with a warning). Returns the number of examples written."""
    lengths = lengths_lib.SequenceLengths.for_run(pad_to_max_seq_length, use_xla, seq_length_multiple)
    devices.log_devices(global_batch_size=batch_size, use_xla=use_xla)
    build = lambda config, restored: BertModel(config, restored=restored)  # noqa: E731
    loaded = checkpoints.load_pretrained(build, init_checkpoint, bert_config_file, vocab_file,
                                         do_lower_case, max_seq_length)
    count = extract_features(loaded.model, loaded.tokenizer, input_file, output_file, layers, max_seq_length,
                             batch_size, use_xla, lengths)
    logging.info("Wrote features of %d examples to %s", count, output_file)
    return count
