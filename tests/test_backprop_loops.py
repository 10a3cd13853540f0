"""train.backprop_loops: a step's gradient flows through the last N loops of its pass only
(truncated backpropagation through the recurrence), and the FLOPs count says so."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from fractions import Fraction

import pytest
import torch

from abacus_interp.core.families import build_model
from abacus_interp.core.flops import (
    backward_depth,
    forward_flops_per_token,
    training_flops_per_token,
)
from abacus_interp.core.hooks import hook_name
from abacus_interp.errors import UserError
from abacus_interp.training import get_preset
from abacus_interp.training.config import TrainConfig
from abacus_interp.training.data import BatchSource
from abacus_interp.training.losses import training_losses


def _recipe(**train):
    """demo-add's recipe (noise starts, step penalty) with `train` fields replaced."""
    cfg = get_preset("demo-add")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train))


def _gradients(cfg, fwd_hooks=()) -> dict[str, torch.Tensor]:
    """The gradients of step 1 of `cfg` from a model drawn with seed 0, run under `fwd_hooks`."""
    torch.manual_seed(0)
    model = build_model(cfg.model)
    source = BatchSource(cfg.make_task(), cfg.train, cfg.model.max_seq_len)
    with model.hooks(fwd_hooks=list(fwd_hooks)):
        loss, *_ = training_losses(model, source.batch(1), source.generator(1), cfg, torch.device("cpu"), nullcontext())
    loss.backward()
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


# (train fields, backprop_loops, hook index of the last loop whose output the cut makes a constant):
# "none" runs the 6 trained loops; "mix" at depths 8..8 runs 8 and reads out at 6 and 8, so a cut
# 3 loops back from the deepest lies after hook loop 4, before the full-depth readout's last loop
CUTS = [({"progressive": "none"}, 2, 3), ({"progressive": "none"}, 5, 0), ({"mix_depths": (8, 8)}, 3, 4)]


@pytest.mark.parametrize(("train", "kept", "cut_after"), CUTS)
def test_the_gradient_is_that_of_the_pass_with_the_state_cut_before_the_last_loops(train, kept, cut_after):
    truncated = _gradients(_recipe(**train, backprop_loops=kept))
    cut = hook_name("hook_state_post", loop=cut_after)  # hook loops count from 0
    reference = _gradients(_recipe(**train), [(cut, lambda state, hook: state.detach())])
    whole = _gradients(_recipe(**train))
    assert truncated.keys() == reference.keys()
    for name in reference:
        torch.testing.assert_close(truncated[name], reference[name], rtol=1e-5, atol=1e-7)
    assert any(not torch.allclose(truncated[n], whole[n], rtol=1e-3, atol=1e-6) for n in whole)


def test_keeping_every_loop_the_step_runs_gives_the_whole_gradient_bit_for_bit():
    whole = _gradients(_recipe(progressive="none"))
    kept = _gradients(_recipe(progressive="none", backprop_loops=6))  # the 6 loops a "none" step runs
    assert all(torch.equal(whole[name], kept[name]) for name in whole)


def test_the_flops_count_runs_the_backward_through_the_kept_loops():
    assert backward_depth("mix", (6, 10), 6, None) == 8  # E[max(6, r)], r in 6..10
    assert backward_depth("mix", (6, 10), 6, 4) == 4
    assert backward_depth("mix", (6, 10), 6, 8) == Fraction(6 + 7 + 8 + 8 + 8, 5)
    assert backward_depth("none", None, 6, 2) == 2
    cfg = get_preset("demo-add").model
    whole = training_flops_per_token(cfg, 20, "mix", (6, 10))
    cut = training_flops_per_token(cfg, 20, "mix", (6, 10), backprop_loops=4)
    readouts = 1 + 4 / 5  # the full depth, and r unless r == 6
    assert whole == pytest.approx(3 * forward_flops_per_token(cfg, 20, 8, readouts))
    assert cut == pytest.approx(forward_flops_per_token(cfg, 20, 8, readouts) + 2 * forward_flops_per_token(cfg, 20, 4, readouts))


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_a_loop_count_below_one_or_not_whole_is_refused(value):
    with pytest.raises(UserError, match="backprop_loops"):
        TrainConfig(steps=1, lr=1e-3, backprop_loops=value)


def test_mcleish_and_a_cut_are_refused_together():
    with pytest.raises(UserError, match="mcleish"):
        TrainConfig(steps=1, lr=1e-3, progressive="mcleish", backprop_loops=2)
