"""One FLOPs count: the model card (`summary`), the architecture comparison and the benchmarks
print the same forward FLOPs per token for the same model, in every family, and the count
is the block's own matrices applied once per token, plus attention over the keys."""

from __future__ import annotations

from fractions import Fraction

import pytest

from abacus_interp.core.families import build_model
from abacus_interp.core.flops import forward_flops_per_token, layer_flops_per_token, training_depth
from abacus_interp.core.summary import parameter_summary
from abacus_interp.training.compute import training_cost
from benchmarks._flops import forward_flops, training_step_flops

FAMILIES = {
    "looped": dict(n_loops=3),
    "looped gated": dict(n_loops=2, activation="swiglu"),
    "lstm": dict(family="lstm", positional="learned", n_loops=1),
    "retran": dict(family="retran", positional="learned", n_loops=1),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_card_comparison_and_benchmarks_print_the_same_flops(tiny_model, family):
    model = build_model(tiny_model(**FAMILIES[family]).cfg)  # the family's own model
    cfg, keys = model.cfg, 12
    card = parameter_summary(model, seq_len=keys)["forward_flops_per_token"]
    config = {"model": cfg.to_dict(), "train": {"progressive": "none", "mix_depths": None}}
    comparison = training_cost(config, params=0, n_ctx=keys).forward_flops_per_token
    benchmark = forward_flops(cfg, tokens=1, seq_len=keys)
    assert card == pytest.approx(comparison) == pytest.approx(benchmark) == forward_flops_per_token(cfg, keys)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_layer_costs_its_own_matrices_once_per_token_plus_attention(tiny_model, family):
    """Checked against the parameters: 2 FLOPs per weight of every matrix of one layer, and
    2 * 2 * keys * (n_heads * d_head) for the scores and the mix where the layer attends."""
    model = build_model(tiny_model(**FAMILIES[family]).cfg)  # the family's own model
    cfg, keys = model.cfg, 12
    layer = [name for name, _ in model.named_parameters() if name.split(".")[:2] in (["blocks", "0"], ["layers", "0"])]
    matrices = sum(p.numel() for name, p in model.named_parameters() if name in layer and p.dim() >= 2
                   and name.rsplit(".", 1)[-1].startswith("W_"))
    attends = any(".attn." in name for name in layer)
    mix = 2 * 2 * keys * cfg.n_heads * cfg.d_head if attends else 0
    assert layer_flops_per_token(cfg, keys) == 2 * matrices + mix


def test_training_depth_and_the_step_count_agree(tiny_model):
    from types import SimpleNamespace

    from abacus_interp.training.config import TrainConfig

    model = tiny_model(n_loops=4)
    run = SimpleNamespace(model=model.cfg, train=TrainConfig(progressive="mix", mix_depths=(2, 8)))
    loops, readouts = training_depth("mix", (2, 8), 4)
    assert (loops, readouts) == (Fraction(sum(max(4, r) for r in range(2, 9)), 7), 1 + Fraction(6, 7))
    assert training_step_flops(run, tokens=10, seq_len=12) == pytest.approx(
        3 * 10 * forward_flops_per_token(model.cfg, 12, float(loops), float(readouts)))
