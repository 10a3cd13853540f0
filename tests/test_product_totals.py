"""Where an N x k multiplier loses answer digits, by what their column adds up to: the column
totals, their binning against planted right/wrong digits, and the finding that compares
multiplier lengths at equal totals."""

from __future__ import annotations

import random

from abacus_interp.tasks import get_task
from abacus_interp.tasks.product_carries import carries_in, column_sums, column_totals
from analyses.multiplication.analysis import accuracy_by_total
from analyses.multiplication.findings import _equal_totals_sentence
from analyses.multiplication.result import DigitAccuracy, TotalBin, equal_totals


def test_column_totals_of_99_times_99():
    # 99 * 99 = 9801: sums 81, 162, 81, 0; carries in 0, 8, 17, 9
    assert column_sums(99, 99) == [81, 162, 81, 0]
    assert carries_in(99, 99) == [0, 8, 17, 9]
    assert column_totals(99, 99) == [81, 170, 98, 9]
    assert [t % 10 for t in column_totals(99, 99)] == [1, 0, 8, 9]


def test_column_totals_spell_the_product():
    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randint(1, 10**12), rng.randint(1, 999)
        assert "".join(str(t % 10) for t in reversed(column_totals(a, b))) == str(a * b)


def test_binning_recovers_a_planted_threshold():
    """Digits planted right exactly when their column adds up to less than 40: every bin below
    is 100%, every bin from 40 on 0%, and the bins count every answer digit once."""
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample_cell(60, random.Random(1), 5, 2)
    right = [[t < 40 for t in column_totals(*e.operands)] + [True] for e in examples]  # + an EOS slot, ignored
    bins = accuracy_by_total(examples, right)
    assert sum(b.n for b in bins) == sum(len(str(e.operands[0] * e.operands[1])) for e in examples)
    assert [b.lo for b in bins] == sorted(b.lo for b in bins) and all(b.hi == b.lo + 19 for b in bins)
    assert {b.right for b in bins if b.lo < 40} == {1.0} and {b.right for b in bins if b.lo >= 40} == {0.0}


def _digits(k: int, bins: list[tuple[int, int, float]]) -> DigitAccuracy:
    return DigitAccuracy(label=f"uniform, 5 x {k} digits", multiplier_digits=k, n_problems=48, loops=48,
                         right=(1.0,), products=(1,),
                         by_total=tuple(TotalBin(lo=lo, hi=lo + 19, n=n, right=r) for lo, n, r in bins))


def test_equal_totals_picks_the_highest_bin_every_length_fills():
    one = _digits(1, [(0, 200, 1.0), (20, 90, 1.0), (60, 30, 1.0), (80, 5, 1.0)])
    two = _digits(2, [(0, 200, 0.99), (20, 90, 0.97), (60, 40, 0.79), (80, 30, 0.61), (100, 12, 0.5)])
    equal = equal_totals((one, two))
    assert [b.lo for b in equal] == [60, 60] and [b.right for b in equal] == [1.0, 0.79]
    assert equal_totals((one,)) is None
    assert equal_totals((one, _digits(2, [(100, 50, 0.5)]))) is None


def test_the_finding_names_adding_products_only_when_x1_is_right_at_equal_totals():
    one = _digits(1, [(0, 200, 1.0), (60, 30, 1.0)])
    two = _digits(2, [(0, 200, 0.99), (60, 40, 0.79)])
    sentence = _equal_totals_sentence((one, two), equal_totals((one, two)))
    assert "totals 60-79" in sentence and "x 1 100% (n=30" in sentence and "x 2 79% (n=40" in sentence
    assert "adding partial products" in sentence
    weak_one = _digits(1, [(0, 200, 1.0), (60, 30, 0.85)])
    sentence = _equal_totals_sentence((weak_one, two), equal_totals((weak_one, two)))
    assert "adding partial products" not in sentence
