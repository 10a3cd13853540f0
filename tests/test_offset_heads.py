"""Offset heads (`ModelConfig.offset_heads`): head h reads only the digits exactly
offsets[h] below its query on the Abacus index, whatever the offset and the length, beside
windowed and multiplier heads, and a checkpoint round-trips the field. Both attention paths
and cached decoding are checked with them in tests/test_multiplier_heads.py (HEAD_LAYOUTS)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from abacus_interp import ModelConfig
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import HeadKinds, attention_mask, number_ordinal
from abacus_interp.core.positions import abacus_indices
from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError

MUL_VOCAB = Vocab(tuple("0123456789*="))
# 6 heads: offset heads reading 0, 1 and 2 below, one windowed head, two multiplier heads
THREE_KINDS = dict(vocab=MUL_VOCAB, n_heads=6, d_head=8, positional="none", rotary="abacus", abacus_window=2,
                   offset_heads=(0, 1, 2), multiplier_heads=2, init_std=0.3)
PROBLEMS = ["4321*987=", "15*62=", "987654321*3=", "1*1="]


def test_each_offset_head_sees_one_distance_below_and_itself(tiny_model):
    model = tiny_model(**THREE_KINDS)
    tokens = model.to_tokens(["4321*98=79312", "15*62=76766"])
    index = abacus_indices(tokens, model.digit_ids)  # [batch pos]
    multiplier = number_ordinal(index) == 2  # [batch pos]
    n = tokens.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    itself = torch.eye(n, dtype=torch.bool)
    distance = index[:, :, None] - index[:, None, :]  # [batch query key]
    readable = causal & (index > 0)[:, None, :] & ~multiplier[:, None, :]
    _, cache = model.run_with_cache(tokens, n_loops=2)
    for loop in range(2):
        pattern = cache[act_name("pattern", 0, loop=loop)]  # [batch head query key]
        for head, d in enumerate((0, 1, 2)):
            sees = (readable & (distance == d)) | itself
            assert (pattern[:, head][~sees] == 0).all()
            assert (pattern[:, head][sees] > 0).all()
    # the last answer digit of the first problem (position 12, Abacus index 5): its offset-2
    # head reads the multiplicand's and the answer's digits of index 3 (positions 2 and 10)
    pattern = cache[act_name("pattern", 0, loop=0)]
    assert (pattern[0, 2, 12] > 0).nonzero().squeeze(-1).tolist() == [2, 10, 12]


def test_offset_heads_read_the_same_column_whatever_the_abacus_offset():
    index = torch.tensor([[1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]])  # a of 3 digits, b of 2, answer of 4
    for offset in (0, 9):
        shifted = torch.where(index > 0, index + offset, index)
        mask = attention_mask(None, 11, 11, "cpu", shifted, window=1, heads=HeadKinds(5, (0, 1), 2))
        assert mask.shape == (1, 5, 11, 11)
        # answer digit 3 (position 9): offset 0 reads a_3 (position 2), offset 1 reads a_2 and
        # answer digit 2; neither sees the multiplier, which is the multiplier heads' alone
        assert mask[0, 0, 9].nonzero().squeeze(-1).tolist() == [2, 9]
        assert mask[0, 1, 9].nonzero().squeeze(-1).tolist() == [1, 8, 9]
        assert not mask[0, :3, 9, 4:6].any() and mask[0, 3:, 9, 4:6].any()


def test_offset_heads_without_multiplier_heads_see_every_number():
    # on addition every number's digit at that index is read: both operands' and the answer's
    index = torch.tensor([[1, 2, 0, 1, 2, 0, 1, 2, 3]])
    mask = attention_mask(None, 9, 9, "cpu", index, window=None, heads=HeadKinds(2, (0,)))
    assert mask[0, 0, 7].nonzero().squeeze(-1).tolist() == [1, 4, 7]
    assert mask[0, 1, 7, :8].all()  # the other head (no window): every key before it


def test_offset_heads_by_number_split_the_column_between_operand_and_answer():
    # answer digit 3 (position 9) at offset 1 sees a's digit of index 2 (position 1) and answer
    # digit 2 (position 8) at the same index: restricted to number 1 or 3, a head reads one
    index = torch.tensor([[1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]])
    for offset in (0, 9):
        shifted = torch.where(index > 0, index + offset, index)
        heads = HeadKinds(6, (0, 1, 1), 2, offset_numbers=(1, 1, 3))
        mask = attention_mask(None, 11, 11, "cpu", shifted, window=1, heads=heads)
        assert [mask[0, h, 9].nonzero().squeeze(-1).tolist() for h in range(3)] == [[2, 9], [1, 9], [8, 9]]
        # the first answer digit (position 7) has no answer digit one index below: only itself
        assert mask[0, 2, 7].nonzero().squeeze(-1).tolist() == [7]
    assert [heads.kind_of(h) for h in range(4)] == ["offset +0 of number 1", "offset +1 of number 1",
                                                    "offset +1 of number 3", "windowed"]


def test_exclusive_offset_heads_see_themselves_only_where_their_column_is_absent():
    index = torch.tensor([[1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]])  # a of 3 digits, b of 2, answer of 4
    heads = HeadKinds(6, (0, 1, 1), 2, offset_numbers=(1, 1, 3), offset_exclusive=True)
    mask = attention_mask(None, 11, 11, "cpu", index, window=1, heads=heads)
    # answer digit 3 (position 9): each head its one key, not itself
    assert [mask[0, h, 9].nonzero().squeeze(-1).tolist() for h in range(3)] == [[2], [1], [8]]
    # answer digit 1 (position 7): no answer digit one index below, so the slot head sees itself
    assert mask[0, 2, 7].nonzero().squeeze(-1).tolist() == [7]
    assert mask[0, 3, 9, 9]  # the windowed head still sees itself
    assert mask.any(-1).all()  # no empty softmax row


def test_offset_head_numbers_config_checks_and_round_trip():
    cfg = ModelConfig(**{**THREE_KINDS, "d_model": 48, "offset_head_numbers": [1, 1, 3]})
    assert cfg.offset_head_numbers == (1, 1, 3)
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # as config.json holds it
    default = ModelConfig(**{**THREE_KINDS, "d_model": 48}).to_dict()
    assert "offset_head_numbers" not in default and "offset_heads_exclusive" not in default
    assert HeadKinds.of(cfg).offset_numbers == (1, 1, 3)
    exclusive = ModelConfig(**{**THREE_KINDS, "d_model": 48, "offset_heads_exclusive": True})
    assert ModelConfig.from_dict(exclusive.to_dict()) == exclusive and HeadKinds.of(exclusive).offset_exclusive
    for wrong in [{"offset_heads": (), "offset_heads_exclusive": True}, {"offset_heads_exclusive": 1}]:
        with pytest.raises(UserError, match="true only with offset_heads"):
            ModelConfig(**{**THREE_KINDS, **wrong})
    with pytest.raises(UserError, match="number 2, the multiplier, is hidden"):
        ModelConfig(**{**THREE_KINDS, "offset_head_numbers": (1, 2, 3)})
    for wrong in [(1, 1), (1, 0, 3), (1, True, 3)]:
        with pytest.raises(UserError, match="one integer >= 1 per offset head"):
            ModelConfig(**{**THREE_KINDS, "offset_head_numbers": wrong})


def test_offset_head_config_checks_and_round_trip():
    cfg = ModelConfig(**{**THREE_KINDS, "d_model": 48})
    assert cfg.attends_by_index and cfg.offset_heads == (0, 1, 2)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.from_dict({**cfg.to_dict(), "offset_heads": [0, 1, 2]}).offset_heads == (0, 1, 2)
    assert "offset_heads" not in ModelConfig(vocab=MUL_VOCAB, d_model=32, n_heads=4).to_dict()
    with pytest.raises(UserError, match="more than n_heads=6"):
        ModelConfig(**{**THREE_KINDS, "offset_heads": (0, 1, 2, 3, 4)})
    with pytest.raises(UserError, match="list of integers"):
        ModelConfig(**{**THREE_KINDS, "offset_heads": (0, True)})


def test_the_multiplication_analysis_names_offset_heads_and_finds_their_column():
    """The query predicting answer digit i sits at Abacus index i (the slot of digit i - 1, or
    "=" for the units), so an offset -1 head sees a_i and nothing else but itself, and an
    offset 0 head a_(i-1) and the slot below: the reading must put every bit of their mass there."""
    from abacus_interp.core.families import build_model
    from abacus_interp.tasks import MultiplicationTask
    from analyses import multiplication
    from analyses.multiplication import MultiplicationConfig

    task = MultiplicationTask(max_digits=3, max_multiplier_digits=2, answer_format="slots")
    cfg = ModelConfig(vocab=task.vocab, answer_slots=True, d_model=32, n_heads=4, n_layers=1, n_loops=2,
                      max_loops=16, max_seq_len=64, halt_tol=1e-3, positional="none", rotary="abacus",
                      abacus_window=2, offset_heads=(-1, 0), multiplier_heads=2, init_std=0.3)
    result = multiplication.run(build_model(cfg).eval(), task, config=MultiplicationConfig.quick())
    reading = result.heads_trained
    assert reading.kinds == ("offset -1", "offset +0", "multiplier", "multiplier")
    assert reading.labelled("L0H0") == "L0H0 (offset -1)"
    mass = np.asarray(reading.mass)  # [loop head group]
    group = reading.groups.index
    np.testing.assert_allclose(mass[:, 0, [group("a_i"), group("query itself")]].sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(mass[:, 1, [group("a_(i-1)"), group("answer slot below"), group("query itself")]].sum(-1),
                               1.0, atol=1e-4)
    assert mass[:, 0, group("a_i")].min() > 0.05  # a_i is really read, not only the query itself
    assert any("Offset heads: L0H0 (offset -1) " in f for f in result.findings())
