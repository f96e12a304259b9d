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
