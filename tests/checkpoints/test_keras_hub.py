"""KerasHub BERT presets in and out, checked by KerasHub's own code (keras-hub, the `ecosystem` extra).

In: a preset that KerasHub itself made from the real MiniLM's Hugging Face directory (its own transformers
converter, no network), read by bert-tf's one loader. Out: a tiny random release with a classifier head written by
`convert_checkpoint(..., to="keras_hub")` and loaded by KerasHub's `from_preset`; a small preset KerasHub made (the
real uncased vocabulary, a one-layer backbone) out and back through the scripts. Outputs are compared on real text.
"""
import os
import random
import shutil
import unicodedata

import keras
import numpy as np
import numpy_bert
import pytest
import script_steps
import tensorflow as tf
import tiny_classifier

from bert_tf import checkpoints, resources
from bert_tf.checkpoints import keras_hub as kh_checkpoints
from bert_tf.model import encoder, task_models
from bert_tf.model.config import BertConfig
from bert_tf.tasks import classifier, runner
from bert_tf.text import tokenization

keras_hub = pytest.importorskip("keras_hub")

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=24, type_vocab_size=2)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # KerasHub's BertTokenizer requires them


def _texts(count=16):
    """Real sentences: the first `count` of gensim's pang_lee_polarity."""
    return [text for _, text in resources.read_polarity()[:count]]


def _encode(tokenizer, texts, max_seq_length=128):
    """bert-tf's packing of single sentences, cut to the longest: input_ids, input_mask, segment_ids [B, S]."""
    rows = [tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(t)[:max_seq_length - 2], "[SEP]"])
            for t in texts]
    length = max(map(len, rows))
    ids = np.array([r + [0] * (length - len(r)) for r in rows], np.int32)
    mask = (np.arange(length)[None] < np.array([len(r) for r in rows])[:, None]).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def _keras_hub_inputs(batch):
    return {"token_ids": batch["input_ids"], "padding_mask": batch["input_mask"], "segment_ids": batch["segment_ids"]}


def _assert_close_on_real_tokens(got, want, mask, atol):
    np.testing.assert_allclose(np.asarray(got)[mask == 1], np.asarray(want)[mask == 1], atol=atol)


@pytest.fixture(scope="module")
def minilm_preset(tmp_path_factory):
    """(path, model): the real MiniLM as a BertTextClassifier preset (2 classes, KerasHub's own random head) that
    KerasHub made from its Hugging Face directory with its own converter (config.json, model.weights.h5, task.json,
    task.weights.h5, tokenizer.json (lowercase, strip_accents=false), assets/tokenizer/vocabulary.txt), and the
    KerasHub model it saved."""
    path = str(tmp_path_factory.mktemp("kh") / "minilm_classifier")
    model = keras_hub.models.BertTextClassifier.from_preset(resources.minilm_dir(), num_classes=2)
    model.save_to_preset(path)
    return path, model


@pytest.fixture(scope="module")
def small_preset(tmp_path_factory, uncased_vocab_file):
    """A BertTextClassifier preset (2 classes) KerasHub made from its own classes: a one-layer H=16 backbone of
    seeded random weights, the real uncased vocabulary, the tokenizer settings of `minilm_preset` (lowercase,
    strip_accents=false). What the scripts do with a preset does not depend on the backbone's size."""
    path = str(tmp_path_factory.mktemp("kh") / "small_classifier")
    keras.utils.set_random_seed(3)
    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=uncased_vocab_file, lowercase=True, strip_accents=False)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
                                             intermediate_dim=24, max_sequence_length=128)
    keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=(
        keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=128))).save_to_preset(path)
    return path


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    """An original release of the TINY config: encoder, pretraining heads and a 3-label classifier head, a vocab
    with BERT's special tokens."""
    directory = str(tmp_path_factory.mktemp("tiny_release"))
    config = BertConfig(**TINY)
    weights = numpy_bert.random_weights(config, seed=11, heads=True)
    weights = {k: v for k, v in weights.items() if not k.startswith("cls/squad")}
    numpy_bert.write_tf1_checkpoint(weights, os.path.join(directory, "bert_model.ckpt"))
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    vocab = SPECIAL + [f"[unused{i}]" for i in range(config.vocab_size - len(SPECIAL))]
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    return {"dir": directory, "weights": weights, "config": config}


def _tiny_batch(seed=5):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, TINY["vocab_size"], size=(3, 9)).astype(np.int32)
    mask = np.ones((3, 9), np.int32)
    mask[1, 6:], mask[2, 3:] = 0, 0
    segments = np.zeros((3, 9), np.int32)
    segments[0, 5:] = 1
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments}


def test_minilm_preset_in_equals_keras_hub(minilm_preset):
    """KerasHub in: config, vocabulary and casing from the preset alone; the backbone and the classifier head
    restored by the original names give the sequence, pooled outputs and logits on real text (1e-5) of the KerasHub
    model that saved the preset."""
    minilm_preset, theirs = minilm_preset
    files = checkpoints.model_files(minilm_preset)
    assert files.config.to_dict() == dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                          num_attention_heads=12, intermediate_size=1536, hidden_act="gelu",
                                          hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                          max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02)
    assert files.vocab_file == os.path.join(minilm_preset, "assets", "tokenizer", "vocabulary.txt")
    assert files.do_lower_case is True
    loaded = checkpoints.load_pretrained(init_checkpoint=minilm_preset)
    model = task_models.BertClassifier(loaded.config, 2)
    report = loaded.restore(model, required_heads=("classifier",))
    assert report.missing == [] and report.unused == []
    batch = _encode(loaded.tokenizer, _texts())
    ours = model(batch)
    np.testing.assert_allclose(ours["logits"], theirs(_keras_hub_inputs(batch)), atol=1e-5)
    backbone = theirs.backbone(_keras_hub_inputs(batch))
    ours = model.bert(batch)
    _assert_close_on_real_tokens(ours["sequence_output"], backbone["sequence_output"], batch["input_mask"], 1e-5)
    np.testing.assert_allclose(ours["pooled_output"], backbone["pooled_output"], atol=1e-5)
    assert checkpoints.restore(model.bert, minilm_preset).unused == [
        "output_bias", "output_weights"]  # an encoder has no place for the head, reported by its original names


def test_tiny_out_loads_in_keras_hub_and_round_trips(tiny_release, tmp_path):
    """KerasHub out: BertTextClassifier.from_preset and BertBackbone.from_preset load the written preset and give
    bert-tf's logits, sequence and pooled outputs (1e-5); original -> KerasHub -> original is bit for bit."""
    out = checkpoints.convert_checkpoint(tiny_release["dir"], str(tmp_path / "preset"), to="keras_hub")
    assert sorted(os.listdir(out)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                       "preprocessor.json", "task.json", "task.weights.h5", "tokenizer.json"]
    config = tiny_release["config"]
    ours = task_models.BertClassifier(config, 3)
    checkpoints.restore(ours, tiny_release["dir"], ("classifier",))
    batch = _tiny_batch()
    expected = ours(batch)
    theirs = keras_hub.models.BertTextClassifier.from_preset(out)
    assert theirs.preprocessor.tokenizer.vocabulary_size() == config.vocab_size
    assert theirs.preprocessor.tokenizer.lowercase and theirs.preprocessor.tokenizer.strip_accents
    np.testing.assert_allclose(theirs(_keras_hub_inputs(batch)), expected["logits"], atol=1e-5)
    backbone = keras_hub.models.BertBackbone.from_preset(out)(_keras_hub_inputs(batch))
    reference = ours.bert(batch)
    _assert_close_on_real_tokens(backbone["sequence_output"], reference["sequence_output"], batch["input_mask"], 1e-5)
    np.testing.assert_allclose(backbone["pooled_output"], reference["pooled_output"], atol=1e-5)

    back = checkpoints.convert_checkpoint(out, str(tmp_path / "back"))
    reader = checkpoints.original.checkpoint_reader(os.path.join(back, "bert_model.ckpt"))
    names = sorted(reader.get_variable_to_shape_map())
    assert names == sorted(n for n in tiny_release["weights"] if n.startswith("bert/"))
    for name in names:
        np.testing.assert_array_equal(reader.get_tensor(name), tiny_release["weights"][name], err_msg=name)
    assert checkpoints.model_files(out).config.to_dict() == config.to_dict()


def test_preset_on_a_url(tiny_release):
    """A preset written to and read from a URL (TensorFlow's ram:// file system, as gs://): committed through
    fileio, read back by the original names bit for bit."""
    url = "ram://keras_hub_test/preset"
    checkpoints.convert_checkpoint(tiny_release["dir"], url, to="keras_hub")
    model = task_models.BertClassifier(BertConfig(**TINY), 3)
    report = checkpoints.restore(model, url, ("classifier",))
    assert report.missing == [] and report.unused == []
    for name, variable in checkpoints.original_variable_map(model).items():
        np.testing.assert_array_equal(variable.numpy(), tiny_release["weights"][name], err_msg=name)


def test_activations_and_bad_input(tiny_release, tmp_path, caplog):
    """gelu_exact is written with the measured difference in a warning; relu is refused; another architecture, a
    vocabulary of another size, no vocabulary and missing weights are one error naming the file, before anything
    is written;
    a directory that is not a preset is never replaced; a preset is replaced as a whole."""
    release = str(tmp_path / "release")
    shutil.copytree(tiny_release["dir"], release)
    config_file = os.path.join(release, "bert_config.json")
    for act in ("gelu_exact", "relu"):
        BertConfig.from_dict({**TINY, "hidden_act": act}).to_json_file(config_file)
        if act == "relu":
            with pytest.raises(ValueError, match=r"hidden_act='relu': KerasHub's BertBackbone computes the tanh GELU"):
                checkpoints.convert_checkpoint(release, str(tmp_path / act), to="keras_hub")
            assert not os.path.exists(tmp_path / act)
            continue
        with caplog.at_level("WARNING"):
            checkpoints.convert_checkpoint(release, str(tmp_path / act), to="keras_hub")
        assert kh_checkpoints.GELU_EXACT_DIFFERENCE in caplog.text
    BertConfig(**TINY).to_json_file(config_file)

    preset = checkpoints.convert_checkpoint(release, str(tmp_path / "preset"), to="keras_hub")
    no_vocab = tmp_path / "no_vocab"
    shutil.copytree(release, no_vocab)
    os.remove(no_vocab / "vocab.txt")
    with pytest.raises(ValueError, match=r"A KerasHub preset needs the model's vocab\.txt .* beside .*no_vocab"):
        checkpoints.convert_checkpoint(str(no_vocab), str(tmp_path / "never"), to="keras_hub")
    assert not os.path.exists(tmp_path / "never")
    short_vocab = tmp_path / "short_vocab.txt"
    short_vocab.write_text("".join(t + "\n" for t in SPECIAL))
    with pytest.raises(ValueError, match=r"short_vocab\.txt has 5 tokens but .* has 99 word embeddings"):
        checkpoints.convert_checkpoint(preset, str(tmp_path / "never"), to="keras_hub", vocab_file=str(short_vocab))
    assert not os.path.exists(tmp_path / "never")

    with pytest.raises(ValueError, match=r"do_lower_case=False contradicts .*preset, whose tokenizer\.json "
                                         r"\(lowercase\) says True"):
        checkpoints.model_files(preset, do_lower_case=False)

    shutil.copytree(preset, tmp_path / "bad_vocab")
    vocabulary = tmp_path / "bad_vocab" / "assets" / "tokenizer" / "vocabulary.txt"
    vocabulary.write_text(vocabulary.read_text() + "extra\n")
    with pytest.raises(ValueError, match=r"bad_vocab/assets/tokenizer/vocabulary\.txt has 100 tokens but .*"
                                         r"config\.json says vocabulary_size=99"):
        checkpoints.model_files(str(tmp_path / "bad_vocab"))

    shutil.copytree(preset, tmp_path / "no_weights")
    os.remove(tmp_path / "no_weights" / "task.weights.h5")
    with pytest.raises(FileNotFoundError, match=r"no_weights/task\.weights\.h5 not found"):
        checkpoints.restore(task_models.BertClassifier(BertConfig(**TINY), 3), str(tmp_path / "no_weights"))
    os.remove(tmp_path / "no_weights" / "model.weights.h5")
    with pytest.raises(FileNotFoundError, match=r"no_weights/model\.weights\.h5 not found"):
        checkpoints.convert_checkpoint(str(tmp_path / "no_weights"), str(tmp_path / "never"))
    assert not os.path.exists(tmp_path / "never")

    gpt2 = str(tmp_path / "gpt2")
    keras_hub.models.GPT2Backbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=8,
                                  max_sequence_length=8).save_to_preset(gpt2)
    with pytest.raises(ValueError, match=r"gpt2/config\.json registers 'keras_hub>GPT2Backbone': a KerasHub preset "
                                         r"of another architecture than BERT"):
        checkpoints.convert_checkpoint(gpt2, str(tmp_path / "never"), to="keras_hub")
    assert not os.path.exists(tmp_path / "never")

    with pytest.raises(ValueError, match=r"holds files .* and is not a KerasHub preset"):
        checkpoints.convert_checkpoint(release, release, to="keras_hub")
    assert checkpoints.model_files(release).config.to_dict() == BertConfig(**TINY).to_dict()

    encoder_only = str(tmp_path / "encoder_only")
    checkpoints.convert_checkpoint(release, encoder_only, to="original",  # the pretraining heads, no classifier
                                   vocab_file=os.path.join(release, "vocab.txt"))
    checkpoints.convert_checkpoint(encoder_only, preset, to="keras_hub")  # over the classifier preset
    assert sorted(os.listdir(preset)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                          "tokenizer.json"]
    assert checkpoints.restore(encoder.BertModel(BertConfig(**TINY)), preset).missing == []


def test_a_training_run_that_cannot_write_its_preset_stops_before_training(tmp_path):
    """--save_keras_hub_preset is checked when the run starts (runner.prepare), not after training: a model KerasHub
    cannot compute (relu) or a vocabulary of another size than its embedding rows is refused with nothing trained."""
    data = tmp_path / "data"
    for split in ("train", "dev"):
        tiny_classifier.write_lines(str(data / f"{split}.tsv"), ["id\tlabel\ttext_a", "0\tpos\tgood"])
    for name, overrides, error in (("relu", {"hidden_act": "relu"}, r"hidden_act='relu': KerasHub's BertBackbone"),
                                   ("padded", {"vocab_size": len(tiny_classifier.VOCAB) + 3},
                                    r"vocab\.txt has \d+ tokens but the model has vocab_size=\d+ word embeddings: "
                                    r"the tokenizer of a KerasHub preset")):
        vocab_file, config_file = tiny_classifier.write_tiny_model(str(tmp_path / name), **overrides)
        run = runner.RunConfig(bert_config_file=config_file, vocab_file=vocab_file, do_train=True,
                               output_dir=str(tmp_path / name / "out"), max_seq_length=16, save_keras_hub_preset=True)
        with pytest.raises(ValueError, match=error):
            runner.prepare(run, classifier.ClassifierTask("tsv", str(data)))
        assert not os.path.exists(tmp_path / name / "out" / "checkpoint")

def _strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def _keras_hub_causes(line, lower):
    """The characters of `line` on which KerasHub's WordPiece pre-tokenizer differs from the original's: a
    non-ASCII whitespace (KerasHub splits on ASCII whitespace only, the original on every Unicode space separator)
    and, lower-cased, one that KerasHub's NFKC case folding after stripping accents maps otherwise than the
    original's lower() and NFD (final sigma, full-width punctuation, the ellipsis, superscripts, ß, Hangul
    syllables, which NFKC recomposes) or a capital sigma (Python's lower() makes it a final sigma at a word's end,
    case folding never)."""
    causes = {ch for ch in line if ch not in " \t\n\r" and (ch.isspace() or unicodedata.category(ch) == "Zs")}
    if lower:
        causes |= {ch for ch in line if _strip_accents(ch.lower()) != unicodedata.normalize(
            "NFKC", _strip_accents(ch).casefold())}
        causes |= {"Σ"} & set(line)
    return causes


@pytest.fixture(scope="module")
def wiki_lines():
    """gensim's Wikipedia sample (28,661 lines of raw wikitext): every line with a non-ASCII character (where any
    difference can be) and every 25th of the others."""
    from bert_tf.data import corpus
    path = resources.gensim_test_file(resources.WIKI_DUMP)
    lines = [line for page in corpus.iter_wiki_pages(path) for line in page.text.split("\n") if line.strip()]
    return [line for line in lines if not line.isascii()] + [line for line in lines if line.isascii()][::25]


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_tokenizer_ids_on_real_wikipedia(lower, wiki_lines, uncased_vocab_file):
    """KerasHub's BertTokenizer as a written preset holds it (lowercase = strip_accents = do_lower_case) against
    bert-tf's FullTokenizer on `wiki_lines`: each differing line (printed, with its causes) holds a character of
    the known causes (`_keras_hub_causes`); measured on the whole sample: 102 lines differ uncased, 3 cased
    (docs/checkpoints.md, "KerasHub presets")."""
    theirs = keras_hub.models.BertTokenizer(vocabulary=uncased_vocab_file, lowercase=lower, strip_accents=lower)
    ours = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=lower)
    got = [[int(i) for i in ids] for ids in theirs(wiki_lines)]  # a list of id arrays
    differing = [line for line, ids in zip(wiki_lines, got) if ours.convert_tokens_to_ids(ours.tokenize(line)) != ids]
    print(f"{len(differing)} of {len(wiki_lines)} lines differ ({'uncased' if lower else 'cased'}):",
          *[f"  {sorted(_keras_hub_causes(line, lower))} {line[:100]!r}" for line in differing], sep="\n")
    assert 0 < len(differing) < len(wiki_lines) // 20
    assert [line for line in differing if not _keras_hub_causes(line, lower)] == []


def _at_128(classifier):
    """A KerasHub BertTextClassifier whose preprocessor packs to 128 tokens, as the bert-tf runs compared with it
    (its default, 512, pads more: the real tokens' outputs are the same)."""
    classifier.preprocessor.sequence_length = 128
    return classifier


def test_scripts(small_preset, tmp_path):
    """convert_checkpoint.py writes a preset KerasHub made as a KerasHub preset again (its classifier kept, its
    tokenizer with the original's casing), which KerasHub's BertTextClassifier runs on raw text to bert-tf's logits
    (1e-5), and as an original release; run_classifier.py with --do_predict takes the preset alone (config,
    vocabulary, casing, classifier head) and gives KerasHub's own probabilities (1e-5), and with --do_train
    --save_keras_hub_preset (a tiny model) writes a preset KerasHub runs to the trained logits. Both scripts run in
    one subprocess (tests/script_steps.py)."""
    out, release = tmp_path / "again", tmp_path / "release"
    data, predictions, trained = tmp_path / "data", tmp_path / "predictions", tmp_path / "trained"
    resources.write_classification_tsv(resources.read_polarity(), str(data), 80, 20)
    (data / "test.tsv").write_text("".join((data / "dev.tsv").read_text().splitlines(keepends=True)[:9]))
    predictions.mkdir()
    (predictions / "label_list.txt").write_text("neg\npos\n")
    rng = random.Random(3)
    tiny_data = tmp_path / "tiny_data"
    for split in ("train", "dev"):
        tiny_classifier.write_lines(str(tiny_data / f"{split}.tsv"), ["id\tlabel\ttext_a"] + [
            f"{i}\t{rng.choice(['neg', 'pos'])}\t{tiny_classifier.random_sentence(rng)}" for i in range(16)])
    vocab_file, config_file = tiny_classifier.write_tiny_model(str(tmp_path / "tiny_model"))
    steps = [(os.path.join(REPO, "run_scripts", "convert_checkpoint.py"), [
                 [f"--init_checkpoint={small_preset}", "--to=keras_hub", f"--output_dir={out}"],
                 [f"--init_checkpoint={small_preset}", f"--output_dir={release}"]]),
             (os.path.join(REPO, "run_scripts", "run_classifier.py"), [
                 ["--task_name=tsv", f"--data_dir={data}", "--do_predict", f"--init_checkpoint={small_preset}",
                  "--max_seq_length=128", f"--output_dir={predictions}"],
                 ["--task_name=tsv", f"--data_dir={tiny_data}", "--do_train", f"--vocab_file={vocab_file}",
                  f"--bert_config_file={config_file}", "--max_seq_length=16", "--train_batch_size=8",
                  "--num_train_epochs=1", "--seed=1", f"--output_dir={trained}", "--save_keras_hub_preset"]])]
    done, logs = script_steps.run(steps, REPO)
    assert [step["errors"] for step in done] == [[None, None], [None, None]], logs[-3000:]

    texts = _texts(8)
    theirs = _at_128(keras_hub.models.BertTextClassifier.from_preset(str(out)))
    loaded = checkpoints.load_pretrained(init_checkpoint=small_preset)
    model = loaded.build_model(lambda config, restored: task_models.BertClassifier(config, 2),
                               ("classifier",))
    batch = _encode(loaded.tokenizer, texts)
    np.testing.assert_allclose(theirs.predict(texts, verbose=0), model(batch)["logits"], atol=1e-5)
    assert sorted(os.listdir(release)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                           "bert_model.ckpt.index", "checkpoint", "vocab.txt"]

    theirs = keras_hub.models.BertTextClassifier.from_preset(str(trained / "keras_hub"))
    ours = task_models.BertClassifier(BertConfig.from_json_file(config_file), 2)
    checkpoints.restore(ours, str(trained), ("classifier",))
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    tiny_texts = [tiny_classifier.random_sentence(rng) for _ in range(4)]
    np.testing.assert_allclose(theirs.predict(tiny_texts, verbose=0),
                               ours(_encode(tokenizer, tiny_texts))["logits"], atol=1e-5)
    probabilities = np.loadtxt(predictions / "test_results.tsv", delimiter="\t")
    test_texts = [line.split("\t")[2] for line in (data / "test.tsv").read_text().splitlines()[1:]]
    logits = _at_128(keras_hub.models.BertTextClassifier.from_preset(small_preset)).predict(test_texts, verbose=0)
    np.testing.assert_allclose(probabilities, np.exp(logits) / np.exp(logits).sum(1, keepdims=True), atol=1e-5)


def test_gelu_exact_difference_on_minilm(minilm_release):
    """The figures GELU_EXACT_DIFFERENCE states: the real MiniLM (trained with the exact GELU) computed with the
    tanh form, as a KerasHub preset computes it, on gensim's 200 polarity sentences."""
    files = checkpoints.model_files(minilm_release)
    assert files.config.hidden_act == "gelu_exact"
    exact = encoder.BertModel(files.config)
    checkpoints.restore(exact, minilm_release)
    tanh = encoder.BertModel(BertConfig.from_dict({**files.config.to_dict(), "hidden_act": "gelu"}))
    checkpoints.restore(tanh, minilm_release)
    tokenizer = tokenization.FullTokenizer(os.path.join(minilm_release, "vocab.txt"), True)
    texts = sorted(_texts(200), key=lambda text: len(tokenizer.tokenize(text)))  # batches of similar lengths
    # One trace for every batch shape: eager calls cost more than the computation (oneDNN set-up per shape).
    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    both = tf.function(lambda batch: (exact(batch), tanh(batch)), input_signature=[spec])
    sequence, pooled, cosines = [], [], []

    def embeddings(outputs, mask):
        total = (np.asarray(outputs["sequence_output"]) * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return total / np.linalg.norm(total, axis=1, keepdims=True)

    for start in range(0, len(texts), 25):
        batch = _encode(tokenizer, texts[start:start + 25])
        a, b = both(batch)
        mask = batch["input_mask"] == 1
        sequence.append(np.abs(np.asarray(a["sequence_output"]) - np.asarray(b["sequence_output"]))[mask])
        pooled.append(np.abs(np.asarray(a["pooled_output"]) - np.asarray(b["pooled_output"])))
        cosines.append((embeddings(a, mask) * embeddings(b, mask)).sum(1))
    sequence, pooled, cosine = np.concatenate(sequence), np.concatenate(pooled), np.concatenate(cosines).min()
    stated = kh_checkpoints.GELU_EXACT_DIFFERENCE
    for figure in (f"up to {sequence.max():.1e}", f"({sequence.mean():.1e} on average)", f"up to {pooled.max():.1e}",
                   f"cosine of {cosine:.6f}"):
        assert figure.replace("e-0", "e-") in stated, (figure, stated)


def test_keras_hub_is_imported_only_for_a_preset(tiny_release, tmp_path, child_env):
    """Without keras-hub: bert_tf.checkpoints imports, a preset's config, vocabulary and casing are read (JSON
    only), and loading its weights is an ImportError naming the extra to install."""
    import sys

    import forkserver
    preset = checkpoints.convert_checkpoint(tiny_release["dir"], str(tmp_path / "preset"), to="keras_hub")
    code = f"""
import sys
assert "keras_hub" not in sys.modules, "imported before the test could hide it"
sys.modules["keras_hub"] = None  # as if not installed
from bert_tf import checkpoints
from bert_tf.model import encoder
files = checkpoints.model_files({preset!r})
print("config", files.config.vocab_size, files.do_lower_case)
try:
    checkpoints.restore(encoder.BertModel(files.config), {preset!r})
except ImportError as e:
    print("ImportError", e)
"""
    result = forkserver.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(),
                            timeout=300)
    assert "config 99 True" in result.stdout, result.stderr[-2000:]
    assert "ImportError KerasHub presets need keras-hub: pip install 'bert-tf[ecosystem]'" in result.stdout
