"""Closers, the token right after a number's last digit (a sorting list's separator, "="):
with `ModelConfig.rotary="abacus_closers"` one turns as the digit past its number's last, so it
meets the number's leading digit at distance 1 whatever the number's length, while masks still
read it as a non-digit; with `digit_window` digits and closers see only the digits near them on
the Abacus index. Cached decoding with both is checked in tests/test_decoding.py
(POSITION_SCHEMES, "rotary-closers" and "digit-window")."""

from __future__ import annotations

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import hide_far_digits
from abacus_interp.core.positions import abacus_indices, closer_indices
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task
from abacus_interp.training.losses import _abacus_offsets

TASK = get_task("sorting", max_numbers=3, max_digits=4, label_pool=8, random_labels=True)
SORTER = dict(vocab=TASK.vocab, d_model=24, n_heads=3, n_layers=1, n_loops=2, max_seq_len=96,
              positional="none", rotary="abacus_closers", symbol_heads=1, init_std=0.3)


def test_each_closer_takes_the_index_past_its_numbers_last_digit():
    model = LoopedTransformer(ModelConfig(**SORTER)).eval()
    tokens = model.to_tokens(["b:1204,d:7,g:653=db"])
    for offset in (0, 9):
        index = abacus_indices(tokens, model.digit_ids, offset)[0]
        o = offset
        assert index.tolist() == [0, 0, o + 1, o + 2, o + 3, o + 4, 0, 0, 0, o + 1, 0, 0, 0, o + 1, o + 2, o + 3,
                                  0, 0, 0]
        # "," after 4 digits, "," after 1, "=" after 3; labels, ":" and the answer unchanged
        assert closer_indices(index[None])[0].tolist() == [0, 0, o + 1, o + 2, o + 3, o + 4, o + 5, 0, 0, o + 1,
                                                           o + 2, 0, 0, o + 1, o + 2, o + 3, o + 4, 0, 0]


@pytest.mark.parametrize("digits", [1, 5, 20, 60])
def test_the_leading_digit_is_one_below_its_closer_at_any_length(digits):
    model = LoopedTransformer(ModelConfig(**SORTER)).eval()
    number = "".join(str((7 * i + 3) % 9 + 1) for i in range(digits))
    tokens = model.to_tokens([f"a:{number},b:12="])
    turned = closer_indices(abacus_indices(tokens, model.digit_ids, 13))[0]
    closer = 2 + digits  # "a", ":", the digits, then ","
    assert turned[closer] - turned[closer - 1] == 1
    assert turned[closer] - turned[2] == digits  # and the units digit `digits` below it


def test_only_scores_that_touch_a_closer_change():
    """The same weights under plain Abacus rotary and under closers: a score between two
    tokens that are not closers is the same; scores with a closer on one side change."""
    closers = LoopedTransformer(ModelConfig(**SORTER)).eval()
    plain = LoopedTransformer(ModelConfig(**{**SORTER, "rotary": "abacus"})).eval()
    plain.load_state_dict(closers.state_dict())
    tokens = closers.to_tokens(["b:1204,d:7,g:653=db", "a:98,c:5540="])
    index = abacus_indices(tokens, closers.digit_ids)  # [batch pos]
    is_closer = closer_indices(index) != index  # [batch pos]
    # loop 1 reads loop 0's output, so every token's state differs: compare the first loop's scores
    name = act_name("attn_scores", 0, loop=0)
    _, with_closers = closers.run_with_cache(tokens, names_filter=name)
    _, without = plain.run_with_cache(tokens, names_filter=name)
    a, b = with_closers[name], without[name]
    touched = (is_closer[:, None, :, None] | is_closer[:, None, None, :]).expand_as(a)
    finite = a.isfinite() & b.isfinite()
    torch.testing.assert_close(a[finite & ~touched], b[finite & ~touched])
    assert (a[finite & touched] - b[finite & touched]).abs().max() > 1e-2
    assert is_closer.sum() == 5


def test_the_masks_still_read_a_closer_as_a_symbol():
    """The symbol head (the last head) sees labels, separators and "=", closers included."""
    model = LoopedTransformer(ModelConfig(**SORTER)).eval()
    tokens = model.to_tokens(["b:1204,d:7,g:653=db"])
    index = abacus_indices(tokens, model.digit_ids)[0]
    _, cache = model.run_with_cache(tokens, n_loops=2)
    pattern = cache[act_name("pattern", 0, loop=0)][0, 2, -1]  # [key] of the symbol head at the last query
    assert ((pattern > 0) == (index == 0)).all()


def test_closers_config_round_trips_draws_offsets_and_rejects_unknown_rotaries():
    cfg = ModelConfig(**SORTER)
    assert cfg.attends_by_index and ModelConfig.from_dict(cfg.to_dict()) == cfg
    trained = cfg.replace(abacus_max_offset=30, abacus_offset_mode="example")
    offsets = _abacus_offsets(trained, 64, torch.Generator().manual_seed(0), slice(None))
    assert offsets.shape == (64,) and offsets.max() > 0  # the random offset reaches closers too
    with pytest.raises(UserError, match="abacus_closers"):
        ModelConfig(**{**SORTER, "rotary": "closers"})


def test_the_digit_window_keeps_digits_and_closers_to_nearby_digits():
    index = torch.tensor([[0, 0, 1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 0, 0]])  # "b:1204,d:7,g:653=d"
    for offset in (0, 7):
        shifted = torch.where(index > 0, index + offset, index)
        mask = hide_far_digits(None, shifted, 18, 18, "cpu", window=1)[0, 0]  # [query key]
        sees = {q: mask[q].nonzero().squeeze(-1).tolist() for q in range(18)}
        assert sees[6] == [0, 1, 5, 6]  # "," of 1204 (index 5): its leading digit 4 and no lower one
        assert sees[10] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]  # "," of 7 (index 2): digits of index 1-3
        assert sees[14] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14]  # digit 5 of 653 (index 2)
        assert sees[16] == [0, 1, 4, 5, 6, 7, 8, 10, 11, 12, 15, 16]  # "=" of 653 (index 4)
        assert sees[7] == list(range(8)) and sees[17] == list(range(18))  # a label, the answer: everything
    # heads of several kinds keep their own rows: the window only hides more
    kinds = torch.rand(1, 3, 18, 18, generator=torch.Generator().manual_seed(0)) > 0.3
    kinds |= torch.eye(18, dtype=torch.bool)  # a query sees itself
    narrowed = hide_far_digits(kinds, index, 18, 18, "cpu", window=1)
    assert (narrowed <= kinds).all() and (narrowed < kinds).any()


def test_a_row_the_window_empties_reads_itself():
    """A head that reads one far digit and not itself (an exclusive offset head) keeps a key."""
    index = torch.tensor([[1, 2, 3, 4, 0, 1]])  # "1234," then a digit of index 1
    only_far_digit = torch.zeros(1, 1, 6, 6, dtype=torch.bool)
    only_far_digit[0, 0, 5, 3] = True  # the last digit (index 1) reads index 4 only
    only_far_digit[0, 0, :5] = torch.eye(6, dtype=torch.bool)[:5]
    narrowed = hide_far_digits(only_far_digit, index, 6, 6, "cpu", window=1)[0, 0]
    assert narrowed[5].nonzero().squeeze(-1).tolist() == [5]
    model = LoopedTransformer(ModelConfig(**{**SORTER, "offset_heads": (1,), "offset_heads_exclusive": True,
                                             "digit_window": 0})).eval()
    assert model(model.to_tokens(["b:1204,d:7,g:653=db"])).isfinite().all()


def test_a_windowed_model_reads_nothing_from_far_digits():
    """Changing a digit far below a closer changes nothing at that closer in the first loop."""
    model = LoopedTransformer(ModelConfig(**{**SORTER, "digit_window": 1})).eval()
    tokens = model.to_tokens(["b:1204,d:7=", "b:9204,d:7="])  # the units of the first number differ
    name = act_name("resid_post", 0, loop=0)
    _, cache = model.run_with_cache(tokens, names_filter=name)
    state = cache[name]  # [batch pos d_model]
    closer = 6  # the "," of 1204: it sees digits of index 4-6 only
    torch.testing.assert_close(state[0, closer], state[1, closer])
    assert not torch.allclose(state[0, 7], state[1, 7])  # the label after it sees every digit


def test_digit_window_config_checks():
    assert ModelConfig(**{**SORTER, "digit_window": 2}).attends_by_index
    for bad in (-1, True):
        with pytest.raises(UserError, match="digit_window"):
            ModelConfig(**{**SORTER, "digit_window": bad})
    assert "digit_window" not in ModelConfig(**SORTER).to_dict()  # runs saved before it read unchanged
