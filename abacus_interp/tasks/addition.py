"""Multi-digit addition, the Abacus paper's main task: `321+654=` -> `975` (123+456=579)."""

from __future__ import annotations

from typing import ClassVar

from abacus_interp.tasks.binary_op import BinaryOpTask


class AdditionTask(BinaryOpTask):
    """a + b with operands of `min_digits`..`max_digits` digits, all LSD-first.

    Carry labels for interpretability (carry into each digit, cascade lengths) live in
    `abacus_interp.tasks.carries`.
    """

    name: ClassVar[str] = "addition"
    op_symbol: ClassVar[str] = "+"

    def __init__(self, max_digits: int = 10, min_digits: int = 1, answer_format: str = "autoregressive") -> None:
        super().__init__(max_digits=max_digits, min_digits=min_digits, answer_format=answer_format)

    @staticmethod
    def compute(a: int, b: int) -> int:
        return a + b

    @classmethod
    def max_answer_digits(cls, digits_a: int, digits_b: int) -> int:
        # The sum of a d1-digit and a d2-digit number has at most max(d1, d2) + 1 digits.
        return max(digits_a, digits_b) + 1
