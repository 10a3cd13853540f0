"""Exact match of N x k products split by their multiplier: every column of a * b multiplies
the same digits of b. A multiplier whose digits sum to 9 or less can never make a carry above
8 (a column sums at most 9 x 9 plus a carry of at most 8); a heavier one can, in any column,
so the longer the product the likelier it meets one."""

from __future__ import annotations

from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.extrapolation import problems

from .result import MULTIPLIER_BINS, ByMultiplier, MultiplierBin, MultiplierDigitSplit


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
