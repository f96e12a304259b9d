"""A tiny pretraining set-up shared by the distributed pretraining tests: the golden records of the original
create_pretraining_data.py (tests/fixtures/README.md: 60 instances, max_seq_length 128, max_predictions_per_seq 20,
bert-base-uncased ids) and a dropout-free L=1, H=32 BERT over their vocabulary, so that runs that only split the
same batches differently compute the same numbers."""
import os

from bert_tf.model.config import BertConfig

RECORDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "pretraining_sample_text_seed12345.tfrecord")
NUM_RECORDS, SEQ_LENGTH, PREDICTIONS = 60, 128, 20
# The per-update figures the Trainer summarizes for PretrainingLoss (besides learning_rate and examples/s).
FIGURES = ("loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy",
           "gradient_norm")


def config():
    """L=1, H=32, A=4, I=37 over the 30,522 ids of the records, without dropout."""
    return BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=SEQ_LENGTH, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def write_varying_records(directory, files=2, per_file=24, seed=0, seq_length=SEQ_LENGTH, predictions=PREDICTIONS,
                          id_range=(1000, 30522)):
    """`files` TFRecord files of `per_file` pretraining records each (the schema of create_pretraining_data.py at
    `seq_length` and `predictions`) whose lengths vary widely: in file i, 5 + (L - 5) u^3 with u uniform in [0, 1)
    and L = seq_length * (i + 1) / files (mostly short texts and a few long ones; the last file's up to seq_length,
    the others' shorter); random ids in range(*id_range), 15% of the positions masked (at least 1, at most
    `predictions`), random next-sentence labels. Returns the paths."""
    import numpy as np

    from bert_tf.data import records
    from bert_tf.data.pretraining import dataset

    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    schema = dataset.schema(seq_length, predictions)
    paths = []
    for i in range(files):
        serialized = []
        longest = seq_length * (i + 1) // files
        for length in (5 + (longest - 5) * rng.uniform(size=per_file) ** 3).astype(int):
            ids = np.zeros(seq_length, np.int64)
            ids[:length] = rng.randint(*id_range, length)
            count = min(predictions, max(1, round(0.15 * length)))
            masked = np.zeros(predictions, np.int64)
            masked[:count] = np.sort(rng.choice(np.arange(1, length - 1), count, replace=False))
            values = {"input_ids": ids, "input_mask": np.arange(seq_length) < length,
                      "segment_ids": (np.arange(seq_length) >= length // 2) & (np.arange(seq_length) < length),
                      "masked_lm_positions": masked, "masked_lm_ids": np.where(masked > 0, ids[masked], 0),
                      "masked_lm_weights": (masked > 0).astype(np.float32),
                      "next_sentence_labels": rng.randint(0, 2)}
            serialized.append(records.example(values, schema).SerializeToString())
        paths.append(os.path.join(directory, f"pretraining-{i}.tfrecord"))
        records.write(paths[-1], serialized)
    return paths
