"""Tiny task models with every head a Hugging Face class has, for the Hugging Face export tests
(tests/checkpoints/test_huggingface_export.py without torch, test_huggingface_compare.py against transformers):
random weights written as original releases, real texts packed as batches, each head's outputs by name, and the
Hugging Face names read back by an independent rendering of transformers' module names (`original_names`)."""
import os
import re

import numpy as np
import numpy_bert

from bert_tf import checkpoints, resources
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig
from bert_tf.text import tokenization

# Each task with a Hugging Face class -> its label names where labelled (written to label_list.txt), else None.
TASKS = {"encoder": None, "pretraining": None, "masked_lm": None, "classifier": ["neg", "pos", "mixed"],
         "regression": None, "ner": ["O", "B-PER", "I-PER", "B-LOC"], "squad": None, "swag": None}
VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "uncased_vocab.txt")
POSITIONS = np.array([[1, 2, 4], [3, 1, 2]], np.int32)  # masked_lm_positions of the two-text pretraining batch


def tiny_config(hidden_act="gelu"):
    """L=2, H=32 on the real uncased vocabulary (30,522 rows): real texts tokenize to real ids."""
    return BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=64, type_vocab_size=2, hidden_act=hidden_act)


def write_release(task, directory, config, seed=0):
    """The task's model with random weights (every variable N(0, 0.2), LayerNorm gammas 1 + N(0, 0.2)) written as an
    original release (bert_model.ckpt, bert_config.json, vocab.txt) into `directory`, with the task's labels as
    label_list.txt (as a training run leaves them). Returns {original name: array}."""
    labels = TASKS[task]
    model = task_models.build_task_model(task, config, len(labels) if labels else None)
    rng = np.random.RandomState(seed)
    weights = {}
    for name, variable in checkpoints.original_variable_map(model).items():
        value = rng.normal(0, 0.2, variable.shape) + (1 if name.endswith("/gamma") else 0)
        variable.assign(value.astype(np.float32))
        weights[name] = variable.numpy()
    checkpoints.export_original(model, directory, VOCAB)
    if labels:
        with open(os.path.join(directory, "label_list.txt"), "w") as f:
            f.write("".join(label + "\n" for label in labels))
    return weights


def texts(count):
    """The first `count` sentences of gensim's movie-review polarity corpus."""
    return [text for _, text in resources.read_polarity()[:count]]


def batch(task, max_len=24):
    """Real texts packed as [CLS] text [SEP] (the first max_len - 2 wordpieces), padded: input_ids, input_mask,
    segment_ids [2, S] int32 ([2, 4, S] for swag: 4 choices each; masked_lm_positions for the pretraining
    tasks)."""
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    rows = texts(8 if task == "swag" else 2)
    ids = np.zeros((len(rows), max_len), np.int32)
    for i, text in enumerate(rows):
        pieces = ["[CLS]"] + tokenizer.tokenize(text)[:max_len - 2] + ["[SEP]"]
        ids[i, :len(pieces)] = tokenizer.convert_tokens_to_ids(pieces)
    out = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32), "segment_ids": np.zeros_like(ids)}
    if task == "swag":
        out = {name: value.reshape(2, 4, max_len) for name, value in out.items()}
    if task in ("pretraining", "masked_lm"):
        out["masked_lm_positions"] = POSITIONS
    return out


def bert_tf_outputs(task, release):
    """The outputs of the task's model restored from `release`, by name: sequence_output and pooled_output (the
    encoder's), masked_lm_logits, next_sentence_logits, logits, start_logits, end_logits (those the task has)."""
    spec = task_models.REGISTRY[task]
    labels = TASKS[task]
    model = spec.build(BertConfig.from_json_file(os.path.join(release, "bert_config.json")),
                       len(labels) if labels else None)
    checkpoints.restore(model, release, spec.head_names, strict=True)
    inputs = batch(task)
    out = model(inputs)
    encoder_inputs = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items() if k != "masked_lm_positions"}
    encoder = task_models.encoder_of(model)(encoder_inputs)
    names = ("masked_lm_logits", "next_sentence_logits", "logits", "start_logits", "end_logits")
    return {"sequence_output": np.asarray(encoder["sequence_output"]),
            "pooled_output": np.asarray(encoder["pooled_output"]),
            **{name: np.asarray(out[name]) for name in names if name in out}}


def original_names(hf_tensors):
    """A transformers BERT state dict (name -> array) -> the original variable names and layouts, written from
    transformers' module names (BertEmbeddings, BertLayer, BertPooler, BertPreTrainingHeads and the task classes'
    `classifier` / `qa_outputs` Linear), independently of bert_tf's table: {original name: array}, plus
    "head/weight" and "head/bias" for the task classes' one Linear. The position_ids buffer is dropped."""
    out = {}
    for name, value in hf_tensors.items():
        name = re.sub(r"^bert\.", "", name)
        if name.endswith("position_ids"):
            continue
        if name.split(".")[0] in ("classifier", "qa_outputs"):
            out["head/" + name.split(".")[1]] = value
            continue
        if name == "cls.predictions.bias":
            out["cls/predictions/output_bias"] = value
            continue
        if name.startswith("cls.seq_relationship."):
            out["cls/seq_relationship/output_" + ("weights" if name.endswith("weight") else "bias")] = value
            continue
        path = name.replace("encoder.layer.", "encoder.layer_")
        path = ("" if path.startswith("cls.") else "bert/") + path.replace(".", "/")
        if "LayerNorm" in path:
            path = path.replace("/weight", "/gamma").replace("/bias", "/beta")
        elif re.search(r"_embeddings/weight$", path):
            path = path[:-len("/weight")]
        elif path.endswith("/weight"):
            path, value = path[:-len("weight")] + "kernel", value.T
        out[path] = value
    return out


def numpy_outputs(task, weights, config):
    """The task's outputs (as `bert_tf_outputs` names them) computed by tests/numpy_bert.py from `weights`
    (`original_names` of a written model.safetensors) on the same batch."""
    inputs = batch(task)
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items() if k != "masked_lm_positions"}
    ref = numpy_bert.forward(weights, config, flat["input_ids"], flat["input_mask"], flat["segment_ids"])
    out = {"sequence_output": ref["sequence_output"], "pooled_output": ref["pooled_output"]}
    if "cls/predictions/output_bias" in weights:
        out["masked_lm_logits"] = numpy_bert.masked_lm_logits(weights, config, ref["sequence_output"],
                                                              inputs["masked_lm_positions"])
    if "cls/seq_relationship/output_weights" in weights:
        out["next_sentence_logits"] = (ref["pooled_output"] @ weights["cls/seq_relationship/output_weights"].T
                                       + weights["cls/seq_relationship/output_bias"])
    if "head/weight" in weights:
        source = ref["sequence_output"] if task in ("ner", "squad") else ref["pooled_output"]
        logits = source @ weights["head/weight"].T + weights["head/bias"]
        if task == "squad":
            out["start_logits"], out["end_logits"] = logits[..., 0], logits[..., 1]
        else:
            out["logits"] = logits.reshape(2, 4) if task == "swag" else logits
    return out
