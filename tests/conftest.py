"""Shared fixtures: a fixed seed for every test and a builder of tiny looped models."""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.runtime import torch_threads

ADDITION_VOCAB = Vocab(tuple("0123456789+="))

TINY_MODEL_DEFAULTS = dict(
    vocab=ADDITION_VOCAB,
    d_model=32,
    n_heads=4,
    n_layers=2,
    n_loops=3,
    max_seq_len=48,
)


def make_tiny_model(**overrides) -> LoopedTransformer:
    """A small addition-vocabulary model in eval mode; any ModelConfig field can be overridden."""
    cfg = ModelConfig(**{**TINY_MODEL_DEFAULTS, **overrides})
    return LoopedTransformer(cfg).eval()


@pytest.fixture(autouse=True)
def fixed_seed():
    torch.manual_seed(0)
    random.seed(0)


@pytest.fixture(autouse=True, scope="session")
def single_torch_thread():
    """One intra-op thread for the whole session: every test model is tiny, and on a shared
    machine the intra-op threads of concurrent processes fight over the cores (10x slower)."""
    with torch_threads(1):
        yield


@pytest.fixture
def tiny_model():
    """The builder itself, so a test asks for the variant it needs: `tiny_model(positional="learned")`."""
    return make_tiny_model
