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

from abacus_interp.tasks.base import check_operand


def _digit_pairs(a: int, b: int) -> list[tuple[int, int]]:
    """(a_i, b_i) for every answer digit i, zero-padded past each operand's length."""
    check_operand(a, "a")
    check_operand(b, "b")
    n = len(str(a + b))
    return [((a // 10**i) % 10, (b // 10**i) % 10) for i in range(n)]


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


def longest_cascade(a: int, b: int) -> int:
    """The longest carry chain in the problem (a complexity score; callers bucket 5+)."""
    return max(carry_chain_lengths(a, b), default=0)


def sum_is_nine(a: int, b: int) -> list[bool]:
    """Per answer digit, whether a_i + b_i == 9 (a digit that would pass a carry on)."""
    return [x + y == 9 for x, y in _digit_pairs(a, b)]


def generates_carry(a: int, b: int) -> list[bool]:
    """Per answer digit, whether a_i + b_i >= 10 (a digit that starts a carry chain)."""
    return [x + y >= 10 for x, y in _digit_pairs(a, b)]
