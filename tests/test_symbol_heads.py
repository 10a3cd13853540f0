"""Symbol heads (`ModelConfig.symbol_heads`): a head that sees only the tokens that are not
digits (a sorting list's labels and separators, "=", the answer so far) and itself, so no
number of digits dilutes what it reads; and number heads (`ModelConfig.number_heads`): a head
that sees only its query's own number and the label before it, whatever the count of numbers.
Both attention paths and cached decoding are checked with them in
tests/test_multiplier_heads.py (HEAD_LAYOUTS, "four kinds" and "five kinds")."""

from __future__ import annotations

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import HeadKinds, attention_mask, number_group
from abacus_interp.core.positions import abacus_indices
from abacus_interp.core.tokens import PAD_ID
from abacus_interp.errors import UserError
from abacus_interp.tasks import get_task

TASK = get_task("sorting", max_numbers=3, max_digits=4, label_pool=8, random_labels=True)
# 3 heads: two over the whole list, one symbol head
SORTER = dict(vocab=TASK.vocab, d_model=24, n_heads=3, n_layers=1, n_loops=2, max_seq_len=96,
              positional="none", rotary="abacus", symbol_heads=1, init_std=0.3)


def test_a_symbol_head_sees_every_non_digit_before_it_and_no_digit():
    model = LoopedTransformer(ModelConfig(**SORTER)).eval()
    examples = [TASK.make(4021, 7, 356, labels="bdg"), TASK.make(98765, 1, labels="ac")]
    tokens = model.to_tokens([e.prompt + e.target for e in examples])
    index = abacus_indices(tokens, model.digit_ids)  # [batch pos]
    n = tokens.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    itself = torch.eye(n, dtype=torch.bool)
    valid = tokens != PAD_ID
    sees = ((causal & (index == 0)[:, None, :] & valid[:, None, :]) | itself)  # [batch query key]
    _, cache = model.run_with_cache(tokens, n_loops=2)
    for loop in range(2):
        pattern = cache[act_name("pattern", 0, loop=loop)]  # [batch head query key]
        real = valid[:, :, None] & valid[:, None, :]
        assert (pattern[:, 2][~sees & real] == 0).all()
        assert (pattern[:, 2][sees & real] > 0).all()
        assert (pattern[:, 0][causal & real & (index > 0)[:, None, :]] > 0).all()  # the others see digits


def test_the_symbol_mask_ignores_the_abacus_offset_and_sits_between_windowed_and_multiplier_heads():
    index = torch.tensor([[0, 0, 1, 2, 0, 0, 1, 0, 0]])  # "a:12,b:3=" and an answer label
    for offset in (0, 9):
        shifted = torch.where(index > 0, index + offset, index)
        mask = attention_mask(None, 9, 9, "cpu", shifted, heads=HeadKinds(3, (0,), symbol_heads=1))
        assert mask[0, 2, 8].nonzero().squeeze(-1).tolist() == [0, 1, 4, 5, 7, 8]
        assert mask[0, 1, 8].all()  # the windowed head (no window): everything before it
    kinds = HeadKinds(5, (1,), multiplier_heads=1, symbol_heads=2)
    assert [kinds.kind_of(h) for h in range(5)] == ["offset +1", "windowed", "symbol", "symbol", "multiplier"]


def test_symbol_head_config_checks_and_round_trip():
    cfg = ModelConfig(**SORTER)
    assert cfg.attends_by_index and cfg.symbol_heads == 1
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "symbol_heads" not in ModelConfig(**{**SORTER, "symbol_heads": 0}).to_dict()
    with pytest.raises(UserError, match="more than n_heads=3"):
        ModelConfig(**{**SORTER, "symbol_heads": 2, "offset_heads": (0, 1)})
    with pytest.raises(UserError, match="symbol_heads"):
        ModelConfig(**{**SORTER, "symbol_heads": -1})


def test_number_group_makes_each_item_of_a_list_one_group():
    # "a:12,b:3=" then the answer "ba": "a:12," and "b:3=" are items, the answer one group more
    index = torch.tensor([[0, 0, 1, 2, 0, 0, 0, 1, 0, 0, 0]])
    assert number_group(index).tolist() == [[1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]]
    # a whole sorting prompt, "b:1204,d:7,g:653=", written out
    model = LoopedTransformer(ModelConfig(**SORTER))
    prompt_index = abacus_indices(model.to_tokens(["b:1204,d:7,g:653="]), model.digit_ids)
    assert number_group(prompt_index).tolist() == [[1] * 7 + [2] * 4 + [3] * 6]
    # left padding (index 0) joins the first number's group; the mask hides it as padding
    assert number_group(torch.tensor([[0, 0, 0, 1, 0, 1]])).tolist() == [[1, 1, 1, 1, 1, 2]]


def test_a_number_head_sees_its_own_number_and_label_and_nothing_else():
    model = LoopedTransformer(ModelConfig(**{**SORTER, "symbol_heads": 0, "number_heads": 1})).eval()
    examples = [TASK.make(4021, 7, 356, labels="bdg"), TASK.make(98765, 1, labels="ac")]
    tokens = model.to_tokens([e.prompt + e.target for e in examples])
    index = abacus_indices(tokens, model.digit_ids)  # [batch pos]
    n = tokens.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    valid = tokens != PAD_ID
    group = number_group(index)
    sees = (causal & (group[:, :, None] == group[:, None, :]) & valid[:, None, :]) | torch.eye(n, dtype=torch.bool)
    _, cache = model.run_with_cache(tokens, n_loops=2)
    real = valid[:, :, None] & valid[:, None, :]
    for loop in range(2):
        pattern = cache[act_name("pattern", 0, loop=loop)]  # [batch head query key]
        assert (pattern[:, 2][~sees & real] == 0).all()
        assert (pattern[:, 2][sees & real] > 0).all()
    # the last digit of "4021" (LSD-first "1204") reads its own digits and its label "b:"
    text = model.to_string(tokens[0])
    last_digit = text.index(",") - 1
    label = text.index("b")
    assert sees[0, last_digit, label] and sees[0, last_digit, last_digit - 3]
    assert not sees[0, text.index("d") + 2, label]  # the next number's digit "7" does not
    closing = text.index(",")  # the separator that closes "b:1204," sees the whole item
    assert sees[0, closing, label] and sees[0, closing, last_digit] and not sees[0, closing + 1, last_digit]


def test_number_head_kinds_and_config():
    kinds = HeadKinds(6, (1,), multiplier_heads=1, symbol_heads=1, number_heads=2)
    assert [kinds.kind_of(h) for h in range(6)] == ["offset +1", "windowed", "symbol", "number", "number", "multiplier"]
    assert kinds.windowed_heads == 1
    cfg = ModelConfig(**{**SORTER, "number_heads": 1})
    assert cfg.attends_by_index and ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "number_heads" not in ModelConfig(**SORTER).to_dict()
    with pytest.raises(UserError, match="number heads"):
        ModelConfig(**{**SORTER, "number_heads": 3})
    with pytest.raises(UserError, match="number_heads"):
        ModelConfig(**{**SORTER, "number_heads": -1})
