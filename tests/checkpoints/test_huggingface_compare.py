"""Hugging Face out checked by transformers' own code (marker `compare`: needs the `compare` extra, torch and
transformers, imported in the tests; CI, which does not install them, deselects the marker with -m "not compare"):
`from_pretrained` of each class on the directory convert_checkpoint(to="huggingface") wrote, missing nothing, its
outputs within 1e-5 of bert-tf's on real texts (the real MiniLM for BertModel and BertForPreTraining, tiny random
configs with each head); BertTokenizer (Rust) and BertTokenizerLegacy (Python) from the same directory against
bert-tf's FullTokenizer on real corpora, uncased and cased."""
import bz2
import os

import hf_tasks
import numpy as np
import pytest

from bert_tf import checkpoints, resources
from bert_tf.checkpoints import huggingface
from bert_tf.text import tokenization

pytestmark = pytest.mark.compare

# task -> (transformers output, bert-tf output) pairs compared; masked LM logits are gathered at POSITIONS.
OUTPUTS = {
    "encoder": (("last_hidden_state", "sequence_output"), ("pooler_output", "pooled_output")),
    "pretraining": (("prediction_logits", "masked_lm_logits"), ("seq_relationship_logits", "next_sentence_logits")),
    "masked_lm": (("logits", "masked_lm_logits"),),
    "classifier": (("logits", "logits"),),
    "regression": (("logits", "logits"),),
    "ner": (("logits", "logits"),),
    "squad": (("start_logits", "start_logits"), ("end_logits", "end_logits")),
    "swag": (("logits", "logits"),),
}


def _transformers_outputs(task, hf_dir):
    """The outputs of transformers' class (the written config.json's architectures) loaded by from_pretrained from
    `hf_dir` on hf_tasks.batch(task), as NumPy, by bert-tf's output names. Asserts nothing was missing."""
    import torch
    import transformers
    cls = getattr(transformers, huggingface.ARCHITECTURES[task])
    model, info = cls.from_pretrained(hf_dir, output_loading_info=True)
    assert not info["missing_keys"], info
    model.eval()
    inputs = hf_tasks.batch(task)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long))
    result = {}
    for theirs, ours in OUTPUTS[task]:
        value = out[theirs].numpy()
        if ours == "masked_lm_logits":
            value = np.take_along_axis(value, inputs["masked_lm_positions"][..., None].astype(np.int64), axis=1)
        result[ours] = value
    return result


def _max_diffs(task, release, hf_dir):
    ours = hf_tasks.bert_tf_outputs(task, release)
    theirs = _transformers_outputs(task, hf_dir)
    return {name: float(np.max(np.abs(value - ours[name]))) for name, value in theirs.items()}


@pytest.fixture(scope="module")
def minilm_with_heads(minilm_release, tmp_path_factory):
    """The real MiniLM with seeded pretraining heads (convert_checkpoint.py --pretraining_heads) as a release, and
    both releases written as Hugging Face directories: {task: (release, Hugging Face directory)}."""
    root = tmp_path_factory.mktemp("minilm_compare")
    with_heads = checkpoints.convert_hf_to_original(resources.minilm_dir(), str(root / "heads"),
                                                    pretraining_heads_seed=18)
    return {task: (release, checkpoints.convert_checkpoint(release, str(root / f"{task}_hf"), to="huggingface"))
            for task, release in (("encoder", minilm_release), ("pretraining", with_heads))}


@pytest.mark.parametrize("task", ["encoder", "pretraining"])
def test_transformers_computes_the_real_minilm_as_bert_tf(minilm_with_heads, task):
    """BertModel (sequence and pooled outputs) and BertForPreTraining (masked LM and next-sentence logits) of the
    real MiniLM (exact GELU, written as transformers' "gelu") on real texts."""
    diffs = _max_diffs(task, *minilm_with_heads[task])
    print(f"MiniLM {task}: max abs diff {diffs}")
    assert max(diffs.values()) < 1e-5, diffs


@pytest.mark.parametrize("task", [task for task in hf_tasks.TASKS if task != "encoder"])
def test_transformers_computes_each_head_as_bert_tf(task, tmp_path):
    """Each class with its head (tiny random config, tanh GELU written as "gelu_new") on real texts."""
    release = str(tmp_path / "release")
    hf_tasks.write_release(task, release, hf_tasks.tiny_config(), seed=3)
    hf_dir = checkpoints.convert_checkpoint(release, str(tmp_path / "hf"), to="huggingface")
    diffs = _max_diffs(task, release, hf_dir)
    print(f"tiny {task}: max abs diff {diffs}")
    assert max(diffs.values()) < 1e-5, diffs


def _corpus():
    """Real lines: gensim's news stories (lee_background.cor), movie-review sentences (pang_lee_polarity.cor) and
    the first 4,000 non-empty lines of its Wikipedia dump sample (wikitext: markup, many scripts and accents)."""
    with open(resources.gensim_test_file("lee_background.cor"), encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    lines += [text for _, text in resources.read_polarity()]
    with bz2.open(resources.gensim_test_file(resources.WIKI_DUMP), "rt", encoding="utf-8") as f:
        wiki = (line.strip() for line in f)
        lines += [line for line, _ in zip((line for line in wiki if line), range(4000))]
    return lines


def _final_sigma(tokens):
    return [token.replace("ς", "σ") for token in tokens]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_hugging_face_tokenizers_give_bert_tf_ids(minilm_release, tmp_path, do_lower_case):
    """BertTokenizer (the Rust `tokenizers` one; BertTokenizerFast is the same class in transformers 5) and
    BertTokenizerLegacy (the Python one) from the written directory give FullTokenizer's ids on every line but
    those where lower-casing differs: Python's str.lower() (the original's) writes a word-final capital sigma as
    "ς", the Rust normalizer as "σ" (docs/checkpoints.md, "Hugging Face out")."""
    from transformers import BertTokenizer, BertTokenizerLegacy
    hf_dir = checkpoints.convert_checkpoint(minilm_release, str(tmp_path / "hf"), to="huggingface",
                                            do_lower_case=do_lower_case)
    lines = _corpus()
    full = tokenization.FullTokenizer(os.path.join(hf_dir, "vocab.txt"), do_lower_case=do_lower_case)
    ours = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
    for cls in (BertTokenizer, BertTokenizerLegacy):
        tokenizer = cls.from_pretrained(hf_dir)
        theirs = tokenizer(lines, add_special_tokens=False)["input_ids"]
        differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        print(f"{cls.__name__} do_lower_case={do_lower_case}: {len(differing)} of {len(lines)} lines differ: "
              f"{[lines[i][:60] for i in differing]}")
        for i in differing:
            assert cls is BertTokenizer and do_lower_case, (cls.__name__, lines[i])
            assert _final_sigma(full.convert_ids_to_tokens(ours[i])) == tokenizer.convert_ids_to_tokens(
                theirs[i]), lines[i]
