"""The attention sink (`ModelConfig.attention_sink`): each head's softmax also counts a key of
zeros at a learned logit. Both attention paths and cached decoding are checked with it in
tests/test_decoding.py ("attention-sink"), tests/test_multiplier_heads.py ("attention sink") and
the circuit graph's forward pass in tests/test_circuit.py; here the planted weights it gives, a
sink too low to matter, a checkpoint without a sink loaded into a model with one, and the config."""

from __future__ import annotations

import math

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.attention import attend
from abacus_interp.core.hooks import act_name
from abacus_interp.errors import UserError
from tests.conftest import TINY_MODEL_DEFAULTS


def flat_pattern(tiny_model, sink: float | None, n_keys: int) -> torch.Tensor:
    """The last query's weights over `n_keys` tokens when every score is 0 (queries zeroed)."""
    model = tiny_model(n_heads=1, d_head=8, n_layers=1, n_loops=1, positional="none", max_seq_len=64,
                       attention_sink=sink, attention_backend="explicit")
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
    stored = {}
    with torch.no_grad():
        model.run_with_hooks(model.to_tokens(["1" * n_keys]),
                             fwd_hooks=[(act_name("pattern", 0, loop=0), lambda p, hook: stored.setdefault("p", p))])
    return stored["p"][0, 0, -1]  # [key]


def test_a_sink_turns_the_average_of_equal_keys_into_a_sum(tiny_model):
    """Equal scores over n keys: the plain softmax gives each 1 / n, halving from 10 keys to 20;
    with a sink at ln(100) each key gets 1 / (n + 100), which moves far less."""
    for n_keys in (10, 20):
        torch.testing.assert_close(flat_pattern(tiny_model, None, n_keys), torch.full((n_keys,), 1 / n_keys))
        weights = flat_pattern(tiny_model, math.log(100), n_keys)
        torch.testing.assert_close(weights, torch.full((n_keys,), 1 / (n_keys + 100)))
    ratio = float(flat_pattern(tiny_model, math.log(100), 20)[0] / flat_pattern(tiny_model, math.log(100), 10)[0])
    assert ratio == pytest.approx(110 / 120)  # against 1/2 for the plain softmax


def test_the_fast_path_gives_the_explicit_paths_output_and_gradient_with_a_sink():
    """attend() (SDPA with the sink as one more key) against the softmax with the sink's column:
    per-head and shared masks, no mask with fewer queries than keys (a cached step), a query that
    sees no real key (all its weight on the sink: a zero output), and the sink's gradient."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 3, 4), torch.randn(2, 7, 3, 4), torch.randn(2, 7, 3, 4)
    per_head = torch.rand(2, 3, 5, 7) > 0.3
    per_head[0, 1, 2] = False  # this query sees no real key
    causal = torch.ones(5, 7, dtype=torch.bool).tril(2)[None, None]
    for mask in (per_head, per_head[:1, :1], None):
        sink = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        reference_sink = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / 2.0
        scores = scores.masked_fill(~(causal if mask is None else mask), float("-inf"))
        column = reference_sink[None, :, None, None].expand(2, 3, 5, 1)
        pattern = torch.softmax(torch.cat([scores, column], -1), -1)[..., :-1]
        expected = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
        got = attend(q, k, v, mask, sink)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        (got * v[:, :5]).sum().backward()
        (expected * v[:, :5]).sum().backward()
        torch.testing.assert_close(sink.grad, reference_sink.grad, atol=1e-5, rtol=1e-5)
        assert sink.grad.abs().min() > 1e-4  # a gradient that is not zero
    assert attend(q, k, v, per_head, torch.zeros(3))[0, 2, 1].abs().max() == 0


def test_a_sink_far_below_the_scores_leaves_the_model_as_it_was(tiny_model):
    plain = tiny_model(positional="none", rotary="abacus")
    sunk = tiny_model(positional="none", rotary="abacus", attention_sink=-60.0)
    missing, unexpected = sunk.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == [f"blocks.{i}.attn.sink" for i in range(len(sunk.blocks))] and not unexpected
    tokens = plain.to_tokens(["123+4567=", "9+99="])
    torch.testing.assert_close(sunk(tokens), plain(tokens), atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        sunk.blocks[0].attn.sink.fill_(3.0)
    assert (sunk(tokens) - plain(tokens)).abs().max() > 1e-3  # a sink that counts changes the output


def test_the_sink_is_one_parameter_per_head_and_the_config_checks_it():
    cfg = ModelConfig(**TINY_MODEL_DEFAULTS, attention_sink=0.0)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "attention_sink" not in ModelConfig(**TINY_MODEL_DEFAULTS).to_dict()  # old runs read the same
    model = LoopedTransformer(cfg)
    torch.testing.assert_close(model.blocks[0].attn.sink, torch.zeros(4))
    assert LoopedTransformer(ModelConfig(**TINY_MODEL_DEFAULTS)).blocks[0].attn.sink is None
    for bad in (math.inf, math.nan, True, "low"):
        with pytest.raises(UserError, match="attention_sink"):
            ModelConfig(**TINY_MODEL_DEFAULTS, attention_sink=bad)
    with pytest.raises(UserError, match="looped family"):
        ModelConfig(**{**TINY_MODEL_DEFAULTS, "n_loops": 1}, family="lstm", attention_sink=0.0)


def test_attends_signature_is_checked():
    from tests.test_model import SHAPE_ERRORS, typechecked

    checked = typechecked(attend)
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 5, 4, 8)
    assert checked(q, k, k, None, torch.zeros(4)).shape == (2, 3, 4, 8)
    with pytest.raises(SHAPE_ERRORS):
        checked(q, torch.randn(2, 5, 4, 6), k, None, torch.zeros(4))  # keys of another d_head
    with pytest.raises(SHAPE_ERRORS):
        checked(q, k, k, None, torch.zeros(3))  # a sink for 3 heads of 4


def test_a_head_added_to_a_model_with_a_sink_keeps_each_heads_sink():
    """grow_state puts each source head's sink logit at the head it becomes; the new head keeps
    the fresh value."""
    from abacus_interp.training.growth import grow_state

    source = {"blocks.0.attn.sink": torch.tensor([1.0, 2.0, 3.0])}
    expected = {"blocks.0.attn.sink": torch.full((4,), -0.5)}
    grown, changed = grow_state(expected, source, placement=[0, 1, 3])
    assert changed == ["blocks.0.attn.sink"]
    assert grown["blocks.0.attn.sink"].tolist() == [1.0, 2.0, -0.5, 3.0]
