"""Exact match of N x k products split by their multiplier: every column of a * b multiplies
the same digits of b. A multiplier whose digits sum to 9 or less can never make a carry above
8 (a column sums at most 9 x 9 plus a carry of at most 8); a heavier one can, in any column,
so the longer the product the likelier it meets one."""

from __future__ import annotations

from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.extrapolation import problems
from abacus_interp.tasks.base import to_lsd
from abacus_interp.tasks.product_carries import carries_in, column_products

from .result import (
    MULTIPLIER_BINS,
    PRODUCT_BINS,
    ByMultiplier,
    FactorPairTable,
    MultiplierBin,
    MultiplierDigitSplit,
    PartialProductSplit,
    ProductBin,
)


def by_multiplier(model, task, digits: int, k: int, n: int, seed: int) -> ByMultiplier:
    """The accuracy table's row of `digits` x `k` digits (the same `n` problems, seed and
    decoding as `length_extrapolation`), decoded and split by the multiplier's digit sum."""
    examples = problems(task, digits, None, n, seed, multiplier_digits=k)
    correct = judge(model, task, examples, AnswerDecoding.of(model)).correct
    return ByMultiplier(digits=digits, multiplier_digits=k, n_problems=len(examples),
                        exact_match=sum(correct) / len(correct), bins=accuracy_by_multiplier(examples, correct),
                        by_multiplier_digit=accuracy_by_multiplier_digit(examples, correct, k))


def accuracy_by_multiplier(examples, correct) -> tuple[MultiplierBin, ...]:
    """Exact match of `examples` (a * b) grouped by the digit sum of b (`MULTIPLIER_BINS`;
    bins no problem falls in are left out). `correct`: per example, whether it is right."""
    if len(examples) != len(correct):
        raise ValueError(f"{len(examples)} problems but {len(correct)} verdicts")
    counts = {bounds: [0, 0] for bounds in MULTIPLIER_BINS}
    for example, ok in zip(examples, correct, strict=True):
        weight = sum(int(d) for d in str(example.operands[1]))
        tally = counts[next((lo, hi) for lo, hi in MULTIPLIER_BINS if weight >= lo and (hi is None or weight <= hi))]
        tally[0] += bool(ok)
        tally[1] += 1
    return tuple(MultiplierBin(lo=lo, hi=hi, n=n, exact_match=round(hits / n, 4))
                 for (lo, hi), (hits, n) in counts.items() if n)


def accuracy_by_multiplier_digit(examples, correct, k: int) -> tuple[MultiplierDigitSplit, ...]:
    """Exact match of `examples` (a * b, b of `k` digits) where each digit b_j (units first) is
    small (below `MultiplierDigitSplit.LARGE_DIGIT`) and where it is large."""
    if len(examples) != len(correct):
        raise ValueError(f"{len(examples)} problems but {len(correct)} verdicts")
    splits = []
    for j in range(k):
        tallies = {False: [0, 0], True: [0, 0]}  # is b_j large -> [right, problems]
        for example, ok in zip(examples, correct, strict=True):
            units_first = str(example.operands[1])[::-1]
            if j < len(units_first):
                tally = tallies[int(units_first[j]) >= MultiplierDigitSplit.LARGE_DIGIT]
                tally[0] += bool(ok)
                tally[1] += 1
        (small_right, small_n), (large_right, large_n) = tallies[False], tallies[True]
        splits.append(MultiplierDigitSplit(
            j=j, small_n=small_n, small_exact_match=round(small_right / small_n, 4) if small_n else None,
            large_n=large_n, large_exact_match=round(large_right / large_n, 4) if large_n else None))
    return tuple(splits)


def full_column_digits(examples, right, k: int):
    """Every answer digit of the columns that add all k partial products, as (a's digits, b's
    digits, both units first, its column i, its carry in, whether it is right). `examples`: a * b
    with b of `k` digits; `right`: per example, whether each answer digit (units first) is
    right. Nothing for k = 1, where every column adds one product, and for a multiplicand
    shorter than k digits."""
    if len(examples) != len(right):
        raise ValueError(f"{len(examples)} problems but {len(right)} verdicts")
    if k < 2:
        return
    for example, row in zip(examples, right, strict=True):
        a, b = example.operands
        full_columns, _ = column_products(a, b, k)  # a ValueError where b has not k digits
        a_digits, b_digits, carries = [int(c) for c in to_lsd(a)], [int(c) for c in to_lsd(b)], carries_in(a, b)
        for i in full_columns:
            yield a_digits, b_digits, i, carries[i], bool(row[i])


def accuracy_by_partial_product(examples, right, k: int) -> tuple[PartialProductSplit, ...]:
    """Per product a_(i-j) * b_j (j < k), how often the answer digits of the columns that add
    all k products are right, grouped by that product's size (`PRODUCT_BINS`; bins no digit
    falls in are left out), among all of them and among those whose carry in is small.
    The digits of `full_column_digits(examples, right, k)`; empty where it gives none."""
    # per product j, per group ("all" digits, those of "small" carry in), per bin: [right, digits]
    tallies = [{group: {bounds: [0, 0] for bounds in PRODUCT_BINS} for group in ("all", "small")} for _ in range(k)]
    for a_digits, b_digits, i, carry, ok in full_column_digits(examples, right, k):
        for j, b_digit in enumerate(b_digits):
            product = a_digits[i - j] * b_digit
            bounds = next((lo, hi) for lo, hi in PRODUCT_BINS if lo <= product <= hi)
            for group in ("all", "small") if carry <= PartialProductSplit.SMALL_CARRY else ("all",):
                tallies[j][group][bounds][0] += ok
                tallies[j][group][bounds][1] += 1
    if not any(n for _, n in tallies[0]["all"].values()):
        return ()

    def bins(counts):
        return tuple(ProductBin(lo=lo, hi=hi, n=n, right=round(hits / n, 4)) for (lo, hi), (hits, n) in counts.items()
                     if n)
    return tuple(PartialProductSplit(j=j, bins=bins(t["all"]), small_carry_bins=bins(t["small"]))
                 for j, t in enumerate(tallies))


def accuracy_by_factor_pair(examples, right, k: int) -> tuple[FactorPairTable, ...]:
    """Per product a_(i-j) * b_j (j < k), how often the answer digits of the columns that add
    all k products are right, by the pair of digits (a_(i-j), b_j): `FactorPairTable`. The
    digits of `full_column_digits`, as `accuracy_by_partial_product` reads them."""
    digits = FactorPairTable.DIGITS
    hits = [[[0] * len(digits) for _ in digits] for _ in range(k)]  # [j][a digit][b digit]
    seen = [[[0] * len(digits) for _ in digits] for _ in range(k)]
    for a_digits, b_digits, i, _, ok in full_column_digits(examples, right, k):
        for j, b_digit in enumerate(b_digits):
            hits[j][a_digits[i - j]][b_digit] += ok
            seen[j][a_digits[i - j]][b_digit] += 1
    if not any(any(r) for r in seen[0]):
        return ()
    return tuple(FactorPairTable(
        j=j, n=tuple(tuple(r) for r in seen[j]),
        right=tuple(tuple(round(h / n, 4) if n else None for h, n in zip(hit_row, n_row, strict=True))
                    for hit_row, n_row in zip(hits[j], seen[j], strict=True)))
        for j in range(k))
