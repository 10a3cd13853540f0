"""Symbol heads (`ModelConfig.symbol_heads`): a head that sees only the tokens that are not
digits (a sorting list's labels and separators, "=", the answer so far) and itself, so no
number of digits dilutes what it reads. Both attention paths and cached decoding are checked
with them in tests/test_multiplier_heads.py (HEAD_LAYOUTS, "four kinds")."""

from __future__ import annotations

import pytest
import torch

from abacus_interp import LoopedTransformer, ModelConfig
from abacus_interp.core.attention import HeadKinds, attention_mask
from abacus_interp.core.hooks import act_name
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
