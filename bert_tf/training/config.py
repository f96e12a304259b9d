"""A run's settings under the original flag names: `RunConfig`, a frozen dataclass whose defaults the run scripts'
flags take (`bert_tf.flags.run_flag`). The Trainer (bert_tf.training.trainer) reads the training fields, checked
when a RunConfig is made; `bert_tf.tasks.runner.run` the rest. What a run derives (workers, directories) is the
Trainer's.
"""
import dataclasses

from bert_tf.data import lengths
from bert_tf.training import distribute, layers, optimization


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The settings of a task's run, with the original scripts' defaults; the training fields are keyword-only."""
    # The pre-trained model (None: a TF Hub init_checkpoint's own, `checkpoints.model_files`; do_lower_case else True).
    bert_config_file: str | None = None
    vocab_file: str | None = None
    output_dir: str | None = None
    init_checkpoint: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    # What to run.
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    predict_text_file: str | None = None  # plain texts to answer into output_dir/predictions.jsonl (tasks.answers)
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    seed: int | None = None
    export_dir: str | None = None
    save_original_checkpoint: bool = False
    save_keras_hub_preset: bool = False
    # Devices.
    use_tpu: bool = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None
    num_tpu_cores: int = 8
    distribution_strategy: str = "auto"
    num_gpus: int | None = None
    num_cpu_devices: int = 1
    heartbeat_timeout_seconds: float = distribute.HEARTBEAT_TIMEOUT_S  # multi_worker_mirrored: a silent worker is lost
    start_over: bool = False
    # Batch lengths (bert_tf.data.lengths): cut to the longest text of each batch unless pad_to_max_seq_length.
    pad_to_max_seq_length: bool = False
    seq_length_multiple: int | None = None
    group_by_length: bool = False
    # Training: how the Trainer trains and keeps checkpoints.
    _: dataclasses.KW_ONLY
    learning_rate: float = 5e-5
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000  # updates per call of the training loop (1 under several workers)
    gradient_accumulation_steps: int = 1  # micro-batches per update
    gradient_checkpointing: bool = False  # True: the encoder recomputes its blocks' activations in the backward pass
    mixed_precision: str = "float32"  # the global Keras policy: float32, mixed_float16 or mixed_bfloat16
    use_xla: bool = False
    adam_bias_correction: bool = False  # adamw only
    keep_checkpoint_max: int = 5
    optimizer: str = "adamw"  # one of optimization.OPTIMIZERS
    fused_adam: bool = True
    # Which weights train, at which rate; op determinism (bert_tf.training.layers).
    layerwise_lr_decay: float = 1.0  # RHO: transformer layer i of L trains at lr x RHO^(L-i) (1.0: off)
    freeze_layers: int = 0  # the embeddings and this many lowest layers are not trained (-1: the whole encoder)
    deterministic: bool = False  # TensorFlow's op determinism (needs seed)
    # Evaluation during training, the best checkpoint, early stopping (bert_tf.tasks.evaluation).
    eval_every_steps: int = 0  # evaluate on dev every this many steps and at the end (0: once, after training)
    best_metric: str | None = None  # a key of the task's eval results: its best evaluation's weights are kept
    best_metric_mode: str | None = None  # max or min (None: min for a key ending in "loss", else max)
    early_stopping_patience: int = 0  # stop after this many evaluations without improvement (0: never)
    early_stopping_min_delta: float = 0.0  # an improvement is by more than this
    # Class weights of the training loss (classifier, NER: bert_tf.tasks.classifier.task.ClassWeightedLoss).
    class_weights: str = ""  # "balanced" or a comma list, one per label ("": unweighted, the original)
    # Multi-label classification (run_classifier.py: bert_tf.tasks.classifier.task).
    multi_label: bool = False  # an example has any number of labels: sigmoid outputs, binary cross-entropy
    label_separator: str = ","  # what joins an example's labels in a text column
    tune_thresholds: bool = False  # each label's threshold chosen on the dev set (else the default one)

    def __post_init__(self):
        if self.gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}.")
        if self.optimizer not in optimization.OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {self.optimizer!r}: expected one of "
                             f"{', '.join(optimization.OPTIMIZERS)}.")
        if self.optimizer != "adamw" and self.adam_bias_correction:
            raise ValueError("--adam_bias_correction applies to --optimizer=adamw only (lamb always corrects).")
        if self.layerwise_lr_decay <= 0 or self.freeze_layers < layers.FREEZE_ENCODER:
            raise ValueError(f"--layerwise_lr_decay must be > 0 (got {self.layerwise_lr_decay}) and --freeze_layers "
                             f">= {layers.FREEZE_ENCODER} (got {self.freeze_layers}).")
        if self.deterministic and self.seed is None:
            raise ValueError("--deterministic needs --seed: op determinism repeats a run only from the same seed.")
        if self.eval_every_steps < 0 or self.early_stopping_patience < 0 or self.early_stopping_min_delta < 0:
            raise ValueError("--eval_every_steps, --early_stopping_patience and --early_stopping_min_delta must be "
                             ">= 0.")
        if self.best_metric_mode not in (None, "max", "min"):
            raise ValueError(f"--best_metric_mode must be max or min, got {self.best_metric_mode!r}.")
        if (self.best_metric or self.early_stopping_patience) and not self.eval_every_steps:
            raise ValueError("--best_metric and --early_stopping_patience need --eval_every_steps > 0 (evaluations "
                             "during training to compare).")
        if self.early_stopping_patience and not self.best_metric:
            raise ValueError("--early_stopping_patience needs --best_metric: the metric whose improvement it awaits.")

    @property
    def fixed_batches(self):
        """Whether evaluation and prediction need whole batches (TPU)."""
        return self.use_tpu or self.distribution_strategy == "tpu"

    @property
    def sequence_lengths(self):
        """How batches are cut (bert_tf.data.lengths.SequenceLengths.for_run)."""
        return lengths.SequenceLengths.for_run(self.pad_to_max_seq_length, self.use_xla or self.fixed_batches,
                                               self.seq_length_multiple, self.group_by_length)

    def strategy(self):
        """A new tf.distribute strategy of these settings (`--use_tpu` means tpu when the strategy is auto)."""
        name = "tpu" if self.use_tpu and self.distribution_strategy == "auto" else self.distribution_strategy
        return distribute.get_strategy(name, self.num_gpus, self.tpu_name or self.master, self.tpu_zone,
                                       self.gcp_project, self.num_cpu_devices, self.heartbeat_timeout_seconds)
