"""Multi-digit addition, the Abacus paper's main task: `321+654=` -> `975` (123+456=579)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from abacus_interp.tasks.base import Example, check_digit_range, check_fraction
from abacus_interp.tasks.binary_op import BinaryOpTask
from abacus_interp.tasks.carries import sample_with_cascade


class AdditionTask(BinaryOpTask):
    """a + b with operands of `min_digits`..`max_digits` digits, all LSD-first.

    Carry labels for interpretability (carry into each digit, cascade lengths) live in
    `abacus_interp.tasks.carries`.

    `cascade_fraction`: the share of sampled problems that carry a planted carry cascade
    (length L uniform in 1..max_digits, both operands of a uniform length in L..max_digits). Under uniform digits a
    cascade of length L has probability ~10^-(L-1), so a model never sees long ones; a loop
    that must propagate carries needs them in its training data.
    """

    name: ClassVar[str] = "addition"
    has_carries: ClassVar[bool] = True
    op_symbol: ClassVar[str] = "+"

    def __init__(
        self,
        max_digits: int = 10,
        min_digits: int = 1,
        answer_format: str = "autoregressive",
        cascade_fraction: float = 0.0,
    ) -> None:
        super().__init__(max_digits=max_digits, min_digits=min_digits, answer_format=answer_format)
        check_fraction(cascade_fraction, "cascade_fraction")
        self.cascade_fraction = float(cascade_fraction)

    def sample(self, n: int, rng: random.Random, min_digits: int | None = None,
               max_digits: int | None = None) -> list[Example]:
        if not self.cascade_fraction:  # the plain stream, draw for draw
            return super().sample(n, rng, min_digits, max_digits)
        lo = self.min_digits if min_digits is None else min_digits
        hi = self.max_digits if max_digits is None else max_digits
        check_digit_range(lo, hi)
        out = []
        for _ in range(n):
            if rng.random() < self.cascade_fraction:
                length = rng.randint(1, hi)
                digits = rng.randint(max(lo, length), hi)
                out.append(self.make(*sample_with_cascade(length, digits, rng)))
            else:
                out.extend(super().sample(1, rng, lo, hi))
        return out

    def config(self) -> dict[str, Any]:
        out = super().config()
        if self.cascade_fraction:  # older configs stay as they were
            out["cascade_fraction"] = self.cascade_fraction
        return out

    @staticmethod
    def compute(a: int, b: int) -> int:
        return a + b

    @classmethod
    def max_answer_digits(cls, digits_a: int, digits_b: int) -> int:
        # The sum of a d1-digit and a d2-digit number has at most max(d1, d2) + 1 digits.
        return max(digits_a, digits_b) + 1
