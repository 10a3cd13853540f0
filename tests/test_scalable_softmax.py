"""The scalable softmax (`ModelConfig.softmax_length_scale`): each head's scores times
s_h * ln(keys its query sees). Both attention paths and cached decoding are checked with it in
tests/test_decoding.py ("scalable-softmax"), tests/test_multiplier_heads.py ("scalable
softmax") and the circuit graph's forward pass in tests/test_circuit.py; here the key counts,
the planted peak it keeps, each head's own s, decoding without a mask, and the config."""

from __future__ import annotations

import math

import pytest
import torch

from abacus_interp import ModelConfig
from abacus_interp.core.attention import log_visible_keys
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import HeadKinds, attention_mask
from abacus_interp.errors import UserError
from tests.conftest import TINY_MODEL_DEFAULTS


def test_each_query_counts_the_keys_its_head_may_see():
    causal = log_visible_keys(None, 3, 5, "cpu")  # the last 3 of 5 positions, no mask
    assert causal.shape == (1, 3, 1, 1)
    torch.testing.assert_close(causal.flatten(), torch.tensor([3.0, 4.0, 5.0]).log())
    # a left-padded row (two pads) and an offset head that reads one digit below its query
    index = torch.tensor([[0, 0, 0, 1, 2, 0, 1, 2]])
    valid = torch.tensor([[False, False, True, True, True, True, True, True]])
    mask = attention_mask(valid, 8, 8, "cpu", index, heads=HeadKinds(2, (1,)))
    counts = log_visible_keys(mask, 8, 8, "cpu").exp().round()[0, :, :, 0]  # [query head]
    assert counts[:, 1].tolist() == [1, 1, 1, 2, 3, 4, 5, 6]  # the windowed head: real keys only
    # the offset head: itself and the digits one index below (of every number before it)
    assert counts[:, 0].tolist() == [1, 1, 1, 1, 2, 1, 1, 3]


def test_a_planted_peak_keeps_its_height_as_the_keys_grow_in_number(tiny_model):
    """One key the query matches by a score of 4, among n keys: a plain softmax puts
    e^4 / (e^4 + n - 1) on it, less as n grows; scaled by s * ln(n) with s = 1/4 the match
    scores ln(n), which puts n / (2n - 1) on it, about a half at any n (planted through the query
    bias and the keys' hook, read off the model's own pattern)."""
    for scale in (None, 0.25):
        for n_keys in (10, 40):
            expected = math.exp(4) / (math.exp(4) + n_keys - 1) if scale is None else n_keys / (2 * n_keys - 1)
            assert planted_peak(tiny_model, scale, n_keys) == pytest.approx(expected, rel=1e-4)


def planted_peak(tiny_model, scale: float | None, n_keys: int) -> float:
    """The weight the last query of `n_keys` tokens puts on the first, whose key alone matches
    the query with a score of 4 before the scale (every other score 0)."""
    model = tiny_model(n_heads=1, d_head=8, n_layers=1, n_loops=1, positional="none", max_seq_len=64,
                       softmax_length_scale=scale, attention_backend="explicit")
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
        model.blocks[0].attn.b_Q.fill_(1.0)  # the same query, all ones, at every position

    def match_the_first_key(k, hook):  # [batch pos head d_head]
        k = torch.zeros_like(k)
        k[:, 0, 0] = 4.0 * math.sqrt(8) / 8  # q . k / sqrt(d_head) = 4
        return k

    stored = {}
    with torch.no_grad():
        model.run_with_hooks(model.to_tokens(["1" * n_keys]),
                             fwd_hooks=[(act_name("k", 0, loop=0), match_the_first_key),
                                        (act_name("pattern", 0, loop=0), lambda p, hook: stored.setdefault("p", p))])
    return float(stored["p"][0, 0, -1, 0])  # [batch head query key]: the last query, the first key


def test_each_head_scales_by_its_own_s(tiny_model):
    """The first layer's scores in the first loop (whose input no scale has touched yet) with
    s_h = 0.1, 0.2, 0.3, 0.4 are s_h times those with every s_h = 1."""
    model = tiny_model(positional="none", rotary="abacus", softmax_length_scale=1.0, attention_backend="explicit")
    tokens = model.to_tokens(["123+4567=", "9+99="])
    name = act_name("attn_scores", 0, loop=0)
    _, unit = model.run_with_cache(tokens, names_filter=name)
    with torch.no_grad():
        model.blocks[0].attn.length_scale.copy_(torch.tensor([[0.1], [0.2], [0.3], [0.4]]))
    _, scaled = model.run_with_cache(tokens, names_filter=name)
    for h, s in enumerate((0.1, 0.2, 0.3, 0.4)):
        seen = unit[name][:, h].isfinite()  # [batch query key]: the keys the head may see
        torch.testing.assert_close(scaled[name][:, h][seen], s * unit[name][:, h][seen], rtol=1e-4, atol=1e-6)
        assert unit[name][:, h][seen].abs().max() > 1e-2  # scores that are not all zero


def test_cached_decoding_counts_keys_as_the_unpadded_forward_pass(tiny_model):
    """No window, no heads of other kinds: one prompt's forward pass has no mask (the causal
    count), a left-padded batch and the cache count from the mask; greedy completions agree."""
    from tests.test_decoding import PROMPTS, decoding_model, reference_greedy

    model = decoding_model(tiny_model, positional="none", rotary="abacus", softmax_length_scale=0.3)
    batched = model.generate(PROMPTS, n_loops=3, max_new_tokens=6)
    assert batched == [reference_greedy(model, p, 3, 6) for p in PROMPTS]
    assert len(set(batched)) > 1


def test_a_half_precision_model_keeps_its_queries_in_half_precision(tiny_model):
    model = tiny_model(positional="none", rotary="abacus", softmax_length_scale=0.3).to(torch.bfloat16)
    tokens = model.to_tokens(["123+4567=", "9+99="])
    _, cache = model.run_with_cache(tokens, names_filter=act_name("q", 0, loop=0))
    assert cache[act_name("q", 0, loop=0)].dtype == torch.bfloat16
    assert model(tokens).isfinite().all()


def test_the_length_scale_is_one_parameter_per_head_and_the_config_checks_it():
    cfg = ModelConfig(**TINY_MODEL_DEFAULTS, softmax_length_scale=0.3)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "softmax_length_scale" not in ModelConfig(**TINY_MODEL_DEFAULTS).to_dict()  # old runs read the same
    from abacus_interp import LoopedTransformer
    model = LoopedTransformer(cfg)
    assert model.blocks[0].attn.length_scale.shape == (4, 1)
    torch.testing.assert_close(model.blocks[0].attn.length_scale, torch.full((4, 1), 0.3))
    for bad in (0, -1.0, math.inf, True, "big"):
        with pytest.raises(UserError, match="softmax_length_scale"):
            ModelConfig(**TINY_MODEL_DEFAULTS, softmax_length_scale=bad)
    with pytest.raises(UserError, match="looped family"):
        ModelConfig(**{**TINY_MODEL_DEFAULTS, "n_loops": 1}, family="lstm", softmax_length_scale=0.3)
