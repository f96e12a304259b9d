"""Fill-mask prediction with the masked-LM head: for every [MASK], the top-k wordpieces and their probabilities.

Input: one example per line, `text_a` or `text_a ||| text_b`, each literal `[MASK]` one wordpiece; a line without
a mask, or whose mask truncation cuts off, is an error naming the line.

Output, one JSON object per input line:
  {"linex_index": i, "tokens": [...], "masks": [{"position": p, "predictions": [{"token": t, "id": id,
   "probability": q}, ...]}]}
with each mask's `top_k` predictions, most probable first.
"""
import collections
import json

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, fileio
from bert_tf.data import lengths as lengths_lib
from bert_tf.inference import extract_features
from bert_tf.model import task_models
from bert_tf.text import packing
from bert_tf.training import devices, prediction

MASK = "[MASK]"

# positions: the [MASK] positions of input_ids, in order; the arrays are [max_seq_length] int lists.
MaskedExample = collections.namedtuple(
    "MaskedExample", ["index", "tokens", "input_ids", "input_mask", "segment_ids", "positions"])


def tokenize_with_masks(text, tokenizer):
    """WordPiece tokens of `text`, each literal `[MASK]` kept as the mask token."""
    tokens = []
    for i, piece in enumerate(text.split(MASK)):
        if i:
            tokens.append(MASK)
        tokens.extend(tokenizer.tokenize(piece))
    return tokens


def convert_examples(examples, tokenizer, max_seq_length, source="the input"):
    """extract_features.InputExamples -> [MaskedExample]; ValueError naming a line without [MASK] or with one beyond
    max_seq_length."""
    if MASK not in tokenizer.vocab:
        raise ValueError(f"The vocabulary has no {MASK} token: it does not belong to a model with a masked-LM head.")
    converted, cut = [], collections.Counter()
    for example in examples:
        where = f"{source}:{example.unique_id + 1}"
        tokens_a = tokenize_with_masks(example.text_a, tokenizer)
        tokens_b = tokenize_with_masks(example.text_b, tokenizer) if example.text_b else None
        num_masks = tokens_a.count(MASK) + (tokens_b or []).count(MASK)
        if not num_masks:
            raise ValueError(f"{where}: no {MASK} in the line; write {MASK} where a wordpiece is to be predicted.")
        tokens, segment_ids = packing.pack_tokens(tokens_a, tokens_b or None, max_seq_length, cut=cut)
        positions = [i for i, token in enumerate(tokens) if token == MASK]
        if len(positions) < num_masks:
            raise ValueError(f"{where}: {num_masks - len(positions)} of its {num_masks} {MASK} tokens fall beyond "
                             f"max_seq_length={max_seq_length}.")
        input_ids, input_mask, segment_ids = packing.pad_inputs(tokenizer.convert_tokens_to_ids(tokens),
                                                                segment_ids, max_seq_length)
        converted.append(MaskedExample(example.unique_id, tokens, input_ids, input_mask, segment_ids, positions))
    packing.log_cut(cut, source, max_seq_length)
    return converted


def predict(model, examples, top_k=5, batch_size=8, jit_compile=False, lengths=None):
    """Yields (example, probabilities [num_masks, top_k], ids [num_masks, top_k]) for each MaskedExample, in order.
    `model`: a built BertPretrainer; `lengths` (None: max_seq_length) runs length-sorted batches."""
    seq_length = len(examples[0].input_ids) if examples else 0
    most = max((len(e.positions) for e in examples), default=1)
    inputs = {name: np.array([getattr(e, name) for e in examples], np.int32).reshape(len(examples), seq_length)
              for name in packing.INPUT_NAMES}
    inputs["masked_lm_positions"] = np.array([e.positions + [0] * (most - len(e.positions)) for e in examples],
                                             np.int32).reshape(len(examples), most)
    inputs["masked_lm_weights"] = (np.arange(most) < np.array([len(e.positions) for e in examples])[:, None]).astype(
        np.int32).reshape(len(examples), most)

    def top(batch):
        positions = batch["masked_lm_positions"]
        if not jit_compile:  # cut to the batch's most masks (XLA needs a static width)
            positions = positions[:, :lengths_lib.cut_length(batch["masked_lm_weights"])]
        inputs = {**{name: batch[name] for name in packing.INPUT_NAMES}, "masked_lm_positions": positions}
        logits = model(inputs, training=False)["masked_lm_logits"]
        values, indices = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), k=top_k)
        return {"values": values, "indices": indices}

    rows = iter(examples)
    for outputs in prediction.predict_in_order(prediction.Predictor(top, use_xla=jit_compile), inputs, batch_size,
                                               lengths, packing.INPUT_NAMES):
        for row in range(len(outputs["values"])):
            example = next(rows)
            count = len(example.positions)
            yield example, outputs["values"][row, :count], outputs["indices"][row, :count]


def prediction_json(example, probabilities, ids, inv_vocab):
    """One output line (see the module docstring)."""
    masks = [{"position": position,
              "predictions": [{"token": inv_vocab[int(i)], "id": int(i), "probability": round(float(p), 6)}
                              for p, i in zip(probabilities[k], ids[k])]}
             for k, position in enumerate(example.positions)]
    return {"linex_index": example.index, "tokens": example.tokens, "masks": masks}


def run(input_file, output_file, bert_config_file=None, vocab_file=None, init_checkpoint=None, do_lower_case=None,
        max_seq_length=128, top_k=5, batch_size=8, use_xla=False, pad_to_max_seq_length=False,
        seq_length_multiple=None):
    """What predict_masked_lm.py does; returns the number of examples written."""
    if not init_checkpoint:
        raise ValueError("predict_masked_lm needs --init_checkpoint: a model with its masked-LM head.")
    lengths = lengths_lib.SequenceLengths.for_run(pad_to_max_seq_length, use_xla, seq_length_multiple)
    devices.log_devices(global_batch_size=batch_size, use_xla=use_xla)
    loaded = checkpoints.load_pretrained(init_checkpoint=init_checkpoint, bert_config_file=bert_config_file,
                                         vocab_file=vocab_file, do_lower_case=do_lower_case,
                                         max_seq_length=max_seq_length)
    if not 1 <= top_k <= loaded.config.vocab_size:
        raise ValueError(f"top_k must be in 1..vocab_size ({loaded.config.vocab_size}), got {top_k}.")
    examples = convert_examples(extract_features.read_examples(input_file), loaded.tokenizer, max_seq_length,
                                input_file)
    if not examples:
        raise ValueError(f"Input file {input_file} is empty: expected one example per line.")
    model = loaded.build_model(lambda config, restored: task_models.build_task_model(
        "pretraining", config, restored=restored), ("masked_lm",))
    with fileio.atomic_write(output_file) as f:
        predictions = predict(model, examples, top_k, batch_size, use_xla, lengths)
        for example, probabilities, ids in predictions:
            f.write(json.dumps(prediction_json(example, probabilities, ids, loaded.tokenizer.inv_vocab)) + "\n")
    logging.info("Wrote the top %d predictions of %d masks in %d examples to %s", top_k,
                 sum(len(e.positions) for e in examples), len(examples), output_file)
    return len(examples)
