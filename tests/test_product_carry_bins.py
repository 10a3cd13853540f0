"""Where an N x k multiplier loses answer digits, by the carry into their column: the carries,
their binning against planted right/wrong digits, and the finding's sentence."""

from __future__ import annotations

import dataclasses
import random

import pytest

from abacus_interp.tasks import get_task
from abacus_interp.tasks.product_carries import carries_in, column_sums, large_carry_runs
from analyses.multiplication.analysis import accuracy_by_carry_in, accuracy_by_carry_run
from analyses.multiplication.figures import factor_pair_tables
from analyses.multiplication.findings import (
    _carry_in_far_sentence,
    _carry_in_sentence,
    _carry_run_far_sentence,
    _partial_product_sentence,
)
from analyses.multiplication.multipliers import accuracy_by_factor_pair, accuracy_by_partial_product
from analyses.multiplication.result import (
    CARRY_BINS,
    PRODUCT_BINS,
    RUN_BINS,
    CarryBin,
    CarryRunBin,
    DigitAccuracy,
    FactorPairTable,
    PartialProductSplit,
)


def test_carries_of_99_times_99():
    # 99 * 99 = 9801: sums 81, 162, 81, 0; carries in 0, 8, 17, 9
    assert column_sums(99, 99) == [81, 162, 81, 0]
    assert carries_in(99, 99) == [0, 8, 17, 9]


def test_a_one_digit_multiplier_never_carries_more_than_8():
    rng = random.Random(0)
    assert max(c for _ in range(2000) for c in carries_in(rng.randint(1, 10**9), rng.randint(1, 9))) == 8


def test_binning_recovers_a_planted_threshold():
    """Digits planted right exactly when the carry into their column is at most 4: every bin
    up to 3-4 is 100%, every later one 0%, and the bins count every answer digit once."""
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample_cell(80, random.Random(1), 5, 3)
    right = [[c <= 4 for c in carries_in(*e.operands)] for e in examples]
    bins = accuracy_by_carry_in(examples, right)
    assert sum(b.n for b in bins) == sum(len(str(e.operands[0] * e.operands[1])) for e in examples)
    assert [(b.lo, b.hi) for b in bins] == [bounds for bounds in CARRY_BINS if any(b.lo == bounds[0] for b in bins)]
    assert {b.right for b in bins if b.lo <= 4} == {1.0} and {b.right for b in bins if b.lo > 4} == {0.0}
    assert [b.span for b in bins][:4] == ["0", "1-2", "3-4", "5-8"] and bins[-1].span in ("9-12", "13+")


def test_a_row_that_does_not_match_the_product_is_refused():
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    example = task.make(123, 45)  # 5,535: four digits
    with pytest.raises(ValueError):
        accuracy_by_carry_in([example], [[True, True, True]])


def _digits(k: int, bins: list[tuple[int, int | None, int, float]], digits: int = 5) -> DigitAccuracy:
    return DigitAccuracy(label=f"uniform, {digits} x {k} digits", digits=digits, multiplier_digits=k, n_problems=48,
                         loops=48,
                         right=(1.0,), products=(1,),
                         by_carry_in=tuple(CarryBin(lo=lo, hi=hi, n=n, right=r) for lo, hi, n, r in bins))


def test_the_finding_pools_the_carries_a_one_digit_multiplier_never_makes():
    one = _digits(1, [(0, 0, 100, 1.0), (5, 8, 20, 1.0)])
    two = _digits(2, [(0, 0, 100, 1.0), (5, 8, 100, 0.8), (9, 12, 30, 0.5), (13, None, 10, 0.1)])
    sentence = _carry_in_sentence((one, two))
    assert "x 1: 0 100% (n=100), 5-8 100% (n=20)" in sentence and "13+ 10% (n=10)" in sentence
    # above 8: (0.5 * 30 + 0.1 * 10) / 40 = 40%; up to 8: (100 + 80) / 200 = 90%
    assert "x 2 40% against 90% at carries up to 8" in sentence and "x 1 " not in sentence.split("never makes")[1]


def test_a_multiplier_whose_digits_sum_to_9_never_carries_more_than_8():
    """The premise of MULTIPLIER_BINS: a column sums at most 9 x (b's digit sum) + its carry in,
    so up to a digit sum of 9 no carry passes 8; at 10 the first larger carry appears."""
    rng = random.Random(0)
    light = [b for b in range(1, 1000) if sum(map(int, str(b))) <= 9]
    assert max(c for _ in range(3000) for c in carries_in(rng.randint(1, 10**12), rng.choice(light))) <= 8
    assert max(carries_in(99999, 55)) == 9  # digit sum 10


def test_multiplier_bins_recover_a_planted_split():
    """Products planted right exactly when the multiplier's digits sum to at most 9: that bin
    100%, every later one 0%, each problem counted once."""
    from analyses.multiplication.multipliers import accuracy_by_multiplier
    from analyses.multiplication.result import MULTIPLIER_BINS

    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample_cell(200, random.Random(2), 5, 3)
    right = [sum(map(int, str(e.operands[1]))) <= 9 for e in examples]
    bins = accuracy_by_multiplier(examples, right)
    assert [(b.lo, b.hi) for b in bins] == list(MULTIPLIER_BINS) and sum(b.n for b in bins) == 200
    assert [b.exact_match for b in bins] == [1.0, 0.0, 0.0] and [b.span for b in bins] == ["0-9", "10-13", "14+"]
    with pytest.raises(ValueError, match="verdicts"):
        accuracy_by_multiplier(examples, right[:-1])
    # the edges, by hand: 9 (0-9), 10 and 13 (10-13), 14 (14+)
    edges = [task.make(123, b) for b in (900, 55, 94, 77)]
    assert [(b.span, b.n) for b in accuracy_by_multiplier(edges, [True] * 4)] == [("0-9", 1), ("10-13", 2), ("14+", 1)]


def test_multiplier_digit_split_recovers_a_planted_partial_product():
    """Products planted wrong exactly when the leading multiplier digit b_2 is large: b_2's
    split is 100% / 0%; b_0, independent of b_2 in uniform problems, stays between."""
    from analyses.multiplication.multipliers import accuracy_by_multiplier_digit

    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample_cell(400, random.Random(3), 5, 3)
    right = [int(str(e.operands[1])[0]) < 5 for e in examples]  # the leading digit is b_2
    b0, b1, b2 = accuracy_by_multiplier_digit(examples, right, 3)
    assert (b2.j, b2.small_exact_match, b2.large_exact_match) == (2, 1.0, 0.0)
    assert b2.small_n + b2.large_n == 400 and b0.small_n + b0.large_n == 400
    assert 0.2 < b0.small_exact_match < 0.7 and 0.2 < b0.large_exact_match < 0.7
    # a shorter multiplier has no digit there: it is counted in neither side
    short = accuracy_by_multiplier_digit([task.make(123, 7)], [True], 2)
    assert (short[1].small_n, short[1].large_n, short[1].small_exact_match) == (0, 0, None)
    with pytest.raises(ValueError, match="verdicts"):
        accuracy_by_multiplier_digit(examples, right[:-1], 3)


def test_the_multiplier_sentence_names_each_digits_split():
    from analyses.multiplication.findings import _by_multiplier_sentence
    from analyses.multiplication.result import ByMultiplier, MultiplierBin, MultiplierDigitSplit

    row = ByMultiplier(digits=5, multiplier_digits=2, n_problems=40, exact_match=0.5,
                       bins=(MultiplierBin(0, 9, 40, 0.5),),
                       by_multiplier_digit=(MultiplierDigitSplit(0, 20, 0.5, 20, 0.5), MultiplierDigitSplit(1, 18, 0.9, 22, 0.18)))
    sentence = _by_multiplier_sentence((row,))
    assert "b_j (units first), below 5 against 5 and above: 5 x 2 b_0 50% (n=20) / 50% (n=20), b_1 90% (n=18) / 18% (n=22)." \
        in sentence


def test_the_multiplier_sentence_states_every_bin_with_its_n():
    from analyses.multiplication.findings import _by_multiplier_sentence
    from analyses.multiplication.result import ByMultiplier, MultiplierBin

    row = ByMultiplier(digits=20, multiplier_digits=2, n_problems=40, exact_match=0.5,
                       bins=(MultiplierBin(0, 9, 20, 0.9), MultiplierBin(10, 13, 12, 0.25), MultiplierBin(14, None, 8, 0.0)))
    sentence = _by_multiplier_sentence((row,))
    assert "20 x 2 0-9 90% (n=20), 10-13 25% (n=12), 14+ 0% (n=8)" in sentence
    assert row.label == "uniform, 20 x 2 digits"


def test_the_far_sentence_sets_each_carry_bin_beside_its_trained_length_and_counts_large_carries():
    """Planted: the same accuracy per bin at 5 and 20 digits, four times the share of large
    carries far; a bin seen only far is written with a dash where the trained length has none."""
    one = _digits(1, [(0, 0, 100, 1.0)])
    near = _digits(2, [(0, 0, 90, 1.0), (5, 8, 10, 0.9)])
    far = _digits(2, [(0, 0, 240, 1.0), (5, 8, 100, 0.9), (9, 12, 60, 0.5)], digits=20)
    sentence = _carry_in_far_sentence((one, near), (far,))
    assert sentence.startswith("Answer digits right by the carry into their column, trained / far length "
                               "(n=48 problems each, n = answer digits): x 2 (5 / 20 digits: ")
    assert ("0 100% (n=90) / 100% (n=240), 5-8 90% (n=10) / 90% (n=100), 9-12 - / 50% (n=60)") in sentence
    # above 8: none of the 100 digits at 5; 60 of 400 at 20
    assert "carries above 8 into 0% / 15% of the answer digits" in sentence
    # a bin met only at the trained length keeps its place, dashed far
    only_near = _digits(2, [(0, 0, 90, 1.0), (13, None, 10, 0.2)])
    assert "13+ 20% (n=10) / -" in _carry_in_far_sentence((only_near,), (far,))
    assert _carry_in_far_sentence((one, near), ()) == ""


def test_large_carry_runs_of_99999_times_999():
    # carries in 0, 8, 17, 26, 26, 26, 18, 9: columns 2..6 take 10 or more
    assert large_carry_runs(99999, 999, 10) == [0, 0, 1, 2, 3, 4, 5, 0]
    assert large_carry_runs(99999, 999, 20) == [0, 0, 0, 1, 2, 3, 0, 0]
    # a carry of 9 breaks the run: 17, 17, 17, 9, 17, 17, 17
    assert large_carry_runs(9909099, 999, 10) == [0, 0, 1, 2, 3, 0, 1, 2, 3, 0]


def test_run_binning_recovers_a_planted_threshold():
    """Digits planted right exactly when fewer than 4 columns in a row up to theirs take a
    carry of 10 or more: the bins below 4 are 100%, those from 4 up 0%, every digit counted once.
    The problems come from the run plant, so that long runs are there to bin."""
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots",
                    large_carry_fraction=1.0, large_carry_run=5)
    examples = task.sample_cell(60, random.Random(1), 5, 3)
    right = [[run < 4 for run in large_carry_runs(*e.operands, 10)] for e in examples]
    bins = accuracy_by_carry_run(examples, right)
    assert all(isinstance(b, CarryRunBin) for b in bins)
    assert sum(b.n for b in bins) == sum(len(str(e.operands[0] * e.operands[1])) for e in examples)
    assert [(b.lo, b.hi) for b in bins] == [bounds for bounds in RUN_BINS if any(b.lo == bounds[0] for b in bins)]
    assert {b.right for b in bins if b.lo < 4} == {1.0} and {b.right for b in bins if b.lo >= 4} == {0.0}
    assert [b.span for b in bins][:4] == ["0", "1-2", "3", "4-5"]
    with pytest.raises(ValueError):
        accuracy_by_carry_run(examples[:1], [right[0][:-1]])


def test_the_run_finding_sets_the_trained_length_beside_the_far_one():
    def runs(k, digits, bins):
        return dataclasses.replace(_digits(k, [(0, 0, 1, 1.0)], digits=digits),
                                   by_carry_run=tuple(CarryRunBin(lo=lo, hi=hi, n=n, right=r) for lo, hi, n, r in bins))
    near = runs(3, 5, [(0, 0, 700, 1.0), (1, 2, 200, 1.0), (4, 5, 100, 0.99)])
    far = runs(3, 20, [(0, 0, 700, 1.0), (1, 2, 150, 0.99), (4, 5, 100, 0.98), (6, None, 50, 0.96)])
    sentence = _carry_run_far_sentence((near,), (far,))
    assert sentence.startswith("By the run of columns in a row, ending at the digit's, that take a carry of 10 or more, "
                               "trained / far length: x 3 (5 / 20 digits: ")
    # to a tenth of a point: far from home the bins differ by less than one
    assert "4-5 99.0% (n=100) / 98.0% (n=100), 6+ - / 96.0% (n=50)" in sentence
    # runs of 4 or more: 100 of 1,000 digits at 5, 150 of 1,000 at 20
    assert "runs of 4 or more end at 10.0% / 15.0% of the answer digits" in sentence
    assert _carry_run_far_sentence((near,), ()) == "" and _carry_run_far_sentence((), (far,)) == ""


def test_the_bins_split_where_one_digit_multipliers_stop_carrying():
    from abacus_interp.tasks.product_carries import ONE_DIGIT_MAX_CARRY, largest_carry

    assert largest_carry(9) == ONE_DIGIT_MAX_CARRY
    assert any(hi == ONE_DIGIT_MAX_CARRY for _, hi in CARRY_BINS)


def test_wrong_digits_recover_planted_offsets():
    """Answers planted off by a known offset at known digits: each lands at its signed offset
    ((read - right) mod 10 in -5..4), right digits are not counted, a symbol no digit apart."""
    from analyses.multiplication.analysis import wrong_digits
    from analyses.multiplication.result import WrongDigits

    wanted = [list("0951"), list("1234"), list("99")]
    read = [list("1951"),  # +1
            list("1294"),  # 3 -> 9: +6 = -4
            list("0_")]    # 9 -> 0: +1, and a symbol that is no digit
    wrong = wrong_digits(read, wanted)
    expected = dict.fromkeys(WrongDigits.OFFSETS, 0) | {1: 2, -4: 1}
    assert wrong.counts == tuple(expected.values()) and wrong.not_a_digit == 1 and wrong.n == 3
    assert wrong.share(-1, 1) == pytest.approx(2 / 3) and wrong.share(-4) == pytest.approx(1 / 3)
    assert WrongDigits(counts=(0,) * 10, not_a_digit=0).share(1) is None
    with pytest.raises(ValueError):
        wrong_digits([list("12")], [list("123")])


def test_the_wrong_digits_sentence_orders_rows_and_names_chance():
    from analyses.multiplication.findings import _wrong_digits_sentence
    from analyses.multiplication.result import WrongDigits

    def row(k, digits, counts):
        return dataclasses.replace(_digits(k, [], digits=digits), wrong=WrongDigits(counts=counts, not_a_digit=0))

    near_misses = (0, 0, 0, 0, 2, 0, 6, 0, 0, 0)  # 8 of 8 off by one
    spread = (1, 1, 1, 1, 1, 0, 1, 1, 1, 1)  # 2 of 9
    sentence = _wrong_digits_sentence([row(3, 5, spread), row(2, 50, near_misses), row(2, 5, (0,) * 10)])
    assert sentence.endswith("x 2 at 50 digits 100% (n=8), x 3 at 5 digits 22% (n=9).")
    assert "2 in 9 if wrong digits were random" in sentence
    assert _wrong_digits_sentence([row(2, 5, (0,) * 10)]) == ""
    symbols = dataclasses.replace(row(2, 5, spread), wrong=WrongDigits(counts=spread, not_a_digit=3))
    assert _wrong_digits_sentence([symbols]).endswith("(n=9). 3 more answer positions read a symbol that is no digit.")


def _planted_on_the_leading_product(n: int = 120):
    """5 x 3 products whose answer digits are planted wrong exactly where a_(i-2) * b_2 is 30 or
    more, in the columns that add all three products (2..4); right everywhere else."""
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    examples = task.sample_cell(n, random.Random(2), 5, 3)
    right = []
    for e in examples:
        a, b = (str(x)[::-1] for x in e.operands)
        n_answer = len(str(e.operands[0] * e.operands[1]))
        right.append([not (2 <= i <= 4 and int(a[i - 2]) * int(b[2]) >= 30) for i in range(n_answer)])
    return examples, right


def test_partial_product_split_recovers_a_planted_product():
    """Digits planted wrong where the leading digit's product is 30 or more: that product's
    bins read 100% below 30 and 0% from it, among all digits and among those of small carry;
    the other products, not planted, read in between; every digit of columns 2..4 is counted
    once per product, and the small-carry digits are exactly those of carry in <= 4."""
    examples, right = _planted_on_the_leading_product()
    b0, b1, b2 = accuracy_by_partial_product(examples, right, 3)
    assert [s.j for s in (b0, b1, b2)] == [0, 1, 2]
    assert {b.right for b in b2.bins if b.hi < 30} == {1.0} and {b.right for b in b2.bins if b.lo >= 30} == {0.0}
    assert {b.right for b in b2.small_carry_bins if b.hi < 30} == {1.0}
    assert {b.right for b in b2.small_carry_bins if b.lo >= 30} == {0.0}
    assert all(0.2 < b.right < 1.0 for b in b0.bins), b0
    for split in (b0, b1, b2):
        assert sum(b.n for b in split.bins) == 3 * len(examples)
        assert [(b.lo, b.hi) for b in split.bins] == list(PRODUCT_BINS)
    small = sum(c <= PartialProductSplit.SMALL_CARRY for e in examples for c in carries_in(*e.operands)[2:5])
    assert sum(b.n for b in b1.small_carry_bins) == small
    assert b2.product == "a_(i-2) * b_2" and b0.product == "a_i * b_0"


@pytest.mark.parametrize("split", [accuracy_by_partial_product, accuracy_by_factor_pair])
def test_both_splits_need_two_products_and_matching_rows(split):
    task = get_task("multiplication", max_digits=5, max_multiplier_digits=3, answer_format="slots")
    one = task.sample_cell(4, random.Random(0), 5, 1)
    assert split(one, [[True] * 6] * 4, 1) == ()
    with pytest.raises(ValueError, match="verdicts"):
        split(one, [], 2)
    with pytest.raises(ValueError, match="multiplier of 1 digits"):
        split(one, [[True] * 6] * 4, 2)
    short = task.sample_cell(4, random.Random(0), 1, 3)  # no column adds all three products
    assert split(short, [[True] * 4] * 4, 3) == ()


def test_the_partial_product_finding_names_each_product_and_its_bins():
    examples, right = _planted_on_the_leading_product()
    three = dataclasses.replace(_digits(3, [(0, 0, 10, 1.0)]), by_partial_product=accuracy_by_partial_product(
        examples, right, 3))
    sentence = _partial_product_sentence((_digits(1, [(0, 0, 10, 1.0)]), three))
    assert sentence.startswith("In the columns that add all of the multiplier's partial products")
    assert "x 3 (5 digits, n=360 answer digits)" in sentence and "x 1" not in sentence
    assert "a_(i-2) * b_2 0-9 100% / 10-29 100% / 30-49 0% / 50-81 0%" in sentence
    assert "carry in is at most 4" in sentence and "a_i * b_0" in sentence
    assert _partial_product_sentence((_digits(1, [(0, 0, 10, 1.0)]),)) == ""


def test_factor_pair_tables_recover_a_planted_product_and_its_size():
    """Digits planted wrong where a_(i-2) * b_2 is 30 or more: in that product's table each cell
    of a * b >= 30 reads 0% and each other one 100%, so accuracy falls with the product's size
    (rho far below 0); a_i * b_0's table, not planted, does not follow its own product's size.
    Each table counts every digit of columns 2..4 once, as the partial-product split does, and
    b_2 (a leading digit) is never 0."""
    examples, right = _planted_on_the_leading_product(600)
    b0, b1, b2 = accuracy_by_factor_pair(examples, right, 3)
    assert [t.j for t in (b0, b1, b2)] == [0, 1, 2] and b2.product == "a_(i-2) * b_2"
    for a in FactorPairTable.DIGITS:
        assert b2.n[a][0] == 0 and b2.right[a][0] is None
        for b in range(1, 10):
            assert b2.n[a][b] > 0 and b2.right[a][b] == (0.0 if a * b >= 30 else 1.0), (a, b)
    assert b2.size_correlation < -0.7, b2.size_correlation
    assert abs(b0.size_correlation) < 0.3, b0.size_correlation
    splits = accuracy_by_partial_product(examples, right, 3)
    for table, split in zip((b0, b1, b2), splits, strict=True):
        assert sum(map(sum, table.n)) == sum(b.n for b in split.bins) == 3 * len(examples)


def test_the_size_correlation_reads_only_cells_of_enough_digits():
    falling = tuple(tuple(1 - a * b / 81 for b in range(10)) for a in range(10))  # worse the larger a * b
    few = FactorPairTable(j=1, n=((FactorPairTable.MIN_CELL - 1,) * 10,) * 10, right=falling)
    assert few.size_correlation is None  # no cell holds MIN_CELL digits
    enough = FactorPairTable(j=1, n=((FactorPairTable.MIN_CELL,) * 10,) * 10, right=falling)
    assert enough.size_correlation == pytest.approx(-1.0)


def test_the_factor_pair_figure_draws_one_table_per_product():
    examples, right = _planted_on_the_leading_product()
    tables = accuracy_by_factor_pair(examples, right, 3)
    fig = factor_pair_tables(dataclasses.replace(_digits(3, [(0, 0, 10, 1.0)]), by_factor_pair=tables))
    assert [trace.type for trace in fig.data] == ["heatmap"] * 3
    assert [list(map(list, trace.z)) for trace in fig.data] == [[list(r) for r in t.right] for t in tables]
    assert "a_(i-2) * b_2 (rho -" in fig.layout.annotations[2].text
    assert fig.layout.xaxis.title.text == "b_0" and "a_(i-2) = %{y}, b_2 = %{x}" in fig.data[2].hovertemplate
    with pytest.raises(ValueError, match="no factor-pair tables"):
        factor_pair_tables(_digits(1, [(0, 0, 10, 1.0)]))
