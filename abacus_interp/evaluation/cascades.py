"""Addition problems with a planted longest carry cascade, for a balanced complexity set.

Under uniform sampling long carry cascades are rare (each extra link needs a digit pair
summing to exactly 9, probability 1/10), so accuracy "by carry complexity" measured on
uniform samples has almost no data where it matters. `sample_with_cascade` builds
problems whose longest cascade (`abacus_interp.tasks.carries.longest_cascade`) is exactly
the requested length, with every other digit as random as that constraint allows.

Terms, LSD-first digit index i (0 = units): digit i *generates* when a_i + b_i >= 10,
*propagates* when a_i + b_i == 9 (it passes an incoming carry on) and *kills* when
a_i + b_i <= 8. A cascade of length L is one generating digit k followed by L - 1
propagating digits, delivering a carry to digit k + L.
"""

from __future__ import annotations

import random

from abacus_interp.tasks.carries import longest_cascade

CASCADE_BUCKETS = ("0", "1", "2", "3", "4", "5+")


def cascade_bucket(length: int) -> str:
    """The bucket label of a longest-cascade length: 0..4, then "5+"."""
    return str(length) if length < 5 else "5+"


def _pairs(kind: str, leading: bool) -> list[tuple[int, int]]:
    """Digit pairs (x, y) of a kind ("gen", "nine", "kill"); leading digits are nonzero."""
    lo = 1 if leading else 0
    out = []
    for x in range(lo, 10):
        for y in range(lo, 10):
            s = x + y
            if (
                (kind == "gen" and s >= 10)
                or (kind == "nine" and s == 9)
                or (kind == "kill" and s <= 8)
            ):
                out.append((x, y))
    return out


def sample_with_cascade(length: int, n_digits: int, rng: random.Random) -> tuple[int, int]:
    """Operands (a, b), both with exactly `n_digits` digits, whose longest carry cascade is
    exactly `length` (0 = no carry at all).

    A cascade delivers its carry at most to the carry-out digit n_digits, so
    0 <= length <= n_digits. The planted cascade starts at a uniform digit; all other digits
    are drawn uniformly among the pairs that neither lengthen the planted cascade nor start a
    longer one. Only `rng` is used, so equal seeds give equal problems.
    """
    for name, v in (("length", length), ("n_digits", n_digits)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be an integer, got {v!r}")
    if n_digits < 1:
        raise ValueError(f"n_digits must be >= 1, got {n_digits}")
    if not 0 <= length <= n_digits:
        raise ValueError(
            f"a {n_digits}-digit addition can have a longest carry cascade of 0..{n_digits}, "
            f"got length={length}; use more digits for longer cascades"
        )
    start = rng.randint(0, n_digits - length) if length else -1
    a_digits, b_digits = [], []
    chain = 0  # length of the carry chain arriving at the current digit (0: no carry)
    for i in range(n_digits):
        leading = n_digits > 1 and i == n_digits - 1
        if length and i == start:
            kinds = ["gen"]
        elif length and start < i < start + length:
            kinds = ["nine"]
        else:
            kinds = ["kill"]
            # a 9-sum is harmless without an incoming carry; with one it extends the chain
            if chain == 0 or chain + 1 <= length:
                kinds.append("nine")
            if length >= 1:  # a new chain of length 1 never exceeds the planted one
                kinds.append("gen")
        pool = [p for k in kinds for p in _pairs(k, leading)]
        x, y = rng.choice(pool)
        a_digits.append(x)
        b_digits.append(y)
        s = x + y + (1 if chain else 0)
        if x + y >= 10:
            chain = 1
        elif x + y == 9 and chain:
            chain += 1
        else:
            chain = 0
        assert (s >= 10) == bool(chain)
    a = int("".join(map(str, reversed(a_digits))))
    b = int("".join(map(str, reversed(b_digits))))
    # Exactness is the whole point of the generator; a bug here would bias every bucket.
    got = longest_cascade(a, b)
    if got != length:  # pragma: no cover - guarded by tests over many seeds
        raise AssertionError(f"planted cascade {length} but {a}+{b} has {got}")
    return a, b
