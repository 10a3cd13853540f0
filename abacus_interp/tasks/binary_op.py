"""Shared machinery for two-operand digit tasks (addition, multiplication).

Both tasks use the same prompt layout `rev(a) OP rev(b) =`, the same LSD-first target and
the same sampling scheme: first a digit-count cell (i, j) uniformly over [min, max]^2, then
operands with exactly i and j digits. Sampling the cell first (rather than the numbers)
keeps short problems from being swamped by long ones, and gives the (i, j) evaluation grid
of the Abacus paper for free through `sample_cell`.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError
from abacus_interp.tasks.base import (
    DIGIT_SYMBOLS,
    Example,
    Task,
    check_count,
    check_digit_range,
    check_operand,
    decimal_value,
    from_lsd,
    random_with_digits,
    reject_negative,
    to_lsd,
)

# "autoregressive": each answer digit is predicted after reading the previous answer digit,
# so a carry reaches the next digit through the answer itself, in one pass.
# "slots": the example and the loss are the same, but the model reads a placeholder in every
# answer position, so all answer digits are computed in one forward pass from the prompt
# alone; under causal attention a carry can then only move up one answer position per layer
# application, and a carry chain of length c needs about c loops.
ANSWER_FORMATS = ("autoregressive", "slots")


class BinaryOpTask(Task):
    """`a OP b` on non-negative integers, operands and answer written LSD-first.

    `answer_format` (see ANSWER_FORMATS) decides what the model reads in the answer
    positions; the strings of an Example do not change with it.

    `max_digits`/`min_digits` only bound *sampling*: `make` and `from_human` accept any
    size, so longer problems can be built for length-generalisation tests.
    """

    positional: ClassVar[str] = "abacus"
    has_digit_grid: ClassVar[bool] = True
    op_symbol: ClassVar[str]
    # The placeholder the model reads in every answer position under answer_format="slots".
    slot_symbol: ClassVar[str] = "_"
    # Other characters a human may type for the operator (e.g. "x" for "*").
    op_aliases: ClassVar[tuple[str, ...]] = ()

    def __init__(self, max_digits: int, min_digits: int = 1, answer_format: str = "autoregressive") -> None:
        check_digit_range(min_digits, max_digits)
        if answer_format not in ANSWER_FORMATS:
            raise UserError(f"answer_format={answer_format!r}; choose one of {ANSWER_FORMATS}")
        self.max_digits = max_digits
        self.min_digits = min_digits
        self.answer_format = answer_format
        symbols = DIGIT_SYMBOLS + self.op_symbol + "=" + (self.slot_symbol if self.answer_slots else "")
        self.vocab = Vocab(symbols=tuple(symbols), separator="")

    @property
    def digit_range(self) -> tuple[int, int]:
        return (self.min_digits, self.max_digits)

    @property
    def answer_slots(self) -> bool:
        """True when a model of this task must read placeholders instead of its own answer
        digits (ModelConfig.answer_slots follows it)."""
        return self.answer_format == "slots"

    # -- the operation ----------------------------------------------------------------
    @staticmethod
    def compute(a: int, b: int) -> int:
        raise NotImplementedError

    @classmethod
    def max_answer_digits(cls, digits_a: int, digits_b: int) -> int:
        """Most digits the answer can have for operands of these digit counts."""
        raise NotImplementedError

    # -- generation -------------------------------------------------------------------
    def make(self, *operands: Any) -> Example:
        if len(operands) != 2:
            raise UserError(f"{self.name} takes exactly 2 operands, got {len(operands)}")
        a = check_operand(operands[0], "first operand")
        b = check_operand(operands[1], "second operand")
        answer = self.compute(a, b)
        prompt = f"{to_lsd(a)}{self.op_symbol}{to_lsd(b)}="
        return Example(prompt=prompt, target=to_lsd(answer), operands=(a, b), answer=answer)

    def sample(
        self,
        n: int,
        rng: random.Random,
        min_digits: int | None = None,
        max_digits: int | None = None,
    ) -> list[Example]:
        """`n` examples: cell (i, j) uniform over [min_digits, max_digits]^2, then operands
        with exactly i and j digits. Defaults to the task's own digit range."""
        check_count(n)
        lo = self.min_digits if min_digits is None else min_digits
        hi = self.max_digits if max_digits is None else max_digits
        check_digit_range(lo, hi)
        j_lo, j_hi = self.second_operand_range(lo, hi)
        return [self.draw_problem(rng, (lo, hi), (j_lo, j_hi)) for _ in range(n)]

    def draw_problem(self, rng: random.Random, first: tuple[int, int], second: tuple[int, int]) -> Example:
        """One problem of `sample`: digit counts uniform over the operands' ranges, then uniform
        operands with exactly those counts (a task that plants problems overrides this)."""
        i, j = rng.randint(*first), rng.randint(*second)
        return self.make(random_with_digits(rng, i), random_with_digits(rng, j))

    def second_operand_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The digit counts the second operand is drawn from when the first's are lo..hi: the
        same, unless the task gives the second operand a range of its own (N x k multiplication)."""
        return lo, hi

    def sample_cell(self, n: int, rng: random.Random, i: int, j: int) -> list[Example]:
        """`n` examples whose operands have exactly `i` and `j` digits (one grid cell)."""
        check_count(n)
        check_digit_range(i, i, "digits (i)")
        check_digit_range(j, j, "digits (j)")
        return [self.make(random_with_digits(rng, i), random_with_digits(rng, j)) for _ in range(n)]

    def can_read(self, digits_a: int, digits_b: int) -> bool:
        """Whether a run of this task can read operands of these digit counts at all (an N x k
        multiplication run reads multipliers of up to k digits); evaluation skips the others."""
        return True

    # -- reading model output ---------------------------------------------------------
    def parse(self, completion: str) -> int | None:
        return from_lsd(completion.strip())

    def to_human(self, completion: str) -> str:
        return completion.strip()[::-1]

    def from_human(self, text: str) -> Example:
        ops = "".join(re.escape(s) for s in (self.op_symbol, *self.op_aliases))
        m = re.fullmatch(rf"\s*([0-9]+)\s*[{ops}]\s*([0-9]+)\s*=?\s*", text)
        if m is None:
            example = f"123{self.op_symbol}45"
            reject_negative(text, self.name, example)
            raise UserError(
                f"could not read {text!r} as a {self.name} problem: expected two non-negative "
                f"integers in normal (most-significant first) order joined by "
                f"'{self.op_symbol}', e.g. '{example}'"
            )
        return self.make(decimal_value(m.group(1)), decimal_value(m.group(2)))

    # -- sizes and config -------------------------------------------------------------
    def max_sequence_length(self, max_digits: int | None = None) -> int:
        """Prompt (d + 1 + k + 1) + answer + EOS for a first operand of up to d = `max_digits`
        digits and a second of up to k (= d unless `second_operand_range` says otherwise)."""
        d = self.max_digits if max_digits is None else max_digits
        check_digit_range(1, d)
        k = self.second_operand_range(1, d)[1]
        return d + 1 + k + 1 + self.max_answer_digits(d, k) + 1

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_digits": self.max_digits, "min_digits": self.min_digits}
        if self.answer_format != "autoregressive":  # older configs stay as they were
            out["answer_format"] = self.answer_format
        return out
