"""The pre-trained model a run starts from (`Pretrained`): its config, vocabulary and casing
(`model_files`: the flags', else the model's own) and tokenizer (`load_pretrained`, the one way
scripts load one); `Pretrained.build_model` makes its model.
"""
import dataclasses
import os

from absl import logging

from bert_tf import fileio
from bert_tf.checkpoints import keras_hub, tfhub
from bert_tf.checkpoints.restore import restore
from bert_tf.model import task_models
from bert_tf.model.config import BertConfig, check_max_seq_length, check_vocab_size
from bert_tf.text import tokenization


@dataclasses.dataclass
class Pretrained:
    """The pre-trained model a run starts from: its files and tokenizer."""
    config: BertConfig
    vocab_file: str | None
    do_lower_case: bool
    init_checkpoint: str | None = None
    tokenizer: tokenization.FullTokenizer | None = None  # None without a vocab_file (a task that reads token ids only)

    @property
    def restored(self):
        """Whether there is an init_checkpoint (a model built for it skips random initial values)."""
        return bool(self.init_checkpoint)

    def restore(self, model, required_heads=()):
        """Restores init_checkpoint into `model` (none: a warning), raising if a `required_heads` head is absent;
        returns the LoadReport or None."""
        if self.init_checkpoint:
            return restore(model, self.init_checkpoint, required_heads)
        logging.warning("No init_checkpoint: the model has random weights.")
        return None

    def build_model(self, build, required_heads=()):
        """`build(config, self.restored)` with init_checkpoint restored into it."""
        model = build(self.config, self.restored)
        self.restore(model, required_heads)
        return model


def model_files(init_checkpoint=None, bert_config_file=None, vocab_file=None, do_lower_case=None):
    """A Pretrained without tokenizer: the files given, else the model's own (beside init_checkpoint, a
    TF Hub model's or preset's, a run's `run_record`); do_lower_case else True. FileNotFoundError for a missing file;
    ValueError for no config, or one contradicting the model's own."""
    hub = tfhub.read_hub_model(init_checkpoint) if tfhub.is_saved_model(init_checkpoint) else None
    own = hub or (keras_hub.read_preset(init_checkpoint) if keras_hub.is_preset(init_checkpoint) else None)
    beside = file_beside(init_checkpoint)
    if bert_config_file or beside:
        config = BertConfig.from_json_file(bert_config_file or beside)
    elif own:
        config = tfhub.infer_bert_config(hub) if hub else own.config
    else:
        raise ValueError(f"No bert_config_file given, and init_checkpoint={init_checkpoint!r} has no "
                         f"bert_config.json beside it and is neither a TF Hub BERT SavedModel to infer one from nor "
                         f"a KerasHub BERT preset.")
    if vocab_file and not fileio.exists(vocab_file):
        raise FileNotFoundError(f"--vocab_file {vocab_file!r} does not exist.")
    recorded = run_record(init_checkpoint) if own is None else None
    if recorded:  # a training run's output_dir: its copy of the vocabulary, its casing
        vocab_file = vocab_file or file_beside(init_checkpoint, "vocab.txt")
        do_lower_case = recorded["do_lower_case"] if do_lower_case is None else do_lower_case
    if own is None:
        return Pretrained(config, vocab_file, True if do_lower_case is None else do_lower_case, init_checkpoint)
    size = len(tokenization.load_vocab(vocab_file)) if vocab_file else own.vocab_size
    if size != own.vocab_size:
        raise ValueError(f"{vocab_file} has {size} tokens but {own.path} has {own.vocab_size} word embeddings: the "
                         f"vocab does not belong to this model; leave vocab_file out to use its own "
                         f"{own.vocab_file or 'vocabulary'}.")
    if do_lower_case is not None and own.do_lower_case is not None and do_lower_case != own.do_lower_case:
        raise ValueError(f"do_lower_case={do_lower_case} contradicts {own.path}, whose "
                         f"{'do_lower_case variable' if hub else 'tokenizer.json (lowercase)'} says "
                         f"{own.do_lower_case}: leave do_lower_case out to use the model's own casing.")
    casing = next(c for c in (do_lower_case, own.do_lower_case, True) if c is not None)
    return Pretrained(config, vocab_file or own.vocab_file, casing, init_checkpoint)


def run_record(init_checkpoint):
    """The `task_models.METADATA_FILE` (task, labels, casing, ...) beside `init_checkpoint`, or None."""
    path = file_beside(init_checkpoint, task_models.METADATA_FILE)
    return fileio.read_json(path, "Model metadata") if path else None


def checkpoint_directory(init_checkpoint):
    return init_checkpoint if fileio.isdir(init_checkpoint) else os.path.dirname(init_checkpoint)


def file_beside(init_checkpoint, name="bert_config.json"):
    """The file `name` in init_checkpoint's directory (`checkpoint_directory`), or None."""
    if not init_checkpoint:
        return None
    path = os.path.join(checkpoint_directory(init_checkpoint), name)
    return path if fileio.exists(path) else None


def load_pretrained(init_checkpoint=None, bert_config_file=None, vocab_file=None,
                    do_lower_case=None, max_seq_length=None, needs_vocab=True):
    """A pre-trained model -> Pretrained: `model_files` with its tokenizer, checked for casing,
    max_seq_length and vocabulary. `needs_vocab`: a vocab_file is required."""
    loaded = model_files(init_checkpoint, bert_config_file, vocab_file, do_lower_case)
    tokenization.validate_case_matches_checkpoint(loaded.do_lower_case, init_checkpoint)
    if max_seq_length is not None:
        check_max_seq_length(loaded.config, max_seq_length)
    if loaded.vocab_file:
        loaded.tokenizer = tokenization.FullTokenizer(loaded.vocab_file, loaded.do_lower_case)
        check_vocab_size(loaded.config, loaded.tokenizer.vocab, loaded.vocab_file)
    elif needs_vocab:
        raise ValueError(f"No vocab_file given, and init_checkpoint={init_checkpoint!r} is not a TF Hub BERT "
                         f"SavedModel with a vocab_file asset: pass --vocab_file (the vocab.txt the model was "
                         f"trained on; a KerasHub preset with a tokenizer has its own).")
    return loaded
