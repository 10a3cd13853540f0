"""Multi-digit multiplication: `21*43=` -> `2604` (12*34=408), all LSD-first.

With `max_multiplier_digits` set, the multiplier b of `a*b` is drawn from its own, shorter
range (N x k multiplication: a long multiplicand times a k-digit multiplier), the setting in
which a looped model can extrapolate in the multiplicand's length (ModelConfig.multiplier_heads).

`large_digit_fraction` plants problems whose digits are all large: under uniform digits a
column's running sum rarely reaches 90 (a carry above 8), which an N x 1 product never makes
and an N x 2 or N x 3 one does, so those carries are few in the training data. `large_carry_fraction` plants them more gently:
a planted problem is a uniform one conditioned on a carry of LARGE_CARRY or more entering one
of its columns. Every digit 0..9 still occurs, though large ones more often (9 is about a fifth
of the digits against a tenth), and the plant leans toward long multiplicands and multipliers
of two or more digits, where such carries occur.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from abacus_interp.errors import UserError
from abacus_interp.tasks.base import Example, check_digit_range, check_fraction, random_with_digits
from abacus_interp.tasks.binary_op import BinaryOpTask
from abacus_interp.tasks.product_carries import column_products, large_carry_runs, running_sums


class MultiplicationTask(BinaryOpTask):
    """a * b with a of `min_digits`..`max_digits` digits and b of the same range, or of
    `min_multiplier_digits`..`max_multiplier_digits` when that is set.

    `large_digit_fraction`: the share of sampled problems whose every digit is drawn from
    LARGE_DIGITS (digit counts drawn as for the others), so that the columns sum past 90 and
    carry more than 8. The plant is part of the task's distribution, like addition's
    cascade_fraction: held-out sets drawn from this task hold it too, so compare such a run
    with another on a plain task.

    `large_carry_fraction`: the share of sampled problems redrawn from the plain distribution
    until a carry of at least LARGE_CARRY enters one of their columns (a two-digit carry, the
    answer digits an N x k run gets wrong most often): uniform problems given that carry. One
    plant at a time: both set at once are refused.

    `large_carry_run`: how many columns in a row a planted problem's large carries must enter
    (1: one column, the plant as above). Why: far from home an N x 3 product's last errors
    sit at the end of long runs of large carries, each column's carry resting on the large one
    below; a 5-digit multiplicand has too few columns for runs of 4 or more to be drawn often
    (about 0.35% of uniform 5 x 1..3 problems)."""

    name: ClassVar[str] = "multiplication"
    op_symbol: ClassVar[str] = "*"
    op_aliases: ClassVar[tuple[str, ...]] = ("x", "×")
    # the digits of a planted problem: 5 x 5 = 25 up to 81, so two products pass 90 often
    LARGE_DIGITS: ClassVar[tuple[int, int]] = (5, 9)
    # a two-digit carry: a running sum (column sum plus carry in) of 100 or more below it, which
    # an N x 1 product never reaches
    LARGE_CARRY: ClassVar[int] = 10
    # redraws before a planted problem gives up; of uniform 5 x 1..3-digit problems about one in
    # eleven qualifies, of 2 x 2-digit ones about one in eighty
    MAX_REDRAWS: ClassVar[int] = 10_000

    def __init__(
        self,
        max_digits: int = 5,
        min_digits: int = 1,
        answer_format: str = "autoregressive",
        max_multiplier_digits: int | None = None,
        min_multiplier_digits: int = 1,
        large_digit_fraction: float = 0.0,
        large_carry_fraction: float = 0.0,
        large_carry_run: int = 1,
    ) -> None:
        super().__init__(max_digits=max_digits, min_digits=min_digits, answer_format=answer_format)
        check_fraction(large_digit_fraction, "large_digit_fraction")
        check_fraction(large_carry_fraction, "large_carry_fraction")
        if max_multiplier_digits is not None:
            check_digit_range(min_multiplier_digits, max_multiplier_digits, "multiplier_digits")
        elif min_multiplier_digits != 1:
            raise UserError("min_multiplier_digits needs max_multiplier_digits: set both, or neither")
        self.max_multiplier_digits = max_multiplier_digits
        self.min_multiplier_digits = min_multiplier_digits
        self.large_digit_fraction = float(large_digit_fraction)
        self.large_carry_fraction = float(large_carry_fraction)
        if self.large_carry_fraction and min(max_digits, self.multiplier_range[1]) < 2:
            raise UserError("large_carry_fraction plants carries of 10 or more, which need both operands to have "
                            "2 or more digits; raise max_digits (and max_multiplier_digits) or leave it at 0")
        if self.large_carry_fraction and self.large_digit_fraction:
            raise UserError("large_digit_fraction and large_carry_fraction are two plants of large carries; "
                            "set one of them and leave the other at 0")
        self.large_carry_run = self._checked_carry_run(large_carry_run)

    def _checked_carry_run(self, run: int) -> int:
        if isinstance(run, bool) or not isinstance(run, int) or run < 1:
            raise UserError(f"large_carry_run must be a whole number of columns >= 1, got {run!r}")
        if run > 1 and not self.large_carry_fraction:
            raise UserError("large_carry_run shapes the large-carry plant: set large_carry_fraction as well "
                            "(e.g. 0.5), or leave large_carry_run at 1")
        # columns 0 and 1 never take a carry of 10 (a single product plus nothing, or two
        # products plus at most 8), so the longest run is the product's columns less two
        longest = self.digit_range[1] + self.multiplier_range[1] - 2
        if run > longest:
            raise UserError(f"large_carry_run={run}: operands of up to {self.digit_range[1]} x "
                            f"{self.multiplier_range[1]} digits carry {self.LARGE_CARRY} or more into at most "
                            f"{longest} columns in a row; lower it or sample longer operands")
        return run

    def draw_problem(self, rng: random.Random, first: tuple[int, int], second: tuple[int, int]) -> Example:
        # no draw for a plant when there is none: the plain stream, draw for draw
        if self.large_digit_fraction and rng.random() < self.large_digit_fraction:
            i, j = rng.randint(*first), rng.randint(*second)
            return self.make(large_digit_number(rng, i), large_digit_number(rng, j))
        if self.large_carry_fraction and rng.random() < self.large_carry_fraction:
            return self.draw_large_carry(rng, first, second)
        return super().draw_problem(rng, first, second)

    def draw_large_carry(self, rng: random.Random, first: tuple[int, int], second: tuple[int, int]) -> Example:
        """A plain problem of these digit ranges, redrawn until a carry of LARGE_CARRY or more
        enters `large_carry_run` of its columns in a row; a plain one where these ranges cannot
        carry that much (a one-digit operand)."""
        if min(first[1], second[1]) < 2:
            return super().draw_problem(rng, first, second)
        for _ in range(self.MAX_REDRAWS):
            i, j = rng.randint(*first), rng.randint(*second)
            # too short for the run: the same conditional draw, without drawing its digits
            if min(i, j) < 2 or i + j - 2 < self.large_carry_run:
                continue
            example = self.make(random_with_digits(rng, i), random_with_digits(rng, j))
            if longest_large_carry_run(*example.operands, self.LARGE_CARRY) >= self.large_carry_run:
                return example
        raise UserError(f"no problem with operands of {first} and {second} digits carried {self.LARGE_CARRY} or "
                        f"more into {self.large_carry_run} column(s) in a row in {self.MAX_REDRAWS} draws; sample "
                        f"longer operands, or lower large_carry_run or large_carry_fraction")

    @property
    def multiplier_range(self) -> tuple[int, int]:
        """The digit counts the multiplier is sampled from."""
        return self.second_operand_range(*self.digit_range)

    def second_operand_range(self, lo: int, hi: int) -> tuple[int, int]:
        if self.max_multiplier_digits is None:
            return lo, hi
        return (self.min_multiplier_digits, self.max_multiplier_digits)

    @staticmethod
    def compute(a: int, b: int) -> int:
        return a * b

    @classmethod
    def max_answer_digits(cls, digits_a: int, digits_b: int) -> int:
        # A d1-digit times a d2-digit number has at most d1 + d2 digits.
        return digits_a + digits_b

    def running_sums(self, example: Example) -> list[int]:
        return running_sums(*example.operands)

    def partial_products(self, example: Example) -> list[tuple[int, ...]]:
        a, b = example.operands
        return column_products(a, b, len(str(b)))[1]

    @property
    def max_partial_products(self) -> int:
        return self.multiplier_range[1]

    @property
    def max_carry(self) -> int:
        # a column adds at most k products of 81 and its carry c, so c <= (81k + c) // 10: c <= 9k,
        # k the shorter operand's most digits
        return 9 * min(self.digit_range[1], self.multiplier_range[1])

    def can_read(self, digits_a: int, digits_b: int) -> bool:
        return self.max_multiplier_digits is None or digits_b <= self.max_multiplier_digits

    def check_multiplier(self, digits: int) -> None:
        """UserError when a run of this task cannot read a multiplier of `digits` digits: an
        N x k run learned to read k or fewer (one multiplier head per digit, at most)."""
        if self.max_multiplier_digits is not None and digits > self.max_multiplier_digits:
            raise UserError(
                f"this run multiplies by multipliers of up to {self.max_multiplier_digits} digits and "
                f"never learned to read a {digits}-digit one; put the longer number first "
                f"(the multiplicand may be any length) or use a run trained on longer multipliers"
            )

    def config(self) -> dict[str, Any]:
        out = super().config()
        if self.max_multiplier_digits is not None:  # older configs stay as they were
            out["max_multiplier_digits"] = self.max_multiplier_digits
            out["min_multiplier_digits"] = self.min_multiplier_digits
        if self.large_digit_fraction:
            out["large_digit_fraction"] = self.large_digit_fraction
        if self.large_carry_fraction:
            out["large_carry_fraction"] = self.large_carry_fraction
        if self.large_carry_run != 1:
            out["large_carry_run"] = self.large_carry_run
        return out



def longest_large_carry_run(a: int, b: int, large: int) -> int:
    """The most columns in a row of a * b whose carry in is `large` or more."""
    return max(large_carry_runs(a, b, large))


def large_digit_number(rng: random.Random, k: int) -> int:
    """A `k`-digit number whose every digit is drawn uniformly from LARGE_DIGITS."""
    lo, hi = MultiplicationTask.LARGE_DIGITS
    return int("".join(str(rng.randint(lo, hi)) for _ in range(k)))
