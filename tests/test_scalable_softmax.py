"""The scalable softmax (`ModelConfig.softmax_length_scale`): each head's scores times
s_h * ln(keys its query sees). Both attention paths and cached decoding are checked with it in
tests/test_decoding.py ("scalable-softmax") and tests/test_multiplier_heads.py ("scalable
softmax"); here the key counts, the planted peak it keeps, and the config."""

from __future__ import annotations

import math

import pytest
import torch

from abacus_interp import ModelConfig
from abacus_interp.core.attention import HeadKinds, attention_mask, log_visible_keys
from abacus_interp.core.hooks import act_name
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


def test_a_planted_peak_keeps_its_height_as_the_distractors_grow_in_number(tiny_model):
    """One key the query matches, among 10 or 40 keys it does not: the plain softmax puts less
    on the match in the longer sequence, the scaled one about as much (planted through the
    query bias and the keys' hook, read off the model's own pattern)."""
    def weight_on_the_match(scale, n_keys):
        model = tiny_model(n_heads=1, d_head=8, n_layers=1, n_loops=1, positional="none", max_seq_len=64,
                           softmax_length_scale=scale, attention_backend="explicit")
        attn = model.blocks[0].attn
        with torch.no_grad():
            attn.W_Q.zero_()
            attn.b_Q.fill_(1.0)  # the same query at every position
        planted = torch.full((8,), 4.0 * math.sqrt(8) / 8)  # q . k / sqrt(d_head) = 4 where q is all ones

        def match_the_first_key(k, hook):  # [batch pos head d_head]
            k = torch.zeros_like(k)
            k[:, 0, 0] = planted
            return k

        name = act_name("pattern", 0, loop=0)
        tokens = model.to_tokens(["1" * n_keys])
        hook_k = act_name("k", 0, loop=0)
        stored = {}
        with torch.no_grad():
            model.run_with_hooks(tokens, fwd_hooks=[(hook_k, match_the_first_key),
                                                    (name, lambda p, hook: stored.setdefault("p", p))])
        return float(stored["p"][0, 0, -1, 0])  # [batch head query key]: the last query, the first key

    plain = [weight_on_the_match(None, n) for n in (10, 40)]
    scaled = [weight_on_the_match(1.0, n) for n in (10, 40)]
    assert plain[1] < plain[0] - 0.2  # 0.86 -> 0.58
    assert scaled[1] > scaled[0] - 0.01  # the factor grows with ln(n): the match keeps its share


def test_the_length_scale_is_one_parameter_per_head_and_the_config_checks_it():
    cfg = ModelConfig(**TINY_MODEL_DEFAULTS, softmax_length_scale=0.3)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "softmax_length_scale" not in ModelConfig(**TINY_MODEL_DEFAULTS).to_dict()  # old runs read the same
    from abacus_interp import LoopedTransformer
    model = LoopedTransformer(cfg)
    assert model.blocks[0].attn.length_scale.shape == (4, 1)
    torch.testing.assert_close(model.blocks[0].attn.length_scale, torch.full((4, 1), 0.3))
    for bad in (0, -1.0, True, "big"):
        with pytest.raises(UserError, match="softmax_length_scale"):
            ModelConfig(**TINY_MODEL_DEFAULTS, softmax_length_scale=bad)
