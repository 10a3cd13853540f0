"""`ModelConfig.list_items_read_alone`: every token of a sorting list but its closing "=" reads,
at every head, only its own item; the "=" and the answer read as before; with
`list_digits_read_across_items` its digits and closer still read the other items' digits (with
`list_digits_read_items_back`, those of the few items just before its own). Checked: the mask,
that an item's states do not depend on the items before it (with the digits meeting, its
symbols' states; one item back, the items it may not read, within one pass), both attention
paths, cached decoding, and the fields' round trips."""

from __future__ import annotations

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.masks import keep_list_items_apart
from abacus_interp.core.positions import abacus_indices
from abacus_interp.errors import UserError
from tests.test_answer_blind import SORTER as BLIND_SORTER

# the blind's small sorter, with the items kept apart instead of the blind
SORTER = {**BLIND_SORTER, "answer_hides_earlier_answer": False, "list_items_read_alone": True}


def sorter(**overrides) -> LoopedTransformer:
    return LoopedTransformer(ModelConfig(**{**SORTER, **overrides})).eval()


def test_a_list_token_reads_its_own_item_and_the_closing_equals_reads_the_list():
    # "a:21,b:3,c:654=bac": items "a:21," (0-4), "b:3," (5-8), "c:654=" (9-14); the answer at 15-17
    model = sorter()
    index = abacus_indices(model.to_tokens(["a:21,b:3,c:654=bac"]), model.digit_ids)
    mask = keep_list_items_apart(None, index, 18, 18, "cpu")[0, 0]  # [query key]
    reads = [mask[q].nonzero().squeeze(-1).tolist() for q in range(18)]
    assert reads[0] == [0] and reads[4] == [0, 1, 2, 3, 4]  # "a" itself; "," the whole item
    assert reads[5] == [5] and reads[8] == [5, 6, 7, 8]  # "b" does not read item a
    assert reads[13] == [9, 10, 11, 12, 13]  # the last item's leading digit
    assert reads[14] == list(range(15))  # "=" closes the list and reads all of it
    assert reads[16] == list(range(17))  # the answer reads as the causal mask lets it
    # a cached step (one query after 18 keys) gets the row of the whole sequence
    assert torch.equal(keep_list_items_apart(None, index, 1, 18, "cpu")[0, 0, 0], mask[17])


def test_an_items_states_do_not_depend_on_the_items_before_it():
    model = sorter()
    tokens = model.to_tokens(["a:21,b:3,c:654=", "d:98,e:7,c:654="])
    states = model(tokens, 3, return_type="state")  # [batch pos d_model]
    torch.testing.assert_close(states[0, 9:14], states[1, 9:14])  # item c at 9-13, after other items
    assert not torch.allclose(states[0, 14], states[1, 14])  # "=" reads the whole list
    plain = sorter(list_items_read_alone=False)
    plain.load_state_dict(model.state_dict())
    other = plain(tokens, 3, return_type="state")
    assert not torch.allclose(other[0, 9:14], other[1, 9:14])  # without the option item c reads a and b


def test_with_the_digits_meeting_a_digit_and_a_closer_also_read_the_other_items_digits():
    model = sorter(list_digits_read_across_items=True)
    index = abacus_indices(model.to_tokens(["a:21,b:3,c:654=bac"]), model.digit_ids)
    mask = keep_list_items_apart(None, index, 18, 18, "cpu", digits_meet=True)[0, 0]  # [query key]
    reads = [mask[q].nonzero().squeeze(-1).tolist() for q in range(18)]
    assert reads[9] == [9] and reads[10] == [9, 10]  # item c's label and colon: still only item c
    assert reads[11] == [2, 3, 7, 9, 10, 11]  # its first digit: the digits of a and b, then its own item
    assert reads[8] == [2, 3, 5, 6, 7, 8]  # b's closing ",": a's digits and its own item
    assert reads[14] == list(range(15)) and reads[16] == list(range(17))  # "=" and the answer as before
    assert torch.equal(keep_list_items_apart(None, index, 1, 18, "cpu", digits_meet=True)[0, 0, 0], mask[17])


def test_with_the_digits_meeting_an_items_symbols_still_do_not_depend_on_the_items_before_it():
    model = sorter(list_digits_read_across_items=True)
    tokens = model.to_tokens(["a:21,b:3,c:654=", "d:98,e:7,c:654="])
    states = model(tokens, 3, return_type="state")  # [batch pos d_model]
    torch.testing.assert_close(states[0, 9:11], states[1, 9:11])  # item c's label and colon
    assert not torch.allclose(states[0, 11:14], states[1, 11:14])  # its digits read those of a and b


def test_one_item_back_a_digit_and_a_closer_read_only_the_digits_of_the_item_before_their_own():
    model = sorter(list_digits_read_across_items=True, list_digits_read_items_back=1)
    index = abacus_indices(model.to_tokens(["a:21,b:3,c:654=bac"]), model.digit_ids)
    mask = keep_list_items_apart(None, index, 18, 18, "cpu", digits_meet=True, items_back=1)[0, 0]  # [query key]
    reads = [mask[q].nonzero().squeeze(-1).tolist() for q in range(18)]
    assert reads[11] == [7, 9, 10, 11]  # item c's first digit: b's digit, not a's, then its own item
    assert reads[8] == [2, 3, 5, 6, 7, 8]  # b's closing ",": a is one item back
    assert reads[9] == [9] and reads[14] == list(range(15))  # a label, and the "=", as before
    two_back = keep_list_items_apart(None, index, 18, 18, "cpu", digits_meet=True, items_back=2)[0, 0]
    full = keep_list_items_apart(None, index, 18, 18, "cpu", digits_meet=True)[0, 0]
    assert torch.equal(two_back, full)  # three items: two back is every earlier item
    assert torch.equal(keep_list_items_apart(None, index, 1, 18, "cpu", digits_meet=True, items_back=1)[0, 0, 0],
                       mask[17])


def test_one_item_back_what_an_item_reads_of_the_items_further_back_comes_only_through_the_loops():
    # item a differs, b and c are the same: c's digits read b's, which read a's one layer earlier
    tokens = sorter().to_tokens(["a:21,b:3,c:654=", "a:98,b:3,c:654="])
    one_layer = sorter(n_layers=1, list_digits_read_across_items=True, list_digits_read_items_back=1)
    states = one_layer(tokens, 1, return_type="state")  # [batch pos d_model]
    torch.testing.assert_close(states[0, 9:14], states[1, 9:14])  # one pass: item c never sees a
    assert not torch.allclose(states[0, 5:9], states[1, 5:9])  # item b's digit and closer read a's digits
    looped = one_layer(tokens, 2, return_type="state")
    assert not torch.allclose(looped[0, 11:14], looped[1, 11:14])  # the second loop brings a's digits through b's


WINDOW_RECIPE = {"number_heads": 1, "symbol_heads": 1, "n_heads": 4, "answer_hides_earlier_answer": True,
                 "answer_blind_spares_symbol_heads": True, "digit_window": 2, "rotary": "abacus_closers"}

# how the list's digits read across the kept-apart items
MEETINGS = {"apart": {}, "digits-meet": {"list_digits_read_across_items": True},
            "one-item-back": {"list_digits_read_across_items": True, "list_digits_read_items_back": 1}}


@pytest.mark.parametrize("head_kinds", [{}, WINDOW_RECIPE],
                         ids=["alone", "with-the-window-recipe"])
@pytest.mark.parametrize("meeting", MEETINGS.values(), ids=MEETINGS.keys())
def test_attention_paths_agree_with_the_items_apart(head_kinds, meeting):
    head_kinds = {**head_kinds, **meeting}
    tokens = sorter().to_tokens(["a:21,b:3,c:654=bac", "d:7,e:1=ed"])
    explicit = sorter(attention_backend="explicit", **head_kinds)
    fast = sorter(attention_backend="sdpa", **head_kinds)
    fast.load_state_dict(explicit.state_dict())
    torch.testing.assert_close(fast(tokens, 3), explicit(tokens, 3), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n_loops", [1, 3])
@pytest.mark.parametrize("meeting", MEETINGS.values(), ids=MEETINGS.keys())
def test_cached_decoding_equals_naive_decoding_with_the_items_apart(n_loops, meeting):
    model = sorter(symbol_heads=1, answer_hides_earlier_answer=True, answer_blind_spares_symbol_heads=True,
                   **meeting)
    prompts = ["a:21,b:3,c:654=", "d:7,e:1=", "b:9990,c:12="]  # of different lengths: decoding left-pads them
    assert model.generate(prompts, n_loops=n_loops, max_new_tokens=4) == \
        naive_generate(model, prompts, n_loops=n_loops, max_new_tokens=4)


def test_the_field_round_trips_is_left_out_at_its_default_and_must_be_a_bool():
    cfg = ModelConfig(**SORTER)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["list_items_read_alone"] is True
    assert "list_items_read_alone" not in ModelConfig(**{**SORTER, "list_items_read_alone": False}).to_dict()
    with pytest.raises(UserError, match="list_items_read_alone='yes': use true or false"):
        ModelConfig(**{**SORTER, "list_items_read_alone": "yes"})


def test_the_digits_meeting_round_trips_and_needs_the_items_apart():
    cfg = ModelConfig(**{**SORTER, "list_digits_read_across_items": True})
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "list_digits_read_across_items" not in ModelConfig(**SORTER).to_dict()
    with pytest.raises(UserError, match="set list_items_read_alone=true too"):
        ModelConfig(**{**SORTER, "list_items_read_alone": False, "list_digits_read_across_items": True})


def test_how_many_items_back_round_trips_and_needs_the_digits_meeting():
    meet = {**SORTER, "list_digits_read_across_items": True}
    cfg = ModelConfig(**{**meet, "list_digits_read_items_back": 2})
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["list_digits_read_items_back"] == 2
    assert "list_digits_read_items_back" not in ModelConfig(**meet).to_dict()
    for bad in (0, True, 1.5):
        with pytest.raises(UserError, match=r"list_digits_read_items_back=.*: use a whole number >= 1"):
            ModelConfig(**{**meet, "list_digits_read_items_back": bad})
    with pytest.raises(UserError, match="set list_digits_read_across_items=true too"):
        ModelConfig(**{**SORTER, "list_digits_read_items_back": 1})
