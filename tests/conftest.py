"""Shared pytest fixtures: paths to the small fixtures and goldens kept in tests/data."""
import os

import pytest

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@pytest.fixture(scope="session")
def data_dir():
    return DATA_DIR


@pytest.fixture(scope="session")
def uncased_vocab_file():
    """The bert-base-uncased vocabulary (30,522 tokens), as shipped with the MiniLM model."""
    return os.path.join(DATA_DIR, "uncased_vocab.txt")


@pytest.fixture
def tiny_config():
    """L=2, H=32, A=4: small enough that a forward pass takes milliseconds."""
    from bert_tf.config import BertConfig
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=24, type_vocab_size=2)


@pytest.fixture
def tiny_batch():
    """input_ids, input_mask, segment_ids [3, 9] int32, with padding in two rows."""
    import numpy as np
    rng = np.random.RandomState(5)
    input_ids = rng.randint(1, 99, size=(3, 9)).astype(np.int32)
    input_mask = np.ones((3, 9), np.int32)
    input_mask[1, 6:] = 0
    input_mask[2, 3:] = 0
    input_ids[input_mask == 0] = 0
    segment_ids = np.zeros((3, 9), np.int32)
    segment_ids[0, 5:] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
