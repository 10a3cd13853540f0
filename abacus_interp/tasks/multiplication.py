"""Multi-digit multiplication: `21*43=` -> `2604` (12*34=408), all LSD-first."""

from __future__ import annotations

from typing import ClassVar

from abacus_interp.tasks.binary_op import BinaryOpTask


class MultiplicationTask(BinaryOpTask):
    """a * b with operands of `min_digits`..`max_digits` digits; same sampling as addition."""

    name: ClassVar[str] = "multiplication"
    op_symbol: ClassVar[str] = "*"
    op_aliases: ClassVar[tuple[str, ...]] = ("x", "×")

    def __init__(self, max_digits: int = 5, min_digits: int = 1) -> None:
        super().__init__(max_digits=max_digits, min_digits=min_digits)

    @staticmethod
    def compute(a: int, b: int) -> int:
        return a * b

    @classmethod
    def max_answer_digits(cls, digits_a: int, digits_b: int) -> int:
        # A d1-digit times a d2-digit number has at most d1 + d2 digits.
        return digits_a + digits_b
