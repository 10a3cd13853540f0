"""Sorting labelled numbers: `a:05898,b:1,c:372012=` -> `bac`.

Each number gets a letter label and is written LSD-first; the answer lists the labels in
ascending order of value (ties keep letter order, i.e. a stable sort). Answering with labels
rather than the numbers keeps the target short and makes every answer token a pointer back
to one operand, which is what attention-pattern analyses want to see.

Counting past the trained number of items needs labels the model has read: `label_pool`
puts that many letters in the vocabulary, and `random_labels` gives each example a random
set of them (in letter order), so a model trained on up to 5 numbers has seen every letter
and must copy a number's label rather than infer it from its place in the list.

Under uniform digits two numbers are almost always told apart by their lengths or their
leading digits, so a model never needs to look further down; `shared_prefix_fraction` plants
lists whose numbers agree on every digit above a random depth (`shared_prefix_values`).
Nor, with each number's length drawn on its own, do two numbers often share a length (with 1-5
digits, as extrap-sort: a pair in five, all five numbers of a list one time in 625), while every
list of the length-extrapolation rows does: `same_length_fraction` plants lists of uniform numbers
of one common length. `near_twin_fraction` plants one near tie in a list left otherwise uniform:
a number's twin, equal to it above a random depth (`near_twin`), so the two are compared below
their leading digit while every other comparison of the list stays as a uniform draw makes it.
"""

from __future__ import annotations

import random
import re
import string
from typing import Any, ClassVar

from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError
from abacus_interp.tasks.base import (
    DIGIT_SYMBOLS,
    Example,
    Task,
    check_count,
    check_digit_range,
    check_fraction,
    check_operand,
    decimal_value,
    random_with_digits,
    reject_negative,
    to_lsd,
)

LETTERS = string.ascii_lowercase


class SortingTask(Task):
    """Sort `min_numbers`..`max_numbers` numbers of `min_digits`..`max_digits` digits each."""

    name: ClassVar[str] = "sorting"
    positional: ClassVar[str] = "abacus"
    # the options that plant lists a uniform draw rarely gives; `plain()` turns them off
    PLANTS: ClassVar[tuple[str, ...]] = ("shared_prefix_fraction", "same_length_fraction", "near_twin_fraction")

    def __init__(
        self,
        max_numbers: int = 5,
        max_digits: int = 6,
        min_numbers: int = 2,
        min_digits: int = 1,
        label_pool: int | None = None,
        random_labels: bool = False,
        shared_prefix_fraction: float = 0.0,
        same_length_fraction: float = 0.0,
        near_twin_fraction: float = 0.0,
    ) -> None:
        check_digit_range(min_numbers, max_numbers, "numbers")
        check_fraction(shared_prefix_fraction, "shared_prefix_fraction")
        check_fraction(same_length_fraction, "same_length_fraction")
        check_fraction(near_twin_fraction, "near_twin_fraction")
        if shared_prefix_fraction and same_length_fraction:
            raise UserError("shared_prefix_fraction and same_length_fraction are two plants of lists of one length; "
                            "set one of them, or neither")
        check_digit_range(min_digits, max_digits)
        pool = max_numbers if label_pool is None else label_pool
        if not max_numbers <= pool <= len(LETTERS):
            raise UserError(
                f"max_numbers={max_numbers}, label_pool={label_pool}: a list needs a letter per "
                f"number and only {len(LETTERS)} exist; pass max_numbers <= label_pool <= {len(LETTERS)}"
            )
        self.max_numbers = max_numbers
        self.min_numbers = min_numbers
        self.max_digits = max_digits
        self.min_digits = min_digits
        self.label_pool = label_pool
        self.random_labels = random_labels
        # the share of sampled lists whose numbers agree above a random depth (`sample`)
        self.shared_prefix_fraction = float(shared_prefix_fraction)
        # the share of sampled lists whose numbers all have one length, drawn once per list
        self.same_length_fraction = float(same_length_fraction)
        # the share of sampled lists in which one number is replaced by another's near twin (`near_twin`)
        self.near_twin_fraction = float(near_twin_fraction)
        # every letter the vocabulary holds: a list may have up to this many numbers
        self.labels = LETTERS[:pool]
        self.vocab = Vocab(symbols=tuple(DIGIT_SYMBOLS + self.labels + ":,="), separator="")

    @property
    def digit_range(self) -> tuple[int, int]:
        return (self.min_digits, self.max_digits)

    @property
    def max_items(self) -> int:
        """The longest list this task's vocabulary can label."""
        return len(self.labels)

    def plain(self) -> SortingTask:
        """This task without its plants: every list uniform, as the eval's rows score them, so a
        run trained with a plant is scored on the same lists as one without."""
        return SortingTask(**{**self.config(), **{plant: 0.0 for plant in self.PLANTS}})

    def make(self, *operands: Any, labels: str | None = None) -> Example:
        """The example sorting `operands`, labelled a, b, c, ... or by `labels` (one distinct
        letter of the vocabulary per number)."""
        if not 1 <= len(operands) <= self.max_items:
            raise UserError(
                f"sorting takes 1 to {self.max_items} numbers (a letter each: max_numbers={self.max_numbers}, "
                f"label_pool={self.label_pool}), got {len(operands)}; build the task with a larger label_pool for more"
            )
        values = tuple(check_operand(v, "number to sort") for v in operands)
        if labels is None:
            labels = self.labels[: len(values)]
        elif len(labels) != len(values) or len(set(labels)) != len(labels) or not set(labels) <= set(self.labels):
            raise UserError(f"labels {labels!r}: need {len(values)} distinct letters of {self.labels!r}")
        prompt = ",".join(f"{lab}:{to_lsd(v)}" for lab, v in zip(labels, values, strict=True)) + "="
        # sorted() is stable, so equal values keep their letter order.
        order = sorted(range(len(values)), key=lambda k: values[k])
        answer = "".join(labels[k] for k in order)
        return Example(prompt=prompt, target=answer, operands=values, answer=answer)

    def sample(
        self,
        n: int,
        rng: random.Random,
        min_numbers: int | None = None,
        max_numbers: int | None = None,
        min_digits: int | None = None,
        max_digits: int | None = None,
    ) -> list[Example]:
        """`n` examples: a count uniform over [min_numbers, max_numbers], then each number's
        digit count uniform over [min_digits, max_digits] (defaults: the task's ranges). With
        `shared_prefix_fraction`, that share of the lists instead takes one length d uniform
        over the digit range and a depth uniform over 1..d-1, and its numbers share every digit
        above the lowest `depth` (`shared_prefix_values`; one-digit lists share nothing). With
        `same_length_fraction`, that share of the lists draws one length for all its numbers. With
        `near_twin_fraction`, that share of the lists then has one number replaced by a near twin
        of another (`near_twin`). A plant
        is part of the task's distribution, like addition's cascade_fraction: held-out sets
        drawn from this task hold it too; the eval's rows draw from `plain()`, which has none."""
        check_count(n)
        lo_n = self.min_numbers if min_numbers is None else min_numbers
        hi_n = self.max_numbers if max_numbers is None else max_numbers
        lo_d = self.min_digits if min_digits is None else min_digits
        hi_d = self.max_digits if max_digits is None else max_digits
        check_digit_range(lo_n, hi_n, "numbers")
        check_digit_range(lo_d, hi_d)
        if hi_n > self.max_items:
            raise UserError(
                f"max_numbers={hi_n} exceeds the task's {self.max_items} letter labels; "
                f"build SortingTask(label_pool={hi_n}) instead"
            )
        out = []
        for _ in range(n):
            # no draw for the plant when there is none: the plain stream, draw for draw
            planted = bool(self.shared_prefix_fraction) and rng.random() < self.shared_prefix_fraction
            one_length = bool(self.same_length_fraction) and rng.random() < self.same_length_fraction
            twinned = bool(self.near_twin_fraction) and rng.random() < self.near_twin_fraction
            count = rng.randint(lo_n, hi_n)
            if planted:  # at least the leading digit shared, so every number keeps its `digits` digits
                digits = rng.randint(lo_d, hi_d)
                values = self.shared_prefix_values(count, digits, rng.randint(1, max(1, digits - 1)), rng)
            elif one_length:
                digits = rng.randint(lo_d, hi_d)
                values = [random_with_digits(rng, digits) for _ in range(count)]
            else:
                values = [random_with_digits(rng, rng.randint(lo_d, hi_d)) for _ in range(count)]
            if twinned:
                values = self.near_twin(values, rng)
            out.append(self.make(*values, labels=self.draw_labels(count, rng)))
        return out

    def item_closers(self, example: Example) -> list[tuple[int, int]]:
        """Each number's closing "," (its prompt position) and value, but the last number's,
        which "=" closes: "=" also starts the answer, so it is no item's own summary."""
        commas = [p for p, token in enumerate(self.vocab.split(example.prompt)) if token == ","]
        return list(zip(commas, example.operands[:-1], strict=True))

    @staticmethod
    def shared_prefix_values(count: int, digits: int, depth: int, rng: random.Random) -> list[int]:
        """`count` numbers below 10^digits that agree on every digit above their lowest `depth`
        (a `digits`-digit prefix drawn once, the low digits drawn per number), so the digit
        that orders them lies at or below index `depth`: the lists a comparison of leading
        digits gets wrong. Below depth == digits every number has `digits` digits; at depth ==
        digits they are independent numbers below 10^digits (fewer digits possible)."""
        if not 1 <= depth <= digits:
            raise UserError(f"depth={depth}: the shared digits lie above the lowest 1..{digits}; pass 1 <= depth <= digits")
        low = 10**depth
        top = rng.randrange(10 ** (digits - 1), 10**digits) // low * low
        return [top + rng.randrange(low) for _ in range(count)]

    @staticmethod
    def near_twin(values: list[int], rng: random.Random) -> list[int]:
        """`values` with one number replaced by a near twin of another: of the same length, equal to
        it above a depth uniform over 1..length-1, its lowest `depth` digits drawn anew (as
        `shared_prefix_values`). Whichever of the two is smaller, the next number out after it is
        the other one unless a third lies between them, so the list asks for one comparison below
        the leading digit. Lists of one number, or of one-digit numbers only, come back unchanged."""
        candidates = [k for k, v in enumerate(values) if v >= 10]
        if len(values) < 2 or not candidates:
            return list(values)
        source = rng.choice(candidates)
        replaced = rng.choice([k for k in range(len(values)) if k != source])
        digits = len(str(values[source]))
        low = 10 ** rng.randint(1, digits - 1)
        twin = values[source] // low * low + rng.randrange(low)
        return [twin if k == replaced else v for k, v in enumerate(values)]

    def draw_labels(self, count: int, rng: random.Random) -> str | None:
        """The labels of a list of `count` numbers as training draws them: with random_labels
        `count` distinct letters of the pool in letter order, else None (a, b, c, ...)."""
        return "".join(sorted(rng.sample(self.labels, count))) if self.random_labels else None

    def parse(self, completion: str) -> str | None:
        """The label string if it is made only of this task's labels, else None."""
        text = completion.strip()
        if not text or any(c not in self.labels for c in text):
            return None
        return text

    def to_human(self, completion: str) -> str:
        return completion.strip()

    def from_human(self, text: str) -> Example:
        parts = [p for p in re.split(r"[\s,]+", text.strip().rstrip("=")) if p]
        if not parts or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
            reject_negative(text, self.name, "89850, 1, 210273")
            raise UserError(
                f"could not read {text!r} as numbers to sort: expected non-negative integers "
                "in normal order separated by commas or spaces, e.g. '89850, 1, 210273'"
            )
        return self.make(*(decimal_value(p) for p in parts))

    def max_sequence_length(
        self, max_numbers: int | None = None, max_digits: int | None = None
    ) -> int:
        """k numbers of d digits: k * (label + ':' + d digits) + (k - 1) commas + '=',
        then k answer labels and EOS: k * (d + 4) + 1."""
        k = self.max_numbers if max_numbers is None else max_numbers
        d = self.max_digits if max_digits is None else max_digits
        check_digit_range(1, k, "numbers")
        check_digit_range(1, d)
        return k * (d + 4) + 1

    def config(self) -> dict[str, Any]:
        out = {
            "max_numbers": self.max_numbers,
            "max_digits": self.max_digits,
            "min_numbers": self.min_numbers,
            "min_digits": self.min_digits,
        }
        if self.label_pool is not None:  # older configs stay as they were
            out["label_pool"] = self.label_pool
        if self.random_labels:
            out["random_labels"] = True
        if self.shared_prefix_fraction:
            out["shared_prefix_fraction"] = self.shared_prefix_fraction
        if self.same_length_fraction:
            out["same_length_fraction"] = self.same_length_fraction
        if self.near_twin_fraction:
            out["near_twin_fraction"] = self.near_twin_fraction
        return out
