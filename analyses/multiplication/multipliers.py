"""Exact match of N x k products split by their multiplier: every column of a * b multiplies
the same digits of b. A multiplier whose digits sum to 9 or less can never make a carry above
8 (a column sums at most 9 x 9 plus a carry of at most 8); a heavier one can, in any column,
so the longer the product the likelier it meets one."""

from __future__ import annotations

from abacus_interp.evaluation.answers import AnswerDecoding, judge
from abacus_interp.evaluation.extrapolation import problems

from .result import MULTIPLIER_BINS, ByMultiplier, MultiplierBin


def by_multiplier(model, task, digits: int, k: int, n: int, seed: int) -> ByMultiplier:
    """The accuracy table's row of `digits` x `k` digits (the same `n` problems, seed and
    decoding as `length_extrapolation`), decoded and split by the multiplier's digit sum."""
    examples = problems(task, digits, None, n, seed, multiplier_digits=k)
    correct = judge(model, task, examples, AnswerDecoding.of(model)).correct
    return ByMultiplier(digits=digits, multiplier_digits=k, n_problems=len(examples),
                        exact_match=sum(correct) / len(correct), bins=accuracy_by_multiplier(examples, correct))


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
