"""absl flags shared by the run scripts, defined once, with the original scripts' names and defaults.

A script calls the `define_*` functions it needs and hands the library plain values (`run_config(FLAGS)` ->
RunConfig): nothing below run_scripts/ reads flags. Defaults are written once, where the library defines them.
Importing this module sets TensorFlow's environment (`bert_tf.script_setup`): import it before TensorFlow.
"""
import dataclasses
import os
import sys
import textwrap

from absl import app, flags

from bert_tf import script_setup

ENVIRONMENT_HELP = ("Environment (read when TensorFlow starts; a value you set is kept): " + ", ".join(
    f"{name} defaults to {value}" for name, value in script_setup.ENVIRONMENT_DEFAULTS.items()) +
    " (oneDNN graph rewrites on; TF_CPP_MIN_LOG_LEVEL is 1 on a machine with an NVIDIA driver or a TPU, hiding "
    "TensorFlow's C++ INFO lines but not its warnings and errors, else 3, hiding them all). TF_ENABLE_ONEDNN_OPTS=0 "
    "turns the rewrites off, TF_CPP_MIN_LOG_LEVEL=0 shows every message.")


def run(main, required=(), **kwargs):
    """absl's app.run for a run script with these `required` flags and ENVIRONMENT_HELP ending its --help. Bad input,
    a lost worker or a non-finite loss ends it with `<script>: error: <message>` and status 1 (the traceback with
    --verbosity=1)."""
    def guarded(argv):
        try:
            return main(argv)
        except (ValueError, OSError, FloatingPointError) as e:  # a lost worker: WorkerLost, an OSError
            if flags.FLAGS.verbosity >= 1:
                raise
            print(f"{os.path.basename(sys.argv[0])}: error: {e} (--verbosity=1 shows the traceback)", file=sys.stderr)
            sys.exit(1)

    flags.mark_flags_as_required(required)
    script = sys.modules["__main__"]
    script.__doc__ = f"{(script.__doc__ or '').rstrip()}\n\n{textwrap.fill(ENVIRONMENT_HELP, 115)}\n"
    app.run(guarded, **kwargs)


def positive(name):
    """Refuses a value of flag `name` that is not > 0 when the flags are parsed (absl's bounds are inclusive)."""
    flags.register_validator(name, lambda value: value is None or value > 0, message=f"--{name} must be > 0")


def run_flag(define, name, *args, **kwargs):
    """`define` (flags.DEFINE_bool, ...) of the shared run flag `name`, with RunConfig's default."""
    from bert_tf.training.config import RunConfig

    define(name, getattr(RunConfig, name), *args, **kwargs)


def define_model_flags():
    """The flags naming a pre-trained model, as in the original scripts."""
    flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the pre-trained BERT model. Not given: the "
                        "one beside init_checkpoint, else a TF Hub model's config inferred from its weights.")
    flags.DEFINE_string("vocab_file", None, "The vocab.txt the BERT model was trained on. Not given: a TF Hub "
                        "model's vocab_file asset.")
    run_flag(flags.DEFINE_string, "init_checkpoint", "Initial checkpoint: an original BERT checkpoint "
             "(.../bert_model.ckpt), a directory holding one, a bert-tf checkpoint, a Model Garden TF2 checkpoint, or "
             "a TF Hub BERT SavedModel directory (whose vocab_file asset, do_lower_case and config are used where "
             "those flags are not given).")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models, False for cased). Not "
                      "given: a TF Hub model's own casing, else True.")
    run_flag(flags.DEFINE_integer, "max_seq_length", "Maximum total input length after WordPiece tokenization; longer "
             "inputs are truncated, shorter ones padded.", lower_bound=3)


def define_classifier_flags():
    """run_classifier.py's own flags (also run_classifier_with_tfhub.py's)."""
    from bert_tf.model import task_models
    from bert_tf.tasks import classifier
    from bert_tf.text import packing

    flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files (or other data files) "
                        "for the task.")
    flags.DEFINE_string("task_name", None, "The name of the task to train: " + ", ".join(classifier.PROCESSORS) + ".")
    flags.DEFINE_string("xnli_language", "zh", "XNLI: the language to train (translated MultiNLI) and evaluate on.")
    holding = {"text_a": "the text", "text_b": "the second text of a pair (optional; named by this flag: required)",
               "label": "the label (optional in the test file)",
               "id": "the id that predictions.tsv reports (optional; without it: the row's number)"}
    for field in classifier.processors.COLUMNS:
        flags.DEFINE_string(f"{field}_column", None, f"The tsv, csv and jsonl tasks: the column (tsv, csv: its "
                            f"header's name, any case) or key (jsonl) holding {holding[field]}. Default: {field}.")
    define_class_weights_and_predict_text_flags()
    run_flag(flags.DEFINE_bool, "multi_label", "Multi-label classification: an example has any number of the labels "
             "(the label column holds them joined by --label_separator, a JSON list, or a DataProcessor's list); "
             "sigmoid outputs and binary cross-entropy; eval_results.txt: eval_micro_f1, eval_macro_f1, "
             "eval_subset_accuracy; --class_weights weighs each label's positive term ('balanced': its negatives over "
             "its positives in the training set).")
    run_flag(flags.DEFINE_string, "label_separator", "--multi_label: what joins an example's labels in the label "
             "column (each stripped; an empty column: no label), and the predicted labels in predictions.tsv.")
    run_flag(flags.DEFINE_bool, "tune_thresholds", "--multi_label with --do_eval: choose each label's threshold on "
             "the dev set at every evaluation (the dev probability that maximises its F1, the higher of equals), "
             "recorded in <output_dir>/model_metadata.json and used by the metrics, predictions and exports, and by "
             f"later runs that do not train. Default: {task_models.DEFAULT_THRESHOLD} each.")
    flags.DEFINE_integer("doc_stride", None, packing.DOC_STRIDE_HELP + " Here text_a is windowed and text_b kept "
                         "whole in every window (R = max_seq_length - 3 - its tokens). Training takes each window as "
                         "an example with its text's label (train.tf_record holds the windows; the steps count "
                         "them); evaluation and prediction run every window and pool each text's (--window_pooling), "
                         "so that eval_results.txt, test_results.tsv and the metrics count texts; --export_dir's text "
                         "signatures window and pool the same way. Default: 0, or in a run that does not train, that "
                         "of the training run in output_dir (its model_metadata.json).", lower_bound=0)
    flags.DEFINE_enum("window_pooling", None, packing.WINDOW_POOLINGS, "--doc_stride: a "
                      "text's outputs from its windows': mean, the mean of their probabilities (--multi_label: each "
                      "label's sigmoid; STS-B: of the scores); max, each label's highest (a softmax's then scaled to "
                      "sum to 1). eval_loss is each text's loss on them. Default: mean, or as --doc_stride's.")


def classifier_task(values):
    """The ClassifierTask of `define_classifier_flags`' values in `values` (FLAGS)."""
    from bert_tf.tasks import classifier

    columns = {field: getattr(values, f"{field}_column") for field in classifier.processors.COLUMNS
               if getattr(values, f"{field}_column") is not None}
    return classifier.ClassifierTask(task_name=values.task_name, data_dir=values.data_dir,
                                     xnli_language=values.xnli_language, columns=columns,
                                     doc_stride=values.doc_stride, window_pooling=values.window_pooling)


def define_class_weights_and_predict_text_flags():
    """--class_weights and --predict_text_file (run_classifier.py, run_ner.py)."""
    run_flag(flags.DEFINE_string, "class_weights", "Weigh the training loss by the gold label: 'balanced' (n_examples "
             "/ (n_labels * the label's count) in the training set) or a comma list of positive numbers, one per label "
             "in label_list order (run_ner.py: per tag). The loss is then sum(w * loss) / sum(w) over each batch; "
             "eval_loss stays unweighted. Default: unweighted, as the original.")
    run_flag(flags.DEFINE_string, "predict_text_file", "Plain texts to predict, one per line (run_classifier.py: a tab "
             "separates a pair's two texts): their answers, one JSON object per line as bert_tf.load(...).predict "
             "gives them, go to <output_dir>/predictions.jsonl. Needs no labelled test file; runs with or without "
             "--do_train / --do_eval / --do_predict.")


def define_run_flags():
    """Training/eval/predict flags of run_classifier.py and run_squad.py, plus bert-tf's own."""
    define_training_flags()
    run_flag(flags.DEFINE_bool, "do_predict", "Whether to run the model in inference mode on the test set.")
    run_flag(flags.DEFINE_integer, "predict_batch_size", "Total batch size for predict.", lower_bound=1)
    run_flag(flags.DEFINE_float, "num_train_epochs", "Total number of training epochs to perform.")
    positive("num_train_epochs")
    run_flag(flags.DEFINE_float, "warmup_proportion", "Proportion of training with linear learning rate "
             "warmup.", lower_bound=0.0, upper_bound=1.0)


def define_training_flags():
    """The flags run_pretraining.py shares with the fine-tuning scripts, plus bert-tf's training flags."""
    from bert_tf.training import distribute, optimization

    flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results are written.")
    run_flag(flags.DEFINE_bool, "do_train", "Whether to run training.")
    run_flag(flags.DEFINE_bool, "do_eval", "Whether to run eval on the dev set.")
    run_flag(flags.DEFINE_integer, "train_batch_size", "Total batch size for training.", lower_bound=1)
    run_flag(flags.DEFINE_integer, "eval_batch_size", "Total batch size for eval.", lower_bound=1)
    run_flag(flags.DEFINE_float, "learning_rate", "The initial learning rate for Adam.")
    positive("learning_rate")
    run_flag(flags.DEFINE_integer, "save_checkpoints_steps", "How often to save the model checkpoint.", lower_bound=1)
    run_flag(flags.DEFINE_integer, "iterations_per_loop", "How many steps to run inside one tf.function call (1 under "
             "multi_worker_mirrored, whose batches vary in length).", lower_bound=1)
    run_flag(flags.DEFINE_string, "export_dir", "If set, also export the trained (or loaded) model as a TF Serving "
             "SavedModel to <export_dir>/<global_step>, or the next free version above the highest one there: an "
             "export never rewrites a version (run_scripts/export_saved_model.py).")
    run_flag(flags.DEFINE_bool, "save_original_checkpoint", "After training, also write the fine-tuned model in the "
             "original TF1 format (original variable names) to <output_dir>/original/bert_model.ckpt, with "
             "bert_config.json and vocab.txt.")
    run_flag(flags.DEFINE_bool, "save_keras_hub_preset", "After training, also write the model as a KerasHub preset to "
             "<output_dir>/keras_hub (BertBackbone with its tokenizer, a classifier as BertTextClassifier; other heads "
             "left out; keras-hub needed).")
    run_flag(flags.DEFINE_integer, "seed", "Seed for Python, NumPy and TensorFlow (head initialization, dropout, "
             "shuffling); unset: not seeded, as the original.", lower_bound=0)
    # Evaluation during training, the best checkpoint, early stopping (bert_tf.tasks.evaluation).
    run_flag(flags.DEFINE_integer, "eval_every_steps", "With --do_train and --do_eval (run_squad.py: --do_predict, on "
             "a --predict_file with answers), also evaluate every this many steps (and at the end), each evaluation "
             "logged, in TensorBoard (output_dir/eval) and in output_dir/eval_history.jsonl. 0: once, after training "
             "(the original).", lower_bound=0)
    run_flag(flags.DEFINE_string, "best_metric", "A key of the task's eval results (eval_accuracy, eval_loss, ...; "
             "MNLI: the matched dev set's; SQuAD: f1, exact_match (v1.1) or exact (v2.0)): the best evaluation's "
             "weights are kept in output_dir/best, and after training eval_results.txt, --do_predict and the exports "
             "are the best's. Needs --eval_every_steps.")
    run_flag(flags.DEFINE_enum, "best_metric_mode", ["max", "min"], "Whether the best --best_metric is the highest or "
             "the lowest. Default: min for a key ending in loss, else max.")
    run_flag(flags.DEFINE_integer, "early_stopping_patience", "Stop training after this many evaluations without "
             "improvement of --best_metric (0: never).", lower_bound=0)
    run_flag(flags.DEFINE_float, "early_stopping_min_delta", "An improvement of --best_metric is by more than "
             "this.", lower_bound=0.0)
    # Devices, precision and compilation: the original's TPU flags plus bert-tf's tf.distribute flags.
    run_flag(flags.DEFINE_bool, "use_tpu", "Whether to use TPU (same as --distribution_strategy=tpu).")
    run_flag(flags.DEFINE_string, "tpu_name", "The Cloud TPU to use for training (name or grpc:// address).")
    run_flag(flags.DEFINE_string, "tpu_zone", "GCE zone of the Cloud TPU.")
    run_flag(flags.DEFINE_string, "gcp_project", "GCP project of the Cloud TPU.")
    run_flag(flags.DEFINE_string, "master", "TensorFlow master URL (original flag; same as --tpu_name).")
    run_flag(flags.DEFINE_integer, "num_tpu_cores", "Accepted for compatibility; the TPU system reports its "
             "cores.", lower_bound=1)
    run_flag(flags.DEFINE_enum, "distribution_strategy", list(distribute.STRATEGIES), "tf.distribute strategy. auto: "
             "tpu with --use_tpu, mirrored with several GPUs, else one_device.")
    run_flag(flags.DEFINE_integer, "num_gpus", "GPUs to use (default: all visible; 0: the CPU only). More than are "
             "visible is an error.", lower_bound=0)
    run_flag(flags.DEFINE_integer, "num_cpu_devices", "Split the CPU into this many logical devices: with "
             "--distribution_strategy=mirrored and no GPU, one replica each (multi-replica runs on a CPU-only machine, "
             "e.g. to test them).", lower_bound=1)
    run_flag(flags.DEFINE_float, "heartbeat_timeout_seconds", "multi_worker_mirrored: a worker that sends no heartbeat "
             "for this long (it ended, or its host is down or unreachable) is taken as lost, and the others stop with "
             "an error naming it instead of waiting for it; rerunning every worker resumes. Heartbeats come from a "
             "thread of their own, however long an update takes. A worker that has not started within this time of the "
             "others is named too: start the workers together. Default: TensorFlow's own.")
    positive("heartbeat_timeout_seconds")
    run_flag(flags.DEFINE_enum, "mixed_precision", list(distribute.PRECISIONS), "Keras dtype policy; mixed_float16 "
             "trains with dynamic loss scaling.")
    run_flag(flags.DEFINE_bool, "use_xla", "Compile the training and prediction steps with XLA: on one GPU each update "
             "is one XLA program (gradients, clipping, loss scaling, the optimizer's update); on several GPUs each "
             "replica's gradients and each GPU's optimizer's update, the all-reduce between them outside; on the CPU "
             "each micro-batch's gradients. The same dropout masks as without XLA.")
    run_flag(flags.DEFINE_integer, "gradient_accumulation_steps", "Micro-batches whose gradients are summed per "
             "update; train_batch_size is the batch of one update and must be divisible by this.", lower_bound=1)
    run_flag(flags.DEFINE_bool, "gradient_checkpointing", "Recompute each transformer layer's activations in the "
             "backward pass instead of keeping them (same dropout masks, same gradients): less memory, slower steps.")
    run_flag(flags.DEFINE_bool, "adam_bias_correction", "Use Adam bias correction. Default False: the original "
             "AdamWeightDecayOptimizer has none.")
    run_flag(flags.DEFINE_bool, "fused_adam", "Apply --optimizer=adamw's update (without --adam_bias_correction) with "
             "TensorFlow's fused Adam kernel: one pass over each variable where the element-wise ops make a dozen; the "
             "original's update to float32 rounding (its 1 - beta_2 taken in float32). --nofused_adam: the original's "
             "element-wise ops.")
    run_flag(flags.DEFINE_integer, "keep_checkpoint_max", "How many recent checkpoints to keep in "
             "output_dir.", lower_bound=1)
    run_flag(flags.DEFINE_enum, "optimizer", list(optimization.OPTIMIZERS), "adamw: the original's AdamWeightDecay on "
             "warmup + linear decay; lamb: NVIDIA's LAMB recipe (polynomial decay with power 0.5 after the warmup, "
             "bias-corrected moments, layer-wise trust ratio).")
    # Which weights train, at which rate; op determinism (bert_tf.training.layers).
    run_flag(flags.DEFINE_float, "layerwise_lr_decay", "RHO: transformer layer i (0 the lowest) of L trains at "
             "learning_rate x RHO^(L-i), the embeddings at x RHO^(L+1), the pooler and the heads at learning_rate, at "
             "every step of the schedule, weight decay scaled alike (e.g. 0.9). 1.0: one rate, as the original.")
    positive("layerwise_lr_decay")
    run_flag(flags.DEFINE_integer, "freeze_layers", "Keep the embeddings and this many lowest transformer layers fixed "
             "(no gradients, no optimizer state: less memory and time); -1: the whole encoder with its pooler, "
             "training the head alone (a linear probe). Checkpoints and exports hold every weight. 0: nothing "
             "frozen.", lower_bound=-1)
    run_flag(flags.DEFINE_bool, "deterministic", "TensorFlow's op determinism "
             "(tf.config.experimental.enable_op_determinism; needs --seed): a rerun on the same GPU gives the same "
             "numbers, at the cost of slower deterministic GPU kernels (some ops then raise an error instead). Seeded "
             "CPU runs are bit-identical without it.")
    define_length_flags()
    run_flag(flags.DEFINE_bool, "group_by_length", "Training batches of examples of similar lengths (tf.data's "
             "bucket_by_sequence_length), each cut to its longest: less padding than the default, but not the "
             "original's batches (which examples share a batch depends on their lengths). A resumed run continues the "
             "same batches.")
    run_flag(flags.DEFINE_bool, "start_over", "Training into an output_dir that holds checkpoints of a run with "
             "another bert_config is an error; with --start_over those checkpoints are deleted first.")


def define_length_flags():
    """How long the batches are: cut to their longest text (default), or max_seq_length (the original's)."""
    run_flag(flags.DEFINE_bool, "pad_to_max_seq_length", "Pad every batch to max_seq_length, as the original (fixed "
             "shapes). Default: each batch is cut to its longest text (rounded up to --seq_length_multiple), which "
             "gives the real tokens the same values to float rounding; with dropout on, training then draws its "
             "dropout masks for the shorter shape.")
    run_flag(flags.DEFINE_integer, "seq_length_multiple", "Cut batches to a multiple of this length (at most "
             "max_seq_length). Default: 32 with --use_xla or on TPU (each length compiles a program once: "
             "max_seq_length / 32 of them), else 1.", lower_bound=1)


def define_pretraining_data_flags():
    """create_pretraining_data.py's flags (and its Beam variant's), defaults `instances.Options`'."""
    from bert_tf.data.pretraining import instances, shards

    default = {field.name: field.default for field in dataclasses.fields(instances.Options)}
    flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of files; globs "
                        "allowed): one sentence per line, a blank line between documents.")
    flags.DEFINE_string("output_file", None, "Output TF example file (or comma-separated list of files); with "
                        "shards, the prefix of <output_file>-SSSSS-of-NNNNN.")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
    flags.DEFINE_bool("do_lower_case", default["do_lower_case"], "Lower-case the input (True for uncased models, "
                      "False for cased).")
    flags.DEFINE_bool("do_whole_word_mask", default["do_whole_word_mask"], "Whether to use whole word masking rather "
                      "than per-WordPiece masking.")
    flags.DEFINE_integer("max_seq_length", default["max_seq_length"], "Maximum sequence length ([CLS] A [SEP] B "
                         "[SEP]: at least 5).", lower_bound=5)
    flags.DEFINE_integer("max_predictions_per_seq", default["max_predictions_per_seq"], "Maximum number of masked "
                         "LM predictions per sequence.", lower_bound=0)
    flags.DEFINE_integer("random_seed", default["random_seed"], "Random seed for data generation (shard i of the "
                         "sharded modes uses shards.shard_seed(random_seed, i)).", lower_bound=0)
    flags.DEFINE_integer("dupe_factor", default["dupe_factor"], "Number of times to duplicate the input data (with "
                         "different masks).", lower_bound=1)
    flags.DEFINE_float("masked_lm_prob", default["masked_lm_prob"], "Masked LM probability.", lower_bound=0.0,
                       upper_bound=1.0)
    flags.DEFINE_float("short_seq_prob", default["short_seq_prob"], "Probability of creating sequences which are "
                       "shorter than the maximum length.", lower_bound=0.0, upper_bound=1.0)
    flags.DEFINE_integer("shard_size", shards.SHARD_SIZE, "Sharded modes: documents per shard (memory per worker "
                         "grows with it; NSP random-next segments come from the same shard).", lower_bound=1)
    flags.DEFINE_bool("gzip", default["gzip"], "Write GZIP-compressed TFRecords (read them with "
                      "compression_type='GZIP').")


def pretraining_data_options(flag_values):
    """`define_pretraining_data_flags`' values as keyword arguments of `instances.Options`."""
    from bert_tf.data.pretraining import instances

    return {field.name: flag_values[field.name].value for field in dataclasses.fields(instances.Options)}


def given(flag_values, name):
    """The value of flag `name`, or None where it was not given on the command line."""
    return flag_values[name].value if flag_values[name].present else None


def run_config(flag_values, **overrides):
    """The shared run flags as a `RunConfig`, with `overrides`; do_lower_case is None when not given (the model's
    own casing: `checkpoints.model_files`)."""
    from bert_tf.training.config import RunConfig

    values = {field.name: flag_values[field.name].value
              for field in dataclasses.fields(RunConfig) if field.name in flag_values}
    if "do_lower_case" in values:
        values["do_lower_case"] = given(flag_values, "do_lower_case")
    return RunConfig(**{**values, **overrides})
