"""`ModelConfig.list_items_settle_after`: with the items kept apart, the list's tokens leave
every loop past the L-th with the state they entered it with, so the answer queries of later
loops read the list as it stood after L loops. Checked: the states per loop, that it is the
plain model with the list's states put back by hooks (to float error), loop by loop as in one
pass, both attention paths, cached and compiled decoding, what the cache and the analyses
refuse to decompose, the field's rules and a run trained with it."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import list_positions
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training import train
from analyses.circuit.analysis import circuit_reason
from analyses.comparisons.analysis import skip_reason as comparisons_skip_reason
from tests.conftest import tiny_sort_run
from tests.test_list_items_apart import SORTER, WINDOW_RECIPE

PROMPTS = ["a:21,b:3,c:654=bac", "d:7,e:1=ed"]
SORT_TASK = get_task("sorting", max_numbers=3, max_digits=3, label_pool=8)


def sorter(**overrides) -> LoopedTransformer:
    return LoopedTransformer(ModelConfig(**{**SORTER, **overrides})).eval()


def states_per_loop(model, tokens, n_loops: int) -> list[torch.Tensor]:
    _, cache = model.run_with_cache(tokens, n_loops, names_filter=lambda name: name.endswith("hook_state_post"))
    return [cache[act_name("state_post", loop=t)] for t in range(n_loops)]


def test_list_positions_are_the_items_and_not_the_closing_equals_or_the_answer():
    model = sorter()
    index = model.attention_index(model.to_tokens(["a:21,b:3,c:654=bac"]))
    assert list_positions(index)[0].nonzero().squeeze(-1).tolist() == list(range(14))  # "=" is 14


def test_the_lists_states_stop_after_the_settling_loop_and_the_answers_go_on():
    model = sorter(n_loops=4, list_items_settle_after=2)
    states = states_per_loop(model, model.to_tokens(PROMPTS[:1]), 4)  # [batch pos d_model] each
    for later in states[2:]:
        torch.testing.assert_close(later[0, :14], states[1][0, :14], rtol=0, atol=0)
    assert not torch.allclose(states[1][0, :14], states[0][0, :14])  # loop 2 still updates the list
    assert all(not torch.allclose(a[0, 14:], b[0, 14:]) for a, b in zip(states[1:-1], states[2:], strict=True))  # "=", answer


def hold_by_hooks(plain, tokens, n_loops: int, settle: int) -> torch.Tensor:
    """The plain model's logits with each list token's state put back, from loop `settle` on,
    to the one it entered the loop with: what list_items_settle_after computes."""
    listed = list_positions(plain.attention_index(tokens))[..., None]  # [batch pos 1]
    left = {}

    def hold(state, hook, t):
        if t >= settle:
            state = torch.where(listed, left[t - 1], state)
        left[t] = state
        return state

    hooks = [(act_name("state_post", loop=t), partial(hold, t=t)) for t in range(n_loops)]
    return plain.run_with_hooks(tokens, n_loops, fwd_hooks=hooks)


@pytest.mark.parametrize("settle", [1, 3])
def test_settling_is_the_plain_model_with_the_lists_states_put_back(settle):
    model = sorter(list_items_settle_after=settle)
    plain = sorter()
    plain.load_state_dict(model.state_dict())
    tokens = model.to_tokens(PROMPTS)
    torch.testing.assert_close(model(tokens, 4), hold_by_hooks(plain, tokens, 4, settle), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model(tokens, settle), plain(tokens, settle), rtol=0, atol=0)  # not before it


def test_a_hold_after_the_last_but_one_loop_changes_no_answer():
    """Held after L loops, the list's keys and values are still those of loop L+1: at 4 loops a
    hold after 3 changes no answer (the "=" and the labels after it), one after 1 or 2 does."""
    plain = sorter()
    tokens = plain.to_tokens(PROMPTS[:1])
    answer = plain(tokens, 4)[0, 14:]  # [pos d_vocab]: from the closing "=" on
    for settle, changes in ((1, True), (2, True), (3, False)):
        model = sorter(list_items_settle_after=settle)
        model.load_state_dict(plain.state_dict())
        assert torch.allclose(model(tokens, 4)[0, 14:], answer, rtol=0, atol=1e-6) != changes, settle


@pytest.mark.parametrize("head_kinds", [{}, WINDOW_RECIPE], ids=["alone", "with-the-window-recipe"])
def test_attention_paths_agree_with_the_items_settled(head_kinds):
    tokens = sorter().to_tokens(PROMPTS)
    explicit = sorter(attention_backend="explicit", list_items_settle_after=1, **head_kinds)
    fast = sorter(attention_backend="sdpa", list_items_settle_after=1, **head_kinds)
    fast.load_state_dict(explicit.state_dict())
    torch.testing.assert_close(fast(tokens, 3), explicit(tokens, 3), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n_loops", [2, 3])
def test_cached_decoding_equals_naive_decoding_with_the_items_settled(n_loops):
    model = sorter(list_items_settle_after=1, symbol_heads=1, answer_hides_earlier_answer=True,
                   answer_blind_spares_symbol_heads=True)
    # no digits in the answer, as a trained sorter writes: a digit there would start a number and
    # move where the list ends (masks.answer_positions), for a cached pass and a fresh one alike
    with torch.no_grad():
        model.b_U[model.digit_ids] = -1e4
    prompts = ["a:21,b:3,c:654=", "d:7,e:1=", "b:9990,c:12="]  # of different lengths: decoding left-pads them
    cached = model.generate(prompts, n_loops=n_loops, max_new_tokens=4)
    assert cached == naive_generate(model, prompts, n_loops=n_loops, max_new_tokens=4)
    assert len(set(cached)) > 1 and not any(c.isdigit() for answer in cached for c in answer)


def test_the_compiled_loop_holds_the_list_as_the_eager_one_does():
    model = sorter(list_items_settle_after=1)
    tokens = model.to_tokens(PROMPTS)
    eager = model(tokens, 3)
    model.compile_loops("aot_eager")
    torch.testing.assert_close(model(tokens, 3), eager, rtol=1e-6, atol=1e-6)


def test_loop_by_loop_is_one_pass_and_a_later_start_needs_the_state():
    model = sorter(list_items_settle_after=1)
    tokens = model.to_tokens(PROMPTS)
    inputs, index = model.embed(tokens), model.attention_index(tokens)
    state = None
    for t in range(4):
        state = model.run_loops(inputs, range(t, t + 1), state=state, index=index)
    torch.testing.assert_close(state, model.run_loops(inputs, range(4), index=index), rtol=0, atol=0)
    with pytest.raises(ValueError, match="run_loops from loop index 2 needs `state`"):
        model.run_loops(inputs, range(2, 4), index=index)


def test_the_cache_decomposes_only_up_to_the_hold_and_the_analyses_say_why_they_skip():
    model = sorter(n_loops=3, list_items_settle_after=1)
    _, cache = model.run_with_cache(model.to_tokens(PROMPTS[:1]), 3)
    inside = cache.decompose_resid(loop=1, layer=1)  # the layers of loop 2 before the hold
    torch.testing.assert_close(inside.sum(0), cache.resid_pre(1, 1), rtol=1e-5, atol=1e-5)
    for loop, layer in ((1, 2), (2, 0)):  # loop 2's output, and past it
        with pytest.raises(ValueError, match="no stack of writes sums to a residual past that"):
            cache.decompose_resid(loop=loop, layer=layer)
    assert "list_items_settle_after" in circuit_reason(model, None)
    assert "list_items_settle_after=1" in comparisons_skip_reason(model, SORT_TASK)


def test_the_field_round_trips_is_left_out_unset_and_needs_the_items_apart():
    cfg = ModelConfig(**{**SORTER, "list_items_settle_after": 2})
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["list_items_settle_after"] == 2
    assert "list_items_settle_after" not in ModelConfig(**SORTER).to_dict()
    for bad in (0, True, 1.5):
        with pytest.raises(UserError, match=r"list_items_settle_after=.*: use a whole number >= 1"):
            ModelConfig(**{**SORTER, "list_items_settle_after": bad})
    with pytest.raises(UserError, match="set list_items_read_alone=true too"):
        ModelConfig(**{**SORTER, "list_items_read_alone": False, "list_items_settle_after": 1})


def test_a_run_trains_with_the_items_settled_and_saves_the_field(tmp_path):
    run_cfg = tiny_sort_run("train.steps=6", "train.log_every=3", "model.n_loops=3", "model.list_items_settle_after=1")
    train(run_cfg, tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())["model"]
    assert saved["list_items_settle_after"] == 1
    losses = [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) >= 2 and all(loss == loss and loss > 0 for loss in losses)
