"""Shared fixtures: a fixed seed for every test and a builder of tiny looped models."""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig, Vocab

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


@pytest.fixture
def single_torch_thread():
    """Tiny models run several times faster on one thread, above all on a shared machine
    where intra-op threads of concurrent processes fight over the cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def tiny_model():
    """The builder itself, so a test asks for the variant it needs: `tiny_model(positional="learned")`."""
    return make_tiny_model
