"""Carry labels for addition, per answer digit, for probing and attribution.

Indices are LSD-first positions in the answer `a + b` (index 0 = units digit), so label i
lines up with the i-th target token. Labels cover every answer digit, including the final
carry-out digit when the sum is one digit longer than both operands.

A *carry chain* arriving at digit i starts at the digit k < i where a_k + b_k >= 10
generated a carry, and passes through the digits k+1..i-1 where a + b == 9 (those only
propagate an incoming carry). Its length is i - k. Long chains are the hard cases for a
model: the carry into the last digit depends on many earlier digits.
"""

from __future__ import annotations

import random

from abacus_interp.tasks.base import (
    check_operand,
    decimal_value,
    digit_count,
    number_for_message,
    to_lsd,
)


def _digit_pairs(a: int, b: int) -> list[tuple[int, int]]:
    """(a_i, b_i) for every answer digit i, zero-padded past each operand's length."""
    check_operand(a, "a")
    check_operand(b, "b")
    # digit strings rather than a // 10**i per column, which is quadratic in a long number
    n = digit_count(a + b)
    a_digits, b_digits = to_lsd(a).ljust(n, "0"), to_lsd(b).ljust(n, "0")
    return [(int(x), int(y)) for x, y in zip(a_digits, b_digits, strict=True)]


def carry_in(a: int, b: int) -> list[int]:
    """Carry (0 or 1) into each answer digit: 999 + 1 -> [0, 1, 1, 1]."""
    carries, c = [], 0
    for x, y in _digit_pairs(a, b):
        carries.append(c)
        c = int(x + y + c >= 10)
    return carries


def carry_chain_lengths(a: int, b: int) -> list[int]:
    """Length of the carry chain arriving at each answer digit (0 when no carry comes in).

    1 means the carry was generated at the previous digit (a + b >= 10 there); k means it
    was generated k digits earlier and propagated through k - 1 digits with a + b == 9.
    999 + 1 -> [0, 1, 2, 3]; 55 + 55 -> [0, 1, 1].
    """
    pairs = _digit_pairs(a, b)
    cin = carry_in(a, b)
    lengths = [0] * len(pairs)
    for i in range(1, len(pairs)):
        if not cin[i]:
            continue
        x, y = pairs[i - 1]
        # A carry out of digit i-1 was either generated there or propagated through it.
        lengths[i] = 1 if x + y >= 10 else lengths[i - 1] + 1
    return lengths


def decision_distance(a: int, b: int) -> list[int]:
    """Per answer digit, how many columns below it decide its carry: 1 + the number of
    columns directly below whose digits sum to 9 (they pass on whatever reaches them), up to
    the first column that generates (sum >= 10) or kills (sum <= 8) a carry; counted to the
    units column when every column below sums to 9; 0 for the units digit.

    A model that moves carry information one column per step needs this many steps before
    the digit can be known, whether a carry arrives or not: 999 + 1 -> [0, 1, 2, 3];
    909 + 91 -> [0, 1, 2, 3] (the chain of nines above the generating units column);
    450 + 540 -> [0, 1, 2] (no carry at all, but the 9-sums above the units column wait for it)."""
    pairs = _digit_pairs(a, b)
    out = [0] * len(pairs)
    for i in range(1, len(pairs)):
        x, y = pairs[i - 1]
        out[i] = out[i - 1] + 1 if x + y == 9 else 1
    return out


def longest_cascade(a: int, b: int) -> int:
    """The longest carry chain in the problem (a complexity score; callers bucket 5+)."""
    return max(carry_chain_lengths(a, b), default=0)


def sum_is_nine(a: int, b: int) -> list[bool]:
    """Per answer digit, whether a_i + b_i == 9 (a digit that would pass a carry on)."""
    return [x + y == 9 for x, y in _digit_pairs(a, b)]


def generates_carry(a: int, b: int) -> list[bool]:
    """Per answer digit, whether a_i + b_i >= 10 (a digit that starts a carry chain)."""
    return [x + y >= 10 for x, y in _digit_pairs(a, b)]


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
    a = decimal_value("".join(map(str, reversed(a_digits))))
    b = decimal_value("".join(map(str, reversed(b_digits))))
    # Exactness is the whole point of the generator; a bug here would bias every bucket.
    got = longest_cascade(a, b)
    if got != length:  # pragma: no cover - guarded by tests over many seeds
        raise AssertionError(f"planted cascade {length} but {number_for_message(a)}+{number_for_message(b)} has {got}")
    return a, b
