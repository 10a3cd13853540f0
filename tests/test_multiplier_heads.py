"""Heads of two kinds for N x k multiplication (`ModelConfig.multiplier_heads`): the
multiplier heads see only the multiplier's digits and score them independently of the
query's position, the other heads keep the window and never see the multiplier; both
attention paths and cached decoding agree, and a checkpoint round-trips the field."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from abacus_interp import ModelConfig
from abacus_interp.core.decoding import naive_generate
from abacus_interp.core.hooks import act_name
from abacus_interp.core.masks import HeadKinds, attention_mask, number_ordinal
from abacus_interp.core.positions import abacus_indices
from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError
from abacus_interp.tasks import MultiplicationTask, get_task
from abacus_interp.tasks.product_carries import carries_in, carry_reach, column_sums, largest_carry

MUL_VOCAB = Vocab(tuple("0123456789*="))
TWO_KINDS = dict(vocab=MUL_VOCAB, positional="none", rotary="abacus", abacus_window=2, multiplier_heads=2,
                 init_std=0.3)
PROBLEMS = ["4321*987=", "15*62=", "987654321*3=", "1*1="]


def test_number_ordinal_counts_runs_of_digits():
    index = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 0, 1, 0, 1, 2, 0, 0, 0, 0]])
    expected = torch.tensor([[0, 1, 1, 1, 0, 2, 2, 0, 3, 3, 3, 3, 3], [0, 0, 0, 1, 0, 2, 0, 3, 3, 0, 0, 0, 0]])
    assert torch.equal(number_ordinal(index), expected)


@pytest.mark.parametrize("select", ["fixed", "learned"])
def test_each_kind_of_head_sees_exactly_its_keys(tiny_model, select):
    model = tiny_model(**TWO_KINDS, multiplier_select=select)  # 4 heads: 2 local, 2 multiplier
    tokens = model.to_tokens(["4321*987=79312", "15*62751=76766"])
    index = abacus_indices(tokens, model.digit_ids)  # [batch pos]
    multiplier = number_ordinal(index) == 2  # [batch pos]
    n = tokens.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    itself = torch.eye(n, dtype=torch.bool)
    near = (index[:, :, None] - index[:, None, :]).abs() <= 2  # [batch query key]
    local_sees = (causal & near & ~multiplier[:, None, :]) | itself
    if select == "learned":  # every multiplier head sees every multiplier digit
        head_sees = [(causal & multiplier[:, None, :]) | itself] * 2
    else:  # multiplier head j sees the multiplier's digit j (index j + 1) only, itself where it has none
        head_sees = []
        for j in range(2):
            digit = causal & (multiplier & (index == j + 1))[:, None, :]  # [batch query key]
            head_sees.append(digit | (itself & ~digit.any(-1, keepdim=True)))
    _, cache = model.run_with_cache(tokens, n_loops=2)
    for loop in range(2):
        for layer in range(model.cfg.n_layers):
            pattern = cache[act_name("pattern", layer, loop=loop)]  # [batch head query key]
            for head, sees in ((0, local_sees), (1, local_sees), (2, head_sees[0]), (3, head_sees[1])):
                assert (pattern[:, head][~sees] == 0).all()
                assert (pattern[:, head][sees] > 0).all()


def test_multiplier_scores_do_not_depend_on_where_the_query_is(tiny_model):
    """A multiplier head's query is not rotated, so the score of multiplier digit j is the
    same for every query with the same input: the slots of a long and a short answer read
    b_1..b_k alike. Checked in loop 0, where a slot's input is the same placeholder
    embedding at every position."""
    model = tiny_model(**TWO_KINDS, multiplier_select="learned")
    tokens = model.to_tokens(["123456789*987=0000000000000"])
    name = act_name("attn_scores", 0, loop=0)
    _, cache = model.run_with_cache(tokens, names_filter=name)
    scores = cache[name][0, 2:]  # [multiplier_head query key]
    index = abacus_indices(tokens, model.digit_ids)[0]
    answer = (number_ordinal(index[None])[0] == 3).nonzero().squeeze(-1)
    multiplier = (number_ordinal(index[None])[0] == 2).nonzero().squeeze(-1)
    per_query = scores[:, answer][:, :, multiplier]  # [head answer_slot multiplier_digit]
    torch.testing.assert_close(per_query, per_query[:, :1].expand_as(per_query), atol=1e-5, rtol=1e-5)
    # and the digits themselves are told apart: the keys are rotated by their index
    assert (per_query[:, 0, 0] - per_query[:, 0, 1]).abs().max() > 1e-3


# heads of two kinds, and of three (offset heads reading 0, 1 and 2 below, one windowed head)
HEAD_LAYOUTS = {"two kinds": TWO_KINDS,
                "three kinds": {**TWO_KINDS, "n_heads": 6, "d_head": 8, "offset_heads": (0, 1, 2)},
                "offset heads by number": {**TWO_KINDS, "n_heads": 6, "d_head": 8, "offset_heads": (0, 1, 1),
                                           "offset_head_numbers": (1, 1, 3)},
                "exclusive offset heads": {**TWO_KINDS, "n_heads": 6, "d_head": 8, "offset_heads": (0, 1, 1),
                                           "offset_head_numbers": (1, 1, 3), "offset_heads_exclusive": True},
                "four kinds": {**TWO_KINDS, "n_heads": 6, "d_head": 8, "offset_heads": (0, 1), "symbol_heads": 1},
                "five kinds": {**TWO_KINDS, "n_heads": 6, "d_head": 8, "offset_heads": (0,), "symbol_heads": 1,
                               "number_heads": 1},
                "scalable softmax": {**TWO_KINDS, "softmax_length_scale": 0.5},
                "attention sink": {**TWO_KINDS, "attention_sink": 0.5}}


@pytest.mark.parametrize("layout", list(HEAD_LAYOUTS))
@pytest.mark.parametrize("backend", ["sdpa", "explicit"])
def test_attention_paths_agree_with_multiplier_heads(tiny_model, backend, layout):
    tokens = tiny_model(vocab=MUL_VOCAB).to_tokens(["4321*987=79312", "15*62751=76766", "9*9=81"])
    explicit = tiny_model(**HEAD_LAYOUTS[layout], attention_backend="explicit")
    other = tiny_model(**HEAD_LAYOUTS[layout], attention_backend=backend)
    other.load_state_dict(explicit.state_dict())
    torch.testing.assert_close(other(tokens, 4), explicit(tokens, 4), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", list(HEAD_LAYOUTS))
@pytest.mark.parametrize("n_loops", [1, 3])
def test_cached_decoding_equals_naive_decoding_with_multiplier_heads(tiny_model, n_loops, layout):
    model = tiny_model(**HEAD_LAYOUTS[layout])
    cached = model.generate(PROMPTS_LEFT_PADDED, n_loops=n_loops, max_new_tokens=6)
    naive = naive_generate(model, PROMPTS_LEFT_PADDED, n_loops=n_loops, max_new_tokens=6)
    assert cached == naive


PROMPTS_LEFT_PADDED = PROBLEMS  # prompts of different lengths: decoding left-pads them


def test_two_kind_mask_is_per_head_and_padding_stays_hidden():
    index = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3]])
    valid = torch.tensor([[False, True, True, True, True, True, True, True, True]])
    mask = attention_mask(valid, 9, 9, "cpu", index, window=1, heads=HeadKinds(3, multiplier_heads=1, fixed_multiplier=False))
    assert mask.shape == (1, 3, 9, 9)
    assert not mask[0, :, 1:, 0].any()  # the padding key is hidden from every real query
    assert torch.equal(mask[0, 0], mask[0, 1])  # the two local heads share one mask
    assert mask[0, 2, 8, 4] and not mask[0, 0, 8, 4]  # the multiplier digit: only its head
    assert not mask[0, 2, 8, 1]  # the multiplier head does not see the multiplicand


def test_fixed_multiplier_heads_read_one_digit_each_whatever_the_offset():
    # 12*345=...: the multiplier's digits sit at positions 4, 5, 6; an Abacus offset of 7 shifts
    # every index, and head j still sees the multiplier's digit j only
    index = torch.tensor([[1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4]])
    for offset in (0, 7):
        shifted = torch.where(index > 0, index + offset, index)
        mask = attention_mask(None, 11, 11, "cpu", shifted, window=None, heads=HeadKinds(5, multiplier_heads=3))
        for j in range(3):
            seen = mask[0, 2 + j, 10].nonzero().squeeze(-1).tolist()
            assert seen == [3 + j], (offset, j, seen)  # its digit only: the head copies it
        # a query before the multiplier sees nothing of it, so it attends to itself
        assert mask[0, 2:, 1].nonzero()[:, 1].tolist() == [1, 1, 1]


def test_config_checks_and_round_trip():
    cfg = ModelConfig(**{**TWO_KINDS, "d_model": 32, "n_heads": 4})
    assert cfg.attends_by_index
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert "multiplier_heads" not in ModelConfig(vocab=MUL_VOCAB, d_model=32, n_heads=4).to_dict()
    with pytest.raises(UserError, match="rotary"):
        ModelConfig(vocab=MUL_VOCAB, d_model=32, n_heads=4, multiplier_heads=1)
    with pytest.raises(UserError, match="0..n_heads-1"):
        ModelConfig(**{**TWO_KINDS, "d_model": 32, "n_heads": 4, "multiplier_heads": 4})


def test_multiplication_with_a_short_multiplier_samples_its_own_range():
    task = MultiplicationTask(max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample(400, random.Random(0))
    lengths = {(len(str(e.operands[0])), len(str(e.operands[1]))) for e in examples}
    assert {a for a, _ in lengths} == {1, 2, 3, 4, 5} and {b for _, b in lengths} == {1, 2, 3}
    assert all(e.answer == e.operands[0] * e.operands[1] for e in examples)
    assert task.config() == {"max_digits": 5, "min_digits": 1, "answer_format": "slots",
                             "max_multiplier_digits": 3, "min_multiplier_digits": 1}
    assert task.max_sequence_length() == 5 + 1 + 3 + 1 + 8 + 1
    with pytest.raises(UserError, match="min_multiplier_digits"):
        MultiplicationTask(min_multiplier_digits=2)


def test_product_carries_follow_long_multiplication():
    assert column_sums(24999, 4) == [36, 36, 36, 16, 8]
    assert carries_in(24999, 4) == [0, 3, 3, 3, 1]
    assert largest_carry(1) == 0 and largest_carry(2) == 1 and largest_carry(999) == 26
    # times 1 no carry can arrive; 5 * 2 = 10: the tens digit is settled by the units column
    assert carry_reach(99999, 1) == [0, 0, 0, 0, 0]
    assert carry_reach(5, 2) == [0, 1]
    # the digits rebuilt from column sums and carries are the product's, on random problems
    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randint(1, 10**8), rng.randint(1, 999)
        sums, carries, product = column_sums(a, b), carries_in(a, b), a * b
        digits = [(s + c) % 10 for s, c in zip(sums, carries, strict=True)]
        assert "".join(map(str, digits[::-1])).lstrip("0") == str(product)
        reach = carry_reach(a, b)
        assert len(reach) == len(str(product)) and all(0 <= r <= i for i, r in enumerate(reach))


def _tiny_multiplier(**overrides):
    from abacus_interp.core.families import build_model

    task = MultiplicationTask(max_digits=3, max_multiplier_digits=2, answer_format="slots")
    cfg = ModelConfig(**{**TWO_KINDS, "vocab": task.vocab, "answer_slots": True, "d_model": 32, "n_heads": 4,
                         "n_layers": 1, "n_loops": 2, "max_loops": 16, "max_seq_len": 64, "halt_tol": 1e-3,
                         **overrides})
    return build_model(cfg).eval(), task


def test_the_multiplication_analysis_splits_attention_by_head_kind():
    """On an untrained model the reading still has to respect the masks: multiplier heads put
    all their mass on the multiplier digits or themselves, the other heads none on them."""
    from analyses import multiplication
    from analyses.multiplication import MultiplicationConfig

    model, task = _tiny_multiplier()
    # 12 problems per row: the running-sum readouts fit on 48 others, more than d_model=32
    config = dataclasses.replace(MultiplicationConfig.quick(), n_problems=12)
    result = multiplication.run(model, task, config=config)
    reading = result.heads_trained
    assert reading.multiplier_heads == ("L0H2", "L0H3")
    mass = np.asarray(reading.mass)  # [loop head group]
    np.testing.assert_allclose(mass.sum(-1), 1.0, atol=1e-3)
    b_groups = [reading.groups.index(f"b_{j}") for j in range(3)]
    own = reading.groups.index("query itself")
    assert mass[:, 2:, b_groups + [own]].sum(-1).min() > 0.999
    assert mass[:, :2, b_groups].max() == 0.0
    assert {r.multiplier_digits for r in result.accuracy.rows} == {1, 2}
    # accuracy, running sums, heads, carry wave with the delayed-carry patch: none dropped by the cap of 4
    assert len(result.findings()) == 4 and "Delayed carry (" in result.findings()[-1]
    assert set(result.figures()) >= {"accuracy_by_length", "head_reading",
                                                                      "running_sum_by_loop", "by_multiplier"}
    # the split by multiplier: for 2-digit multipliers, at the trained and the far length
    assert [(r.digits, r.multiplier_digits) for r in result.by_multiplier] == [(3, 2), (6, 2)]
    assert "By the sum of the multiplier's digits" in result.findings()[0]
    assert "By each multiplier digit b_j (units first), below 5 against 5 and above: 3 x 2 b_0 " in result.findings()[0]
    # by each multiplier digit: a small and a large trace per row, each bar group b_0 and b_1,
    # their counts the row's 12 problems
    digit_bars = result.figures()["by_multiplier_digit"].data
    assert [t.name for t in digit_bars] == ["3 x 2, b_j < 5", "3 x 2, b_j >= 5", "6 x 2, b_j < 5", "6 x 2, b_j >= 5"]
    assert all(list(t.x) == ["b_0", "b_1"] for t in digit_bars)
    for small, large in (digit_bars[:2], digit_bars[2:]):
        assert [int(a[2:]) + int(b[2:]) for a, b in zip(small.text, large.text, strict=True)] == [12, 12]
    # each answer digit by its carry in, far too, for 2-digit multipliers only
    assert [(d.digits, d.multiplier_digits) for d in result.by_digit_far] == [(6, 2)]
    # a 6 x 2-digit product has 7 or 8 digits, each binned once
    assert 12 * 7 <= sum(b.n for b in result.by_digit_far[0].by_carry_in) <= 12 * 8
    # and by the run of large carries ending at its column: the same digits, binned once more
    assert sum(b.n for b in result.by_digit_far[0].by_carry_run) == sum(b.n for b in result.by_digit_far[0].by_carry_in)
    assert "By the run of columns in a row, ending at the digit's, that take a carry of 10 or more" in result.findings()[0]
    assert "trained / far length (n=12 problems each, n = answer digits): x 2 (3 / 6 digits: 0 " in result.findings()[0]
    lines = result.figures()["by_carry_in"].data
    assert [(t.name, t.line.dash) for t in lines] == [("x 1, 3-digit", "solid"), ("x 2, 3-digit", "solid"),
                                                      ("x 2, 6-digit", "dash")]
    # how far the wrong digits are off: one bar trace per row that has wrong digits, its counts as shares
    bars = result.figures()["wrong_digit_offsets"].data
    rows = [d for d in result.by_digit + result.by_digit_far if d.wrong.n]
    assert [t.name for t in bars] == [f"x {d.multiplier_digits}, {d.digits}-digit (n={d.wrong.n} wrong)" for d in rows]
    for trace, d in zip(bars, rows, strict=True):
        np.testing.assert_allclose(np.asarray(trace.y) * d.wrong.n, d.wrong.counts)
        assert list(trace.x) == [f"{o:+d}" for o in range(-5, 5)]
    assert "Share of the wrong answer digits off by one" in result.findings()[0]
    # by each partial product's size, in the columns that add both (x 2 only): a line per product
    # for all digits and one, dotted, for those of small carry in; each digit of columns 1..2 counted once
    product_lines = result.figures()["by_partial_product"].data
    assert [(t.name, t.line.dash) for t in product_lines] == [
        ("a_i * b_0 (all)", "solid"), ("a_i * b_0 (carry in <= 4)", "dot"),
        ("a_(i-1) * b_1 (all)", "solid"), ("a_(i-1) * b_1 (carry in <= 4)", "dot")]
    two = next(d for d in result.by_digit if d.multiplier_digits == 2)
    assert [sum(b.n for b in s.bins) for s in two.by_partial_product] == [12 * 2, 12 * 2]
    assert next(d for d in result.by_digit if d.multiplier_digits == 1).by_partial_product == ()
    assert "In the columns that add all of the multiplier's partial products" in result.findings()[0]
    assert [r.label for r in result.running_sum] == ["uniform 3 x 1 digits", "uniform 3 x 2 digits"]
    assert all(len(r.fitted.read) == config.horizon and r.trained is None for r in result.running_sum)
    # each partial product read for the 2-digit multipliers only, one R² per loop; drawn one line per product
    one, two = result.running_sum
    assert one.partial_products == () and [len(p.r2) for p in two.partial_products] == [config.horizon] * 2
    assert [t.name for t in result.figures()["partial_products_by_loop"].data] == [
        "uniform 3 x 2 digits: a_i * b_0", "uniform 3 x 2 digits: a_(i-1) * b_1"]
    # and each product's two digits as classes: the input, then one share per loop
    assert one.product_digits == () and [len(d.units) for d in two.product_digits] == [config.horizon] * 2
    assert [t.name for t in result.figures()["product_digits_by_loop"].data] == [
        f"uniform 3 x 2 digits: {product}, {which}" for product in ("a_i * b_0", "a_(i-1) * b_1")
        for which in ("units", "tens")]
    assert any("Each product's two digits, read as ten classes" in finding for finding in result.findings())


def test_the_multiplication_analysis_says_why_it_does_not_apply():
    from analyses.multiplication.analysis import skip_reason

    model, _ = _tiny_multiplier()
    assert "not multiplication" in skip_reason(model, get_task("addition"))
    square = MultiplicationTask(max_digits=3, answer_format="slots")
    assert "N x N" in skip_reason(model, square)


def test_a_run_whose_multiplier_is_longer_than_its_heads_is_refused():
    from abacus_interp.training import apply_overrides, get_preset

    with pytest.raises(UserError, match="multiplier_heads=4"):
        apply_overrides(get_preset("extrap-mul"), ["task.max_multiplier_digits=4"])
    assert apply_overrides(get_preset("extrap-mul"), ["model.multiplier_select=learned",
                                                     "task.max_multiplier_digits=4"]).model.multiplier_heads == 3
    # and a run refuses to read a longer multiplier at solve/eval time, in one line
    with pytest.raises(UserError, match="up to 3 digits"):
        get_preset("extrap-mul").make_task().check_multiplier(4)


def test_evaluation_leaves_out_what_an_n_by_k_run_cannot_read():
    from abacus_interp.evaluation.edge_cases import edge_cases
    from abacus_interp.evaluation.loops import equal_lengths

    task = MultiplicationTask(max_digits=5, max_multiplier_digits=3, answer_format="slots")
    assert task.can_read(40, 3) and not task.can_read(2, 4)
    assert equal_lengths(task, None, 10, 400) == [1, 2, 3]
    cases = edge_cases(task, [1, 2, 5, 10], random.Random(0), max_seq_len=400)
    assert cases and all(len(str(p.operands[1])) <= 3 for case in cases for p in case.problems)
    assert MultiplicationTask(max_digits=5).can_read(5, 5)


SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-mul"


@pytest.mark.skipif(not (SHIPPED / "config.json").exists(), reason="checkpoints/extrap-mul is not shipped in this checkout")
def test_the_shipped_multiplier_extrapolates_by_one_digit_and_refuses_longer_multipliers(capsys):
    """checkpoints/extrap-mul, re-scored from its weights: a 50-digit multiplicand (10x the
    trained length) times one digit, held-out uniform problems, adaptive loops (100 of 100 in
    docs/runs/multiplication.md's eval); and a 4-digit multiplier is refused in one line."""
    from abacus_interp.checkpoints import load_model, load_task
    from abacus_interp.evaluation.extrapolation import length_extrapolation
    from abacus_lab.cli import main

    model, task = load_model(SHIPPED), load_task(SHIPPED)
    assert model.cfg.multiplier_heads == 3 and model.cfg.multiplier_select == "fixed"
    assert model.cfg.offset_heads == (-1, 0, 1, 1) and model.cfg.activation == "swiglu"
    row = length_extrapolation(model, task, [50], multipliers=[1], n=16, seed=7).rows[0]
    assert row.multiplier_digits == 1 and row.exact_match >= 15 / 16
    assert main(["solve", str(SHIPPED), "123*4567"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "up to 3 digits" in err[0]


@pytest.mark.skipif(not (SHIPPED / "config.json").exists(), reason="checkpoints/extrap-mul is not shipped in this checkout")
def test_the_split_by_multiplier_decodes_the_accuracy_tables_row_again():
    """On the shipped N x k run: the split's problems and verdicts are those of
    `length_extrapolation`'s row (same exact match), and its bins add up to it."""
    from abacus_interp.checkpoints import load_model, load_task
    from abacus_interp.evaluation.extrapolation import length_extrapolation
    from analyses.multiplication.multipliers import by_multiplier

    model, task = load_model(SHIPPED), load_task(SHIPPED)
    split = by_multiplier(model, task, 5, 2, n=24, seed=3)
    row = length_extrapolation(model, task, [5], multipliers=[2], n=24, seed=3).rows[0]
    assert split.exact_match == row.exact_match and 0 < row.exact_match < 1
    assert sum(b.n for b in split.bins) == 24
    assert sum(b.exact_match * b.n for b in split.bins) == pytest.approx(split.exact_match * 24, abs=0.01)
    assert [d.j for d in split.by_multiplier_digit] == [0, 1]
    for d in split.by_multiplier_digit:  # each digit's two sides hold every problem once, and its right ones
        right = sum(share * n for share, n in ((d.small_exact_match, d.small_n), (d.large_exact_match, d.large_n)) if n)
        assert d.small_n + d.large_n == 24 and right == pytest.approx(split.exact_match * 24, abs=0.01)


def test_digit_accuracy_counts_the_products_each_column_sums():
    """Column i of a D-digit times a k-digit product sums a_(i-j) * b_j over the j that exist:
    for 3 x 2 digits, 1, 2, 2, 1 products and then the top carry digit alone."""
    from analyses.multiplication.analysis import digit_accuracy

    model, task = _tiny_multiplier()
    examples = task.sample_cell(8, random.Random(0), 3, 2)
    d = digit_accuracy(model, examples, 3, 2, loops=2)
    assert d.products == (1, 2, 2, 1, 0)[: len(d.right)] and len(d.right) >= 4
    assert all(0.0 <= r <= 1.0 for r in d.right) and d.n_problems == 8
    first = d.first_below()
    assert first is None or d.right[first] < 0.99


def test_one_pass_reading_equals_the_per_loop_lens_at_its_last_loop():
    """digit_accuracy reads the answer once after `loops` loops (lens_answers); per_loop_correct
    steps the loops one at a time. They must agree digit for digit, and every digit they call
    wrong is counted once among the wrong digits' offsets or as no digit."""
    from analyses.carry_wave.analysis import lens_answers, per_loop_correct
    from analyses.multiplication.analysis import digit_accuracy

    model, task = _tiny_multiplier()
    examples = task.sample_cell(24, random.Random(3), 3, 2)
    stepped = [c[-1] for c in per_loop_correct(model, examples, 3)[1]]
    read = lens_answers(model, examples, 3)
    for example, tokens, right in zip(examples, read, stepped, strict=True):
        np.testing.assert_array_equal(tokens == np.asarray(task.vocab.encode(example.target)), right)
    d = digit_accuracy(model, examples, 3, 2, loops=3)
    n_wrong = sum(int((~r).sum()) for r in stepped)
    assert n_wrong > 0 and d.wrong.n + d.wrong.not_a_digit == n_wrong
