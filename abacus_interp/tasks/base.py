"""The task interface shared by every problem family, plus the digit helpers they use.

A task owns three things: its vocabulary, its generator of examples, and the two-way
translation between what a human types ("123+456" -> "579") and what the model reads and
writes ("321+654=" -> "975"). Numbers are written least-significant digit first (LSD-first),
one token per digit, as in the Abacus paper, because that is the order in which carries
propagate: a model can emit answer digit i after seeing operand digits 0..i.
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError

DIGIT_SYMBOLS = "0123456789"


@dataclass(frozen=True)
class Example:
    """One problem in both orders: model order for training, human values for analysis."""

    prompt: str  # model order, e.g. "321+654="
    target: str  # model order, e.g. "975" (the EOS is added by the encoder)
    operands: tuple[int, ...]  # human values, e.g. (123, 456)
    answer: int | str  # human value, e.g. 579 (sorting: "bac")


class Task(ABC):
    """A problem family: vocabulary, seeded generator, formatting, parsing and checking.

    Subclasses set the class attributes `name` (registry key) and `positional` (the
    positional scheme a model trained on the task should use: "abacus" or "learned"),
    and build `self.vocab` in `__init__`.
    """

    name: ClassVar[str]
    positional: ClassVar[str]
    vocab: Vocab

    # Capabilities: what the evaluation and the analyses may ask of a task. Callers test
    # these, never hasattr() or the task's name, so a new task opts in by declaring them.
    has_carries: ClassVar[bool] = False
    """Digit addition: carry chains and cascades exist (carry buckets, carry attention,
    lock-in by carry chain)."""
    has_fixed_split: ClassVar[bool] = False
    """A finite problem set split once into train and test (`full_split`), as in grokking;
    otherwise problems are generated."""
    has_digit_grid: ClassVar[bool] = False
    """Two operands of any digit counts, sampled cell by cell (`sample_cell(n, rng, i, j)`,
    `max_answer_digits(i, j)`): the Abacus paper's (digits of a, digits of b) exact-match
    grid, its accuracy-vs-loops digit sets and its length sections apply."""

    @property
    def digit_range(self) -> tuple[int, int] | None:
        """(min, max) digits of the numbers in a sampled problem, when `sample` takes
        `min_digits`/`max_digits` (length generalisation sets); None otherwise."""
        return None

    @property
    def length_range(self) -> tuple[int, int] | None:
        """(min, max) characters of a sampled problem's human text, when `sample` takes
        `min_len`/`max_len` (accuracy by problem length, longer problems than trained; the
        prompt adds '='); None otherwise."""
        return None

    @property
    def has_sampled_split(self) -> bool:
        """Generated problems fall into train and test by a fixed rule on the problem itself
        (a stable hash of its text): `sample(n, rng, split="test")` draws only problems that
        `sample(n, rng)` (split="train", what training uses) never draws, so a held-out set
        is never trained on. A property, as it may depend on the task's options; the
        counterpart of `has_fixed_split` for a problem set too large to enumerate."""
        return False

    @property
    def modulus(self) -> int | None:
        """p when every answer is a residue mod p (its Fourier analysis applies); else None."""
        return None

    def full_split(self, split: str = "train") -> list[Example]:
        """Every example of `split` ("train" or "test"); only when `has_fixed_split`."""
        raise NotImplementedError(f"task {self.name!r} generates problems; it has no fixed {split!r} split")

    @property
    def answer_slots(self) -> bool:
        """True when the model must read a placeholder instead of each answer token (the
        answer is filled in one forward pass); ModelConfig.answer_slots follows it."""
        return False

    @property
    def answer_token_ids(self) -> tuple[int, ...] | None:
        """Vocabulary ids an answer token can take, for a readout restricted to them
        (`train.readout="answer_symbols"`); None: the task declares none (use every token)."""
        return None

    def running_sums(self, example: Example) -> list[int] | None:
        """One integer per answer digit whose last decimal digit is that answer digit and
        whose rest is the carry it passes on (multiplication's column sum plus carry in), the
        target of `train.running_sum_loss`; None: the task has no such quantity."""
        return None

    def carries_in(self, example: Example) -> list[int] | None:
        """The carry into each answer column (0 into the first), the targets of
        `train.carry_loss`: read off `running_sums`, whose rest past the last digit is the carry
        out. None: the task has no running sums."""
        sums = self.running_sums(example)
        return None if sums is None else [0] + [total // 10 for total in sums[:-1]]

    @property
    def max_carry(self) -> int | None:
        """The largest carry into an answer column this task's problems can make; None: the
        task declares no carries."""
        return None

    def item_closers(self, example: Example) -> list[tuple[int, int]] | None:
        """Per item of a list but the last, (the prompt position of the separator that closes
        it, its value): the targets of `train.order_loss`. None: the task's prompt is no list."""
        return None

    def partial_products(self, example: Example) -> list[tuple[int, ...]] | None:
        """Per answer digit i, the partial products a_(i-j) * b_j that its column adds, one per
        multiplier digit j (0 where a_(i-j) does not exist): the targets of
        `train.partial_product_loss`. None: the task has no such quantity."""
        return None

    @property
    def max_partial_products(self) -> int | None:
        """The most partial products one answer digit of this task adds (the multiplier's
        longest digit count); None: the task has none."""
        return None

    def sample_held_out(self, n: int, rng: random.Random) -> list[Example]:
        """`n` problems for evaluation: from the test split when the task has one (fixed or
        sampled), so none was trained on; otherwise a plain sample, as a generated problem
        space is too large for a repeat of a training problem to matter."""
        if self.has_sampled_split or (self.has_fixed_split and self.full_split("test")):
            return self.sample(n, rng, split="test")
        return self.sample(n, rng)

    @abstractmethod
    def sample(self, n: int, rng: random.Random, **kw: Any) -> list[Example]:
        """Draw `n` examples using only `rng`, so equal seeds give equal lists."""

    @abstractmethod
    def make(self, *operands: Any) -> Example:
        """Build the example for the given human-order operands."""

    @abstractmethod
    def parse(self, completion: str) -> int | str | None:
        """Model-order completion (EOS stripped) -> human value, or None if malformed."""

    @abstractmethod
    def from_human(self, text: str) -> Example:
        """Human text such as "123+456" -> Example; UserError naming the expected format."""

    @abstractmethod
    def to_human(self, completion: str) -> str:
        """Model-order completion -> human-order text, best effort (never raises), so a
        garbled model output can still be shown to a user."""

    @abstractmethod
    def max_sequence_length(self, **kw: Any) -> int:
        """Upper bound on prompt + target + EOS tokens for the given size kwargs."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """JSON-safe constructor kwargs: `get_task(self.name, **self.config())` rebuilds it."""

    def check(self, example: Example, completion: str) -> bool:
        """True when the completion is exactly the target, token for token.

        Exact match rather than value match, because a model that writes a redundant
        leading zero ("9750" for 579) has not produced the answer it was trained to produce.
        """
        return self.vocab.split(completion.strip()) == self.vocab.split(example.target)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"


# ---------------------------------------------------------------------------------------
# Helpers shared by the tasks.


def reject_negative(text: str, task_name: str, example: str) -> None:
    """A UserError for a problem with a minus sign before a number: the arithmetic tasks
    read non-negative integers only, and "-5+3" would otherwise get the generic format error."""
    if re.search(r"-\s*[0-9]", text):
        raise UserError(
            f"{text!r} has a negative operand: negative numbers are not part of the {task_name} task, "
            f"which takes non-negative integers, e.g. '{example}'"
        )


# Python (3.11+) refuses int <-> str conversions of more than 4300 digits
# (sys.get_int_max_str_digits), a guard for servers parsing untrusted text. A problem here
# may have operands of any length (length extrapolation, `solve` on a model without a
# position table), so numbers are converted in pieces of at most this many digits, which the
# guard allows, leaving the interpreter's setting alone for the rest of the process.
_DIGITS_PER_PIECE = 2000


def decimal_text(n: int) -> str:
    """A non-negative integer's decimal digits, most significant first, at any length
    (str(n) refuses more than 4300): split by a power of ten, each half converted alone."""
    if n < 10**_DIGITS_PER_PIECE:
        return str(n)
    low_digits = digit_count_bound(n) // 2
    high, low = divmod(n, 10**low_digits)
    return decimal_text(high) + decimal_text(low).zfill(low_digits)


def decimal_value(text: str) -> int:
    """The integer a string of decimal digits (most significant first) writes, at any length
    (int(text) refuses more than 4300 digits): each half read alone, then joined."""
    if len(text) <= _DIGITS_PER_PIECE:
        return int(text)
    low_digits = len(text) // 2
    return decimal_value(text[:-low_digits]) * 10**low_digits + decimal_value(text[-low_digits:])


def digit_count_bound(n: int) -> int:
    """At least the number of decimal digits of n >= 0, at most one more (from its bits,
    without converting it); `digit_count` is exact."""
    return int(n.bit_length() * 0.30102999566398120) + 1  # log10(2) digits per bit


def digit_count(n: int) -> int:
    """Decimal digits of a non-negative integer (0 has one), at any length."""
    bound = digit_count_bound(n)
    return bound if n >= 10 ** (bound - 1) or bound == 1 else bound - 1


def to_lsd(n: int) -> str:
    """Non-negative integer -> its decimal digits, least-significant first (123 -> "321")."""
    if n < 0:
        raise ValueError(f"to_lsd needs a non-negative integer, got {n}")
    return decimal_text(n)[::-1]


def from_lsd(digits: str) -> int | None:
    """LSD-first digit string -> integer ("321" -> 123); None if empty or not all digits.

    Lenient about trailing zeros ("9750" -> 579) so analyses can read the value a model
    meant; `Task.check` is the strict judge.
    """
    if not digits or any(c not in DIGIT_SYMBOLS for c in digits):
        return None
    return decimal_value(digits[::-1])


def number_for_message(n: int, most_digits: int = 24) -> str:
    """An integer as a message shows it: in full up to `most_digits` digits, else its length
    and ends ("a 5000-digit number 12345...67890"), so an error about it stays one line."""
    sign, magnitude = ("-", -n) if n < 0 else ("", n)
    if digit_count_bound(magnitude) <= most_digits:
        return str(n)
    text = decimal_text(magnitude)
    return f"a {len(text)}-digit number {sign}{text[:5]}...{text[-5:]}"


def lsd_text_to_human(text: str) -> str:
    """Model-order text of a digit task -> the usual order, for showing problems to people:
    each run of digits is one number written LSD-first, so every run is reversed
    ("3303+6224=9527" -> "3033+4226=7259"); signs, operators, labels and padding stay put.
    Not for tasks whose tokens are whole numbers (modular addition's "12 45 =")."""
    return re.sub(r"[0-9]+", lambda m: m.group()[::-1], text)


def random_with_digits(rng: random.Random, k: int) -> int:
    """A uniform integer with exactly `k` decimal digits (1-digit numbers include 0)."""
    if k < 1:
        raise ValueError(f"a number needs at least 1 digit, got {k}")
    if k == 1:
        return rng.randint(0, 9)
    return rng.randint(10 ** (k - 1), 10**k - 1)


def check_count(n: int) -> None:
    """Reject a bad sample size early with a message saying what is expected."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer number of examples, got {n!r}")


def check_operand(value: Any, what: str = "operand") -> int:
    """Reject anything that is not a non-negative int (bools included), naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def check_fraction(value: float, name: str) -> None:
    """UserError unless `value` is a number in [0, 1] (a plant's share of the problems)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise UserError(f"{name} must be a number in [0, 1], got {value!r}")


def check_digit_range(min_digits: int, max_digits: int, what: str = "digits") -> None:
    """Validate a [min, max] digit-count range (both inclusive)."""
    for label, v in ((f"min_{what}", min_digits), (f"max_{what}", max_digits)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"{label} must be an integer >= 1, got {v!r}")
    if min_digits > max_digits:
        raise UserError(
            f"min_{what} ({min_digits}) is larger than max_{what} ({max_digits}); "
            f"pass min_{what} <= max_{what}"
        )
