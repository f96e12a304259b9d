"""The checks every fine-tuning script makes before hours of work, from the shared flags (bert_tf.flags)."""
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, tokenization
from bert_tf.config import BertConfig


def prepare(flag_values, min_seq_length=3, exportable=True):
    """Validates the run flags, model files and sequence length; creates output_dir.

    `exportable`: whether the task has a SavedModel export (else --export_dir is refused up front).
    Returns (BertConfig, FullTokenizer).
    """
    fv = flag_values
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    if fv.export_dir and not exportable:
        raise ValueError("--export_dir: this task has no SavedModel export; see run_scripts/export_saved_model.py "
                         "for the tasks that have one.")
    tokenization.validate_case_matches_checkpoint(fv.do_lower_case, fv.init_checkpoint)
    config = BertConfig.from_json_file(fv.bert_config_file)
    if fv.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"Cannot use sequence length {fv.max_seq_length} because the BERT model was only trained "
                         f"up to sequence length {config.max_position_embeddings}")
    if fv.max_seq_length < min_seq_length:
        raise ValueError(f"max_seq_length must be at least {min_seq_length}, got {fv.max_seq_length}.")
    tf.io.gfile.makedirs(fv.output_dir)
    tokenizer = tokenization.FullTokenizer(fv.vocab_file, fv.do_lower_case)
    checkpoints.check_vocab_size(config, tokenizer.vocab, fv.vocab_file)
    return config, tokenizer


def export_if_requested(flag_values, trainer, task=None, label_list=None):
    """After a run: with --save_original_checkpoint, the model in the original TF1 format at
    <output_dir>/original; with --export_dir, a SavedModel at <export_dir>/<global_step>.

    `task` is an export task name ("classifier", "squad", "ner"), or None for a task without a SavedModel export.
    Returns the paths written.
    """
    written = []
    if flag_values.save_original_checkpoint and flag_values.do_train:
        from bert_tf import checkpoints

        written.append(checkpoints.export_original(trainer.model, f"{flag_values.output_dir}/original",
                                                   vocab_file=flag_values.vocab_file))
        logging.info("Wrote the fine-tuned model in the original format to %s", written[-1])
    if flag_values.export_dir and task:
        from bert_tf import export

        written.append(export.export_task_model(
            trainer.model, task, flag_values.export_dir, flag_values.vocab_file, flag_values.do_lower_case,
            flag_values.max_seq_length, version=max(trainer.step, 1), overwrite=True, label_list=label_list))
        logging.info("Exported the %s model to %s", task, written[-1])
    return written
