"""Feature extraction (the original extract_features.py): per-token activations of chosen encoder layers.

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: JSON lines in the original's form,
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}, ...]}, ...]}`
every value rounded to 6 decimals. With `doc_stride` > 0 a longer text runs in windows (`packing.pack_windows`),
each token's values from the window where it has the most context.
"""
import collections
import itertools
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
    return [feature for _, _, features in convert_examples_to_texts(examples, seq_length, tokenizer)
            for feature in features]


def convert_examples_to_texts(examples, seq_length, tokenizer, doc_stride=0):
    """(its whole text's tokens, their sources (`packing.pack_windows`': where each one's values
    come from), its InputFeatures (with `doc_stride` > 0 one per window)) of each example."""
    if seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]); got {seq_length}.")
    packing.check_doc_stride(doc_stride)
    texts, cut, logged = [], collections.Counter(), 0
    for example in examples:
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
        try:
            packed, sources = packing.pack_windows(tokenizer.tokenize(example.text_a), tokens_b, seq_length,
                                                   doc_stride, cut)
        except ValueError as error:
            raise ValueError(f"Input line {example.unique_id + 1}: {error}") from None
        features = [InputFeatures(example.unique_id, tokens, *packing.pad_inputs(
            tokenizer.convert_tokens_to_ids(tokens), segment_ids, seq_length))
            for tokens, segment_ids in packed]
        whole = features[0].tokens if sources is None else [packed[w][0][p] for w, p in sources]
        texts.append((whole, sources, features))
        for feature in features[:5 - logged]:
            logging.info("unique_id: %s tokens: %s", example.unique_id,
                         " ".join(tokenization.printable_text(t) for t in feature.tokens))
        logged = min(5, logged + len(features))
    packing.log_cut(cut, "The input file", seq_length, packing.DOC_STRIDE_KEEPS)
    return texts


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
    """Yields (feature, [activations [seq, H] of each layer index]) in input order, `seq` at least the feature's
    tokens; `lengths` (None: max_seq_length) runs length-sorted batches."""
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


def stitch(texts, results):
    """(unique_id, tokens, [values [T, H] of each layer]) for each of `texts` from `predict_layers`'
    `results`: each token's values from the window its sources name."""
    results = iter(results)
    for tokens, sources, features in texts:
        windows = [values for _, values in itertools.islice(results, len(features))]
        if sources is None:
            yield features[0].unique_id, tokens, windows[0]
        else:
            yield features[0].unique_id, tokens, [np.stack([windows[w][k][p] for w, p in sources])
                                                  for k in range(len(windows[0]))]


def feature_json(unique_id, tokens, layer_indexes, layer_values):
    """One output line's object, in the original's form."""
    return collections.OrderedDict([
        ("linex_index", unique_id),
        ("features", [collections.OrderedDict([
            ("token", token),
            ("layers", [collections.OrderedDict([("index", index), ("values", [round(float(x), 6) for x in v[i]])])
                        for index, v in zip(layer_indexes, layer_values)]),
        ]) for i, token in enumerate(tokens)]),
    ])


def extract_features(model, tokenizer, input_file, output_file, layers="-1,-2,-3,-4", max_seq_length=128,
                     batch_size=32, jit_compile=False, lengths=None, doc_stride=0):
    """Reads, featurizes, runs the encoder and writes the JSONL; returns the number of examples. ValueError for an
    empty `input_file`."""
    config = model.config
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    check_max_seq_length(config, max_seq_length)
    examples = read_examples(input_file)
    if not examples:
        # The original exits 0 having written nothing.
        raise ValueError(f"Input file {input_file} is empty: expected one example per line.")
    texts = convert_examples_to_texts(examples, max_seq_length, tokenizer, doc_stride)
    results = predict_layers(model, [f for _, _, features in texts for f in features],
                             layer_indexes, batch_size, jit_compile, lengths)
    with fileio.atomic_write(output_file) as writer:
        for unique_id, tokens, values in stitch(texts, results):
            writer.write(json.dumps(feature_json(unique_id, tokens, layer_indexes, values)) + "\n")
    return len(texts)


def run(input_file, output_file, bert_config_file=None, vocab_file=None, init_checkpoint=None,
        layers="-1,-2,-3,-4", max_seq_length=128, do_lower_case=None, batch_size=32, use_xla=False,
        pad_to_max_seq_length=False, seq_length_multiple=None, doc_stride=0):
    """What extract_features.py does; returns the number of examples written."""
    lengths = lengths_lib.SequenceLengths.for_run(pad_to_max_seq_length, use_xla, seq_length_multiple)
    devices.log_devices(global_batch_size=batch_size, use_xla=use_xla)
    loaded = checkpoints.load_pretrained(init_checkpoint, bert_config_file, vocab_file,
                                         do_lower_case, max_seq_length)
    model = loaded.build_model(lambda config, restored: BertModel(config, restored=restored))
    count = extract_features(model, loaded.tokenizer, input_file, output_file, layers,
                             max_seq_length, batch_size, use_xla, lengths, doc_stride)
    logging.info("Wrote features of %d examples to %s", count, output_file)
    return count
