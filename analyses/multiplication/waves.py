"""Which products wait for a carry wave: pairs of products that differ only in a long run of
digits, read loop by loop.

A pair is a * b, which reads c and then a run of 9s, and (a + 1) * b, which reads c + 1 and then
0s; the multiplicands differ in their units digit only. Every digit of the run is decided by the
carry that comes up from the bottom columns, so a loop that worked each carry out from below
would lock both products' runs in at loops that grow with the column. A looped multiplier need
not: if it guesses each column's carry from the columns next to it, a product whose carries the
guess gets right locks in at once all along the run, and only a product whose carries it gets
wrong waits for a wave that corrects them from below. `carry_guess` measures both slopes on a
sample of pairs.

Sample: "near a power of ten" pairs, as the report's delayed-carry patch draws them (a =
(c * 10^D + 10^D - 1) // b for a 2-digit c and a uniform k-digit b).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import median
from typing import ClassVar

from abacus_interp.errors import UserError
from abacus_interp.evaluation.common import section_rng
from abacus_interp.tasks.base import random_with_digits
from analyses.carry_wave.analysis import lock_in_loops, per_loop_correct
from analyses.prose import LinearFit


def delayed_pair(task, digits: int, k: int, rng: random.Random) -> tuple[int, int]:
    """(a, b) with a of `digits` digits and b of k whose products a * b and (a + 1) * b have the
    same length and differ in a long run of digits (c then 9s against c + 1 then 0s)."""
    for _ in range(1000):
        b = max(1, random_with_digits(rng, k))
        power = digits + k - 3  # the product has about digits + k digits
        a = (rng.randint(10, 89) * 10**power + 10**power - 1) // b
        if a % 10 != 9 and len(str(a)) == digits and len(task.make(a + 1, b).target) == len(task.make(a, b).target):
            return a, b
    # the sampler finds a pair within a few tries at any length
    raise UserError(f"no pair of products differing in a long run found for {digits} x {k} digits")  # pragma: no cover


@dataclass(frozen=True)
class PairWave:
    """One pair's lock-in loops over the digits where its products differ."""

    multiplicand: int  # a: the pair is (a + 1) * b and a * b
    multiplier: int  # b
    digits: tuple[int, ...]  # the answer digits where the two products differ (units = 0)
    # per product, (a + 1) * b first: lock-in loop of each of `digits` (None: wrong at the horizon)
    lock_in: tuple[tuple[int | None, ...], tuple[int | None, ...]]

    def slopes(self) -> tuple[float | None, float | None]:
        """Per product, loops per column of the lock-in over the digits that locked in."""
        out = []
        for loops in self.lock_in:
            locked = [(d, lo) for d, lo in zip(self.digits, loops, strict=True) if lo is not None]
            out.append(LinearFit.of([d for d, _ in locked], [lo for _, lo in locked]).slope)
        return out[0], out[1]

    @property
    def both_locked(self) -> bool:
        return all(lo is not None for loops in self.lock_in for lo in loops)


@dataclass(frozen=True)
class CarryGuess:
    """Lock-in slopes of `n` pairs: per pair, the product that waits (the larger slope) and its
    twin."""

    label: str  # e.g. "near a power of ten pairs, 20 x 3 digits"
    horizon: int
    pairs: tuple[PairWave, ...]

    # a run that locks in under this many loops per column is read at once, not carried up:
    # a wave of one column per loop or slower is 1 or more
    AT_ONCE: ClassVar[float] = 0.5

    def fitted_pairs(self) -> list[tuple[PairWave, tuple[float, float]]]:
        """Each pair in which both products locked in at every differing digit, with its two
        slopes ((a + 1) * b's first)."""
        out = []
        for pair in self.pairs:
            first, second = pair.slopes()
            if pair.both_locked and first is not None and second is not None:
                out.append((pair, (first, second)))
        return out

    def fitted(self) -> list[tuple[float, float]]:
        """(waiting slope, twin slope) of each fitted pair."""
        return [(max(slopes), min(slopes)) for _, slopes in self.fitted_pairs()]

    def median_slopes(self) -> tuple[float, float] | None:
        """Median loops per column of the waiting products and of their twins; None when no
        pair locked in fully."""
        fitted = self.fitted()
        if not fitted:
            return None
        return median(w for w, _ in fitted), median(t for _, t in fitted)

    def at_once(self) -> int:
        """How many fitted pairs have one product whose run locks in at once (a slope under
        AT_ONCE); in the others both products wait."""
        return sum(1 for _, twin in self.fitted() if twin < self.AT_ONCE)

    def waits(self) -> tuple[int, int]:
        """How many fitted pairs wait on (a + 1) * b, the run of 0s, and on a * b, the 9s (the
        steeper of the two)."""
        zeros = sum(1 for _, (first, second) in self.fitted_pairs() if first >= second)
        return zeros, len(self.fitted_pairs()) - zeros


def carry_guess(model, task, digits: int, k: int, n: int, seed: int = 0, horizon: int | None = None) -> CarryGuess:
    """Read `n` pairs of `digits` x k-digit products (see the module doc) loop by loop up to
    `horizon` loops (default: 2.5 loops per answer digit, past the slowest wave seen, or the
    model's max_loops where that is fewer)."""
    horizon = horizon or min(round(2.5 * (digits + k)), model.cfg.max_loops)
    if horizon > model.cfg.max_loops:
        raise UserError(f"horizon={horizon} exceeds the model's max_loops={model.cfg.max_loops}; "
                        f"load it with load_model(path, max_loops={horizon})")
    rng = section_rng(seed, "multiplication carry guess", digits, k)
    operands = [delayed_pair(task, digits, k, rng) for _ in range(n)]
    examples = [task.make(a + da, b) for a, b in operands for da in (1, 0)]
    _, correct = per_loop_correct(model, examples, horizon)
    pairs = []
    for i, (a, b) in enumerate(operands):
        clean, nines = examples[2 * i], examples[2 * i + 1]
        differ = tuple(d for d, (x, y) in enumerate(zip(clean.target, nines.target, strict=True)) if x != y)
        loops = tuple(tuple(lock_in_loops(correct[2 * i + m])[d] for d in differ) for m in (0, 1))
        pairs.append(PairWave(multiplicand=a, multiplier=b, digits=differ, lock_in=(loops[0], loops[1])))
    return CarryGuess(label=f"near a power of ten pairs, {digits} x {k} digits", horizon=horizon, pairs=tuple(pairs))
