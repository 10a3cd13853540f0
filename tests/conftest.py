"""Shared fixtures: a fixed seed for every test and a builder of tiny looped models."""

from __future__ import annotations

import ast
import random

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig, Vocab
from abacus_interp.core.runtime import torch_threads

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


def poison_loss_from(monkeypatch, first_bad_step: int) -> dict[str, int]:
    """Make the training loss NaN from `first_bad_step` on (the step is read off the batch
    the loop asks for), to test how a run stops on divergence. Returns {"step": the last
    step whose batch was drawn}."""
    from abacus_interp.training import losses as losses_module
    from abacus_interp.training.data import BatchSource

    current = {"step": 0}
    original_batch, original_loss = BatchSource.batch, losses_module.next_token_loss

    def batch(self, s):
        current["step"] = s
        return original_batch(self, s)

    def poisoned_loss(*args, **kw):
        loss = original_loss(*args, **kw)
        return loss * float("nan") if current["step"] >= first_bad_step else loss

    monkeypatch.setattr(BatchSource, "batch", batch)
    monkeypatch.setattr(losses_module, "next_token_loss", poisoned_loss)
    return current


def ast_value(text: str) -> int:
    """An evaluator independent of the project's parser, for expression tasks: walk Python's
    syntax tree of the human text, numbers with + - * and unary minus only; anything else is
    a test failure."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = ev(node.left), ev(node.right)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
        raise AssertionError(f"unexpected syntax {ast.dump(node)}")

    return ev(ast.parse(text, mode="eval").body)


def tiny_sorter(task, **overrides):
    """A random sorter over `task`'s vocabulary: rotary positions on the Abacus index, no table."""
    cfg = dict(vocab=task.vocab, d_model=32, n_heads=2, n_layers=1, n_loops=2, max_seq_len=96, abacus_max_offset=0,
               positional="none", rotary="abacus")
    return LoopedTransformer(ModelConfig(**{**cfg, **overrides})).eval()


# a run of the preset "mul" small enough to train in seconds, on one process
TINY_MUL_RUN = (
    "task.max_digits=3", "model.d_model=32", "model.n_heads=2", "model.n_layers=1", "model.n_loops=2",
    "model.max_seq_len=16", "train.batch_size=16", "train.eval_problems=8", "train.warmup_steps=0",
    "train.processes=1",
)  # fmt: skip


def tiny_mul_run(*settings: str):
    """The config of TINY_MUL_RUN with `settings` (`--set` assignments) applied after it."""
    from abacus_interp.training import apply_overrides, get_preset

    return apply_overrides(get_preset("mul"), [*TINY_MUL_RUN, *settings])


# the kept-apart sorter's preset (extrap-sort-window, list_items_read_alone) small enough to
# train in seconds, on one process
TINY_SORT_RUN = (
    "task.max_digits=3", "task.max_numbers=4", "model.d_model=32", "model.n_heads=3", "model.d_head=8",
    "model.d_mlp=64", "model.n_layers=1", "model.n_loops=2", "model.max_seq_len=40", "train.batch_size=16",
    "train.eval_problems=8", "train.warmup_steps=0", "train.processes=1", "model.list_items_read_alone=true",
)  # fmt: skip


def tiny_sort_run(*settings: str):
    """The config of TINY_SORT_RUN with `settings` (`--set` assignments) applied after it."""
    from abacus_interp.training import apply_overrides, get_preset

    return apply_overrides(get_preset("extrap-sort-window"), [*TINY_SORT_RUN, *settings])
