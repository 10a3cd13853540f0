"""Leading digits that read only one another (model.leading_digits): each digit's depth below its
number's leading digit, the mask that hides the deep digits from the leading ones and the
closer, no change at all for numbers no longer than the option, an item's summary that does not
move when its deep digits do, and cached decoding equal to the naive one."""

from __future__ import annotations

import random

import pytest
import torch

from abacus_interp.checkpoints import load_model
from abacus_interp.core.decoding import generate, naive_generate
from abacus_interp.core.families import build_model
from abacus_interp.core.hooks import hook_name
from abacus_interp.core.masks import digit_depth, hide_deep_digits
from abacus_interp.core.positions import abacus_indices, digit_table
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training import apply_overrides, get_preset

TASK = get_task("sorting", max_numbers=5, max_digits=5, label_pool=26, random_labels=True)
APART_FT = "checkpoints/extrap-sort-apart-ft"


def indices(text: str) -> torch.Tensor:
    tokens = torch.tensor([TASK.vocab.encode(text)])
    return abacus_indices(tokens, digit_table(TASK.vocab.digit_ids))


def with_leading_digits(leading: int | None):
    base = load_model(APART_FT)
    model = build_model(base.cfg.replace(leading_digits=leading)).eval()
    model.load_state_dict(base.state_dict())
    return model


def test_a_digit_s_depth_counts_down_from_its_number_s_leading_digit():
    # "a:123,b:45=" with 123 written LSD first: 3 (units), 2, 1 (leading)
    assert digit_depth(indices("a:123,b:45=")).tolist() == [[0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0]]


def test_the_leading_digits_and_the_closer_do_not_read_the_deep_digits():
    index = indices("a:1234567,b:9=")  # 7 digits at positions 2..8, the units first; "," at 9
    mask = hide_deep_digits(None, index, index.shape[1], index.shape[1], "cpu", leading=3)[0, 0]  # [query key]
    deep, top = [2, 3, 4, 5], [6, 7, 8]  # depth 6..3 and 2..0
    for query in [*top, 9]:
        assert not mask[query, deep].any() and mask[query, [p for p in top if p <= query]].all()
    for query in deep:  # a deep digit still reads what it did, causally
        assert mask[query, 2 : query + 1].all()
    # the "=" closes the last number: it too reads every key but the deep digits, of any number
    assert mask[13, :14].tolist() == [p not in deep for p in range(14)]


def test_numbers_no_longer_than_the_option_lose_nothing():
    plain, leading = with_leading_digits(None), with_leading_digits(5)
    prompts = [e.prompt + e.target for e in TASK.sample(16, random.Random(2))]
    for text in prompts:
        tokens = plain.to_tokens(text)
        with torch.no_grad():
            assert torch.equal(plain(tokens), leading(tokens))


def test_an_item_s_summary_does_not_move_when_its_deep_digits_do():
    """Two lists of 20-digit numbers equal in their 4 leading digits and different below: with
    leading_digits=4 every loop's state at each leading digit and closer is the same, and so the
    comparison of the two items; without it, not."""
    rng = random.Random(0)
    top = [rng.randrange(1000, 10000) for _ in range(3)]
    lists = [[t * 10**16 + rng.randrange(10**16) for t in top] for _ in range(2)]
    texts = [TASK.make(*values, labels="cfk").prompt for values in lists]
    for leading, same in ((4, True), (None, False)):
        model = with_leading_digits(leading)
        states = []
        for text in texts:
            tokens = model.to_tokens(text)
            with torch.no_grad():
                _, cache = model.run_with_cache(tokens)
            depth = digit_depth(model.attention_index(tokens))[0]
            index = abacus_indices(tokens, model.digit_table)[0]
            kept = ((index > 0) & (depth < 4)) | ((index == 0) & (torch.roll(index, 1) > 0))  # leading digits, closers
            states.append(torch.stack([cache[hook_name("hook_state_post", loop=t)][0, kept] for t in range(model.cfg.n_loops)]))
        assert torch.allclose(states[0], states[1], atol=1e-5) == same


def test_cached_decoding_equals_naive_decoding_with_leading_digits():
    model = with_leading_digits(3)
    rng = random.Random(4)
    prompts = [e.prompt for e in TASK.plain().sample(8, rng, min_digits=6, max_digits=12)]
    assert generate(model, prompts) == naive_generate(model, prompts)


def test_the_option_is_checked():
    with pytest.raises(UserError, match="leading_digits=0"):
        apply_overrides(get_preset("extrap-sort-window"), ["model.leading_digits=0"])
    with pytest.raises(UserError, match="sorting task only"):
        apply_overrides(get_preset("demo-add"), ["model.leading_digits=5"])
