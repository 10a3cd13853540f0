"""Modular addition for grokking (Nanda et al.): `"a b ="` -> `"c"`, c = (a + b) mod p.

Every residue is a single token (separator " "), so the model cannot use digit structure and
has to discover the Fourier features the analyses look for. The data set is all p^2 pairs,
split once by a seeded permutation into a fixed train set (the first
round(train_fraction * p^2) pairs, or with split_rounding="floor" int(train_fraction * p^2),
Nanda et al.'s count) and the held-out rest; grokking is the test accuracy
jumping long after the train set is memorised, so the split must never move.
"""

from __future__ import annotations

import random
import re
from functools import cached_property
from typing import Any, ClassVar

from abacus_interp.core.tokens import Vocab
from abacus_interp.errors import UserError
from abacus_interp.tasks.base import (
    Example,
    Task,
    check_count,
    check_operand,
    decimal_value,
    number_for_message,
    reject_negative,
)

SPLITS = ("train", "test", "all")
# "round": round(train_fraction * p^2) training pairs; "floor": int(train_fraction * p^2), as
# Nanda et al.'s gen_train_test (3,830 pairs for p=113 at 0.3 where "round" gives 3,831)
SPLIT_ROUNDINGS = ("round", "floor")
# The data set is every one of the p^2 pairs, held in memory (about 70 bytes a pair): p =
# 2,000 is 4 million pairs, a few hundred MB; p = 10**6 would need terabytes.
MAX_MODULUS = 2_000


class ModularAdditionTask(Task):
    """(a + b) mod p over residues 0..p-1, with a fixed seeded train/test split."""

    name: ClassVar[str] = "modular_addition"
    positional: ClassVar[str] = "learned"
    has_fixed_split: ClassVar[bool] = True

    @property
    def modulus(self) -> int:
        return self.p

    def __init__(self, p: int = 113, train_fraction: float = 0.3, split_seed: int = 0,
                 split_rounding: str = "round") -> None:
        if isinstance(p, bool) or not isinstance(p, int) or p < 2:
            raise UserError(f"p must be an integer modulus >= 2, got {p!r}")
        if p > MAX_MODULUS:
            raise UserError(f"p={number_for_message(p)}: the task holds all p^2 pairs in memory, so p is at most "
                            f"{MAX_MODULUS:,}; use a smaller modulus")
        if not isinstance(train_fraction, (int, float)) or not 0.0 < train_fraction <= 1.0:
            raise UserError(f"train_fraction must be in (0, 1], got {train_fraction!r}")
        if isinstance(split_seed, bool) or not isinstance(split_seed, int):
            raise UserError(f"split_seed must be an integer, got {split_seed!r}")
        if split_rounding not in SPLIT_ROUNDINGS:
            raise UserError(f"split_rounding must be one of {SPLIT_ROUNDINGS}, got {split_rounding!r}")
        self.p = p
        self.split_rounding = split_rounding
        self.train_fraction = float(train_fraction)
        self.split_seed = split_seed
        self.vocab = Vocab(symbols=(*(str(r) for r in range(p)), "="), separator=" ")

    @property
    def answer_token_ids(self) -> tuple[int, ...]:
        """The ids of the p residue tokens: Nanda et al.'s readout is a softmax over these."""
        return tuple(self.vocab.encode(" ".join(str(r) for r in range(self.p))))

    # -- the data set -----------------------------------------------------------------
    def all_pairs(self) -> list[tuple[int, int]]:
        """Every (a, b) with 0 <= a, b < p, in row-major order."""
        return [(a, b) for a in range(self.p) for b in range(self.p)]

    @property
    def n_train(self) -> int:
        exact = self.train_fraction * self.p**2
        return int(exact) if self.split_rounding == "floor" else round(exact)

    @cached_property
    def _split_pairs(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        pairs = self.all_pairs()
        random.Random(self.split_seed).shuffle(pairs)
        return pairs[: self.n_train], pairs[self.n_train :]

    def split(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(train pairs, test pairs): disjoint, covering all p^2 pairs, fixed by split_seed."""
        train, test = self._split_pairs
        return list(train), list(test)

    def _pairs_for(self, split: str) -> list[tuple[int, int]]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        train, test = self._split_pairs
        return {"train": train, "test": test, "all": train + test}[split]

    def full_split(self, split: str = "train") -> list[Example]:
        """The whole split as examples, in split order (for full-batch training)."""
        return [self.make(a, b) for a, b in self._pairs_for(split)]

    def sample(self, n: int, rng: random.Random, split: str = "train") -> list[Example]:
        """`n` examples drawn with replacement from one split ("train", "test" or "all")."""
        check_count(n)
        pairs = self._pairs_for(split)
        if n and not pairs:
            raise UserError(
                f"the {split!r} split is empty (train_fraction={self.train_fraction}); "
                "use a smaller train_fraction to hold out a test set"
            )
        return [self.make(*rng.choice(pairs)) for _ in range(n)]

    # -- formatting -------------------------------------------------------------------
    def make(self, *operands: Any) -> Example:
        if len(operands) != 2:
            raise UserError(f"modular addition takes exactly 2 operands, got {len(operands)}")
        a = check_operand(operands[0], "first operand")
        b = check_operand(operands[1], "second operand")
        if a >= self.p or b >= self.p:
            raise UserError(
                f"operands must be residues in 0..{self.p - 1}, got ({number_for_message(a)}, {number_for_message(b)})"
            )
        c = (a + b) % self.p
        return Example(prompt=f"{a} {b} =", target=str(c), operands=(a, b), answer=c)

    def parse(self, completion: str) -> int | None:
        """The residue named by a one-token completion, or None."""
        pieces = completion.split()
        if len(pieces) != 1 or not re.fullmatch(r"[0-9]+", pieces[0]):
            return None
        value = int(pieces[0])
        return value if value < self.p else None

    def to_human(self, completion: str) -> str:
        return " ".join(completion.split())

    def from_human(self, text: str) -> Example:
        m = re.fullmatch(r"\s*([0-9]+)\s*(?:\+|\s)\s*([0-9]+)\s*=?\s*", text)
        if m is None:
            reject_negative(text, self.name, "5+17")
            raise UserError(
                f"could not read {text!r} as a modular addition problem: expected 'a+b' "
                f"with residues 0..{self.p - 1}, e.g. '5+17'"
            )
        return self.make(decimal_value(m.group(1)), decimal_value(m.group(2)))

    def max_sequence_length(self) -> int:
        """Tokens a, b, '=', c and EOS."""
        return 5

    def config(self) -> dict[str, Any]:
        config = {"p": self.p, "train_fraction": self.train_fraction, "split_seed": self.split_seed}
        if self.split_rounding != "round":  # left out at its default: configs written before it read the same
            config["split_rounding"] = self.split_rounding
        return config
