"""The settings the Trainer (bert_tf.training.trainer) trains with: one dataclass, checked when it is made, whose
fields and defaults are written here only (a run's settings, bert_tf.tasks.runner.RunConfig, extend it; the run
scripts' flags take their defaults from that)."""
import dataclasses

from bert_tf.training import optimization


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """How `Trainer` trains and keeps checkpoints; the defaults are the original scripts'.

    The settings bear the names of the run scripts' flags; bert_tf.tasks.runner.RunConfig inherits them, and
    `TrainingConfig.of(run)` takes them from a run's settings. Keyword arguments only.
    """
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

    def __post_init__(self):
        if self.gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}.")
        if self.optimizer not in optimization.OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {self.optimizer!r}: expected one of "
                             f"{', '.join(optimization.OPTIMIZERS)}.")
        if self.optimizer != "adamw" and self.adam_bias_correction:
            raise ValueError("--adam_bias_correction applies to --optimizer=adamw only (lamb always corrects).")

    @classmethod
    def of(cls, settings):
        """The TrainingConfig of `settings`, an object holding each of these settings as an attribute of the same
        name (e.g. a RunConfig)."""
        return cls(**{field.name: getattr(settings, field.name) for field in dataclasses.fields(cls)})
