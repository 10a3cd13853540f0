"""The levers of the loop-add recipe: "norm_add" injection (why plain "add" cannot contract),
and the relative-step penalty of training."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import make_tiny_model

from abacus_interp import ModelConfig
from abacus_interp import checkpoints as ckpt
from abacus_interp.core.halting import relative_step
from abacus_interp.training import apply_overrides, get_preset, train


def loop_map(model, tokens):
    inputs = model.embed(tokens)
    return lambda s: model.run_loops(inputs, range(1, 2), state=s)


@torch.no_grad()
def test_add_injection_passes_the_mean_direction_through_norm_add_removes_it():
    tokens = make_tiny_model().to_tokens(["321+654=975"])
    shift = torch.ones(1, tokens.shape[1], 32) * 3.0  # c * (1, ..., 1) at every position
    for injection, passes in (("add", True), ("norm_add", False)):
        model = make_tiny_model(n_layers=1, input_injection=injection)
        f = loop_map(model, tokens)
        s = model.run_loops(model.embed(tokens), range(1))
        moved = f(s + shift) - f(s)
        if passes:  # pre-LN blocks cannot see the mean: the shift comes out unchanged (eigenvalue 1)
            torch.testing.assert_close(moved, shift, atol=1e-4, rtol=0)
        else:  # the state is normalised before injection: the shift is forgotten
            assert moved.abs().max() < 1e-4


def test_norm_add_needs_layernorm():
    with pytest.raises(ValueError, match="norm='pre'"):
        ModelConfig(vocab=make_tiny_model().cfg.vocab, input_injection="norm_add", norm="none")


def test_relative_step_is_zero_at_a_fixed_point_and_ignores_padding():
    s = torch.randn(2, 3, 4)
    valid = torch.tensor([[True, True, False], [True, True, True]])[..., None]
    assert torch.all(relative_step(s, s, valid) == 0)
    moved = s.clone()
    moved[0, 2] += 100.0  # a padding position of example 0
    assert relative_step(moved, s, valid)[0] == 0 and relative_step(moved, s, valid)[1] == 0
    assert relative_step(2 * s, s, valid).tolist() == pytest.approx([0.5, 0.5])


def test_step_penalty_enters_the_optimised_loss(tmp_path):
    base = ["task.max_digits=3", "model.d_model=32", "model.n_loops=2", "model.max_loops=4", "model.max_seq_len=24",
            "train.mix_depths=[1,4]", "train.steps=1", "train.batch_size=8", "train.eval_problems=8",
            "train.dense_checkpoints=1", "train.dense_until=1"]
    losses = {}
    for penalty in ("null", "5.0"):
        cfg = apply_overrides(get_preset("loop-add"), [*base, f"train.step_penalty={penalty}"])
        train(cfg, tmp_path / penalty, progress=False)
        losses[penalty] = ckpt.read_metrics(tmp_path / penalty)[0]
    assert math.isclose(losses["null"]["full_depth_loss"], losses["5.0"]["full_depth_loss"], rel_tol=1e-6)
    assert losses["5.0"]["loss"] > losses["null"]["loss"] + 0.01


def test_init_state_noise_starts_the_loop_elsewhere_and_zero_keeps_the_zero_start(tmp_path):
    base = ["task.max_digits=3", "model.d_model=32", "model.n_loops=2", "model.max_loops=4", "model.max_seq_len=24",
            "train.mix_depths=[1,4]", "train.steps=1", "train.batch_size=8", "train.eval_problems=8",
            "train.dense_checkpoints=1", "train.dense_until=1", "train.step_penalty=null"]
    first = {}
    for p in ("0.0", "1.0"):
        cfg = apply_overrides(get_preset("loop-add"), [*base, f"train.init_state_noise={p}"])
        train(cfg, tmp_path / p, progress=False)
        first[p] = ckpt.read_metrics(tmp_path / p)[0]["full_depth_loss"]
    # same seed, weights and batch: only the start of the loop differs
    assert abs(first["1.0"] - first["0.0"]) > 1e-4
    with pytest.raises(ValueError, match="probability"):
        apply_overrides(get_preset("loop-add"), ["train.init_state_noise=1.5"])
