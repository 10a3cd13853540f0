"""The multiplication analysis's result, a tree of frozen dataclasses: `to_dict` is
`jsonsafe.to_json` of it, and `figures()` / `findings()` read its attributes through
figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.evaluation.extrapolation import ExtrapolationResult
from abacus_interp.jsonsafe import to_json
from analyses.carry_wave.patching import DelayedCarry
from analyses.prose import LinearFit

from .heads import HeadReading, Knockout


@dataclass(frozen=True)
class ReachFit:
    """Lock-in loop against carry reach over the answer digits of one sample."""

    label: str  # e.g. "near a power of ten, 20 x 3 digits"
    sample: str  # "uniform" or "near a power of ten"
    digits: int  # the multiplicand's
    multiplier_digits: int
    n_problems: int
    exact_match_at_horizon: float
    never_locked: int  # answer digits still wrong at the horizon (left out of the fit)
    reach: tuple[int, ...]  # per locked digit
    lock_in: tuple[int, ...]  # per locked digit: its lock-in loop (1-based)
    median_by_reach: tuple[tuple[int, float], ...]  # (reach, median lock-in loop)
    fit: LinearFit


@dataclass(frozen=True)
class HaltingFit:
    """Loops adaptive halting used against the longest carry reach of each problem."""

    label: str
    longest_reach: tuple[int, ...]
    loops_used: tuple[int, ...]
    converged: tuple[bool, ...]
    fit: LinearFit


@dataclass(frozen=True)
class DelayedProduct:
    """The delayed-carry patch on a pair of products that differ in a long run of digits."""

    digits: tuple[int, ...]  # the answer digits followed (units = 0): where the products differ
    patch: DelayedCarry  # lock_in[switch][followed digit]

    def lag_after_switch(self) -> tuple[tuple[int, float | None], ...]:
        """(switch loop, median of lock-in minus switch over the followed digits)."""
        out = []
        for s, row in zip(self.patch.switch_loops, self.patch.lock_in, strict=True):
            lags = sorted(lo - s for lo in row if lo is not None)
            out.append((s, float(lags[len(lags) // 2]) if lags else None))
        return tuple(out)

    def wave_fit(self) -> LinearFit:
        """Lock-in loop against the digit's column in the clean run (switch 0)."""
        pairs = [(d, lo) for d, lo in zip(self.digits, self.patch.lock_in[0], strict=True) if lo is not None]
        return LinearFit.of([d for d, _ in pairs], [lo for _, lo in pairs])


@dataclass(frozen=True)
class TotalBin:
    """The answer digits whose column total (`tasks.product_carries.column_totals`: the
    column's partial products plus the carry into it) lies in lo..hi, and how often they are right."""

    lo: int
    hi: int
    n: int  # answer digits in the bin
    right: float


@dataclass(frozen=True)
class DigitAccuracy:
    """How often each answer digit is right (logit lens after `loops`) on uniform N x k
    products: where an N x k multiplier fails. Column i sums `products[i]` partial products
    a_(i-j) * b_j and a carry, so the digit where accuracy first drops says how many products
    the model can add."""

    label: str  # e.g. "uniform, 5 x 2 digits"
    multiplier_digits: int
    n_problems: int
    loops: int
    right: tuple[float, ...]  # per answer digit, units = 0
    products: tuple[int, ...]  # per answer digit: partial products its column sums
    # the same digits by their column's total: a multiplier that adds one product and a carry
    # exactly but not two shows it as a lower line than x 1's at equal totals
    by_total: tuple[TotalBin, ...] = ()

    def first_below(self, bar: float = 0.99) -> int | None:
        """The lowest answer digit right less than `bar` of the time (None: every one)."""
        return next((i for i, r in enumerate(self.right) if r < bar), None)


def equal_totals(by_digit: tuple[DigitAccuracy, ...], min_digits: int = 10) -> tuple[TotalBin, ...] | None:
    """One bin per multiplier length, the highest column-total bin in which every length has
    at least `min_digits` answer digits: where the lengths are compared at equal totals.
    None with fewer than two lengths or no shared bin."""
    if len(by_digit) < 2:
        return None
    common = set.intersection(*({b.lo for b in d.by_total if b.n >= min_digits} for d in by_digit))
    if not common:
        return None
    lo = max(common)
    return tuple(next(b for b in d.by_total if b.lo == lo) for d in by_digit)


@dataclass(frozen=True)
class MultiplicationResult:
    trained_digits: int  # N, the multiplicand's trained length
    multiplier_digits: tuple[int, ...]  # the k the run was trained on
    horizon: int
    # the multiplier length the lock-in fits, head readings and knockouts use, and why
    inside_multiplier_digits: int
    inside: str
    accuracy: ExtrapolationResult  # N x k at every length multiple, adaptive loops
    lock_in: tuple[ReachFit, ...]
    halting: HaltingFit
    delayed: DelayedProduct
    # where each head reads and what forbidding it does (uniform, N x K); None for a model
    # without multiplier heads, whose attention does not split the multiplier off
    heads_trained: HeadReading | None
    heads_far: HeadReading | None
    knockout: Knockout | None
    by_digit: tuple[DigitAccuracy, ...] = ()  # one per k, at the trained multiplicand length

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import multiplication_figures

        return multiplication_figures(self)

    def findings(self) -> list[str]:
        from .findings import multiplication_findings

        return multiplication_findings(self)
