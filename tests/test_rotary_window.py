"""Rotary attention on the Abacus index and a local window on it: relative positions only,
keys outside the window invisible, the attention paths agreeing, and the window bounding
how far information travels per loop."""

from __future__ import annotations

import pytest
import torch

from abacus_interp import ModelConfig
from abacus_interp.core.masks import attention_mask
from abacus_interp.core.model import act_name
from abacus_interp.core.positions import Rotary, abacus_indices
from tests.conftest import ADDITION_VOCAB

WINDOWED = dict(positional="none", rotary="abacus", abacus_window=1, init_std=0.3)


def test_rotary_scores_depend_on_index_differences_only():
    q, k = torch.randn(2, 7, 3, 16), torch.randn(2, 7, 3, 16)
    index = torch.randint(0, 40, (2, 7))

    def scores(idx):
        rot = Rotary.of(idx, d_head=16, base=1000.0)
        return torch.einsum("bqhe,bkhe->bhqk", rot.apply(q), rot.apply(k))

    torch.testing.assert_close(scores(index + 23), scores(index), atol=1e-4, rtol=1e-4)
    # and the rotation is not the identity: other differences give other scores
    assert not torch.allclose(scores(index * 2), scores(index), atol=1e-3)
    # a rotation keeps every vector's length
    rot = Rotary.of(index, 16, 1000.0)
    torch.testing.assert_close(rot.apply(q).norm(dim=-1), q.norm(dim=-1))


def test_abacus_offset_leaves_digit_to_digit_scores_unchanged(tiny_model):
    """With rotary positions and no position table, shifting every digit's index (the
    training offset) changes no score between two digits."""
    model = tiny_model(positional="none", rotary="abacus", init_std=0.3)
    tokens = model.to_tokens(["4321+987=", "15+62751="])
    name = act_name("attn_scores", 0, loop=0)
    _, base = model.run_with_cache(tokens, names_filter=name)
    _, shifted = model.run_with_cache(tokens, names_filter=name, abacus_offset=17)
    digit = abacus_indices(tokens, model.digit_ids) > 0  # [batch pos]
    pairs = (digit[:, None, :, None] & digit[:, None, None, :]) & base[name].isfinite()  # [batch head query key]
    assert pairs.sum() > 20
    torch.testing.assert_close(shifted[name][pairs], base[name][pairs], atol=1e-5, rtol=1e-5)
    # the offset does change scores between a digit and "+" or "=" (index 0, not shifted)
    assert not torch.allclose(shifted[name][~pairs & base[name].isfinite()], base[name][~pairs & base[name].isfinite()])


@pytest.mark.parametrize("window", [0, 1, 2])
def test_keys_outside_the_window_get_zero_attention(tiny_model, window):
    model = tiny_model(**{**WINDOWED, "abacus_window": window})
    tokens = model.to_tokens(["4321+987=79312", "15+62751=76766"])
    index = abacus_indices(tokens, model.digit_ids)  # [batch pos]
    _, cache = model.run_with_cache(tokens, n_loops=2)
    n = tokens.shape[1]
    far = (index[:, :, None] - index[:, None, :]).abs() > window  # [batch query key]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    itself = torch.eye(n, dtype=torch.bool)
    hidden = (far & ~itself)[:, None]  # [batch 1 query key]
    for loop in range(2):
        for layer in range(model.cfg.n_layers):
            pattern = cache[act_name("pattern", layer, loop=loop)]
            scores = cache[act_name("attn_scores", layer, loop=loop)]
            assert (pattern.masked_select(hidden) == 0).all()
            assert torch.isneginf(scores.masked_select(hidden)).all()
            # inside the window (and causal), attention is not masked
            seen = (~far & causal)[:, None].expand_as(pattern)
            assert (pattern[seen] > 0).all()


def test_attention_paths_agree_with_rotary_and_window(tiny_model):
    tokens = tiny_model().to_tokens(["4321+987=79312", "15+62751=76766", "9+9=81"])
    explicit = tiny_model(**WINDOWED, attention_backend="explicit")
    sdpa = tiny_model(**WINDOWED, attention_backend="sdpa")
    sdpa.load_state_dict(explicit.state_dict())
    torch.testing.assert_close(sdpa(tokens, 4), explicit(tokens, 4), atol=1e-5, rtol=1e-5)


def test_the_window_bounds_how_far_a_digit_reaches_per_loop(tiny_model):
    """With window w, K layers and R loops, a digit's change reaches only positions whose
    Abacus index is within w*K*R of its own; under causal attention the reach toward higher
    indices (later in each number) is exactly that."""
    model = tiny_model(**WINDOWED)  # w = 1, K = 2
    a = "111111111111+2222222222222222="
    b = "111911111111+2222222222222222="  # the first operand's 4th digit changed
    tokens = model.to_tokens([a, b])
    index = abacus_indices(tokens, model.digit_ids)[0]
    second_operand = (torch.arange(len(a)) > a.index("+")) & (index > 0)
    for loops in (1, 2, 3):
        logits = model(tokens, loops)
        changed = (logits[0] - logits[1]).abs().amax(-1) > 1e-6  # [pos]
        reach = 1 * model.cfg.n_layers * loops
        out_of_reach = second_operand & ((index - 4).abs() > reach)
        upward = second_operand & (index >= 4) & (index <= 4 + reach)
        assert not changed[out_of_reach].any(), f"{loops} loops reached past {reach} indices"
        assert changed[upward].all(), f"{loops} loops did not reach {reach} indices up"


def test_run_loops_without_the_index_is_an_error(tiny_model):
    model = tiny_model(**WINDOWED)
    tokens = model.to_tokens(["12+34="])
    with pytest.raises(ValueError, match="attention_index"):
        model.run_loops(model.embed(tokens), range(2))
    state = model.run_loops(model.embed(tokens), range(2), index=model.attention_index(tokens))
    torch.testing.assert_close(model.unembed(state), model(tokens, 2))
    assert tiny_model().attention_index(tokens) is None  # nothing to pass for other models


def test_attention_mask_without_a_window_is_unchanged():
    valid = torch.tensor([[False, True, True, True]])
    plain = attention_mask(valid, 4, 4, "cpu")
    expected = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [0, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(plain[0, 0], expected)
    assert attention_mask(None, 4, 4, "cpu") is None


def test_config_validation_and_round_trip():
    cfg = ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=2, rotary="abacus", abacus_window=2)
    assert cfg.attends_by_index
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    # defaults are left out of the stored config, so runs from before these fields resume
    plain = ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=2).to_dict()
    assert not {"rotary", "rotary_base", "abacus_window"} & set(plain)
    with pytest.raises(ValueError, match="even"):
        ModelConfig(vocab=ADDITION_VOCAB, d_model=30, n_heads=2, rotary="abacus")
    with pytest.raises(ValueError, match="abacus_window"):
        ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=2, abacus_window=-1)
    with pytest.raises(ValueError, match="rotary"):
        ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=2, rotary="sequence")
    with pytest.raises(ValueError, match="looped family"):
        ModelConfig(vocab=ADDITION_VOCAB, d_model=32, n_heads=2, family="lstm", n_loops=1, abacus_window=1)
