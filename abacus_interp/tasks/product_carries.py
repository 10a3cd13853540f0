"""Carries of long multiplication, for interpretability: column sums, the carry into each
column and how far down the answer a carry's decision reaches.

Column i of a * b (digits LSD-first, a_i and b_j) sums s_i = sum_j a_(i-j) * b_j; the carry
into column i + 1 is c_(i+1) = (s_i + c_i) // 10 and answer digit i is (s_i + c_i) % 10.
Unlike addition's 0/1 carry, c can reach the sum of the multiplier's digits.

The *carry reach* of answer digit i is how many columns below it decide its carry: the least
d such that the carry into column i comes out the same whatever carry (in its feasible
range) enters column i - d. It is addition's carry distance generalised: 0 where no carry
can arrive, 1 where column i - 1 alone settles it, and one more for every column in between
whose sum passes a changed carry on. A model that moves carries one column per loop locks
digit i in at a loop that grows with its reach.
"""

from __future__ import annotations

from abacus_interp.tasks.base import to_lsd

# the largest carry a one-digit multiplier makes (a column sums at most 9 x 9 + 8 = 89)
ONE_DIGIT_MAX_CARRY = 8


def column_products(a: int, b: int, k: int) -> tuple[range, list[tuple[int, ...]]]:
    """For a * b with b of `k` digits: the answer columns that add all k partial products (i
    from k - 1 to len(a) - 1) and, per answer column (as many as the product's digits),
    a_(i-j) * b_j for every j < k, 0 where a_(i-j) does not exist. ValueError when b has not
    `k` digits."""
    a_digits = [int(ch) for ch in to_lsd(a)]
    b_digits = [int(ch) for ch in to_lsd(b)]
    if len(b_digits) != k:
        raise ValueError(f"{a}*{b}: a multiplier of {len(b_digits)} digits among products of k={k}")
    products = [tuple(a_digits[i - j] * y if 0 <= i - j < len(a_digits) else 0 for j, y in enumerate(b_digits))
                for i in range(len(to_lsd(a * b)))]
    return range(k - 1, len(a_digits)), products


def partial_product_name(j: int) -> str:
    """The partial product of multiplier digit b_j in answer column i, as findings and figures
    write it: "a_i * b_0", "a_(i-2) * b_2"."""
    return f"a_i * b_{j}" if j == 0 else f"a_(i-{j}) * b_{j}"


def column_sums(a: int, b: int) -> list[int]:
    """s_i for every column of a * b (as many as the product's digits, at least one)."""
    a_digits = [int(ch) for ch in to_lsd(a)]
    b_digits = [int(ch) for ch in to_lsd(b)]
    n_columns = len(to_lsd(a * b))
    sums = [0] * max(n_columns, len(a_digits) + len(b_digits) - 1)
    for i, x in enumerate(a_digits):
        for j, y in enumerate(b_digits):
            sums[i + j] += x * y
    return sums[:n_columns]


def carries_in(a: int, b: int) -> list[int]:
    """The carry into each answer column (0 into column 0): the carry out of the column below."""
    return [0] + [total // 10 for total in running_sums(a, b)[:-1]]


def large_carry_runs(a: int, b: int, large: int) -> list[int]:
    """Per answer column, how many columns in a row up to and including it take a carry of
    `large` or more: 0 where its own carry is smaller. A column at the end of a long run has a
    large carry resting on large carries below it, which a short product holds rarely."""
    runs, run = [], 0
    for carry in carries_in(a, b):
        run = run + 1 if carry >= large else 0
        runs.append(run)
    return runs


def running_sums(a: int, b: int) -> list[int]:
    """The running sum of every answer column, s_i + c_i: its digit is answer digit i and the
    rest is the carry out (Bai et al. 2025's running sum, which `train.running_sum_loss`
    teaches a linear readout of the state to give); `carries_in` reads its carries off it."""
    out, carry = [], 0
    for s in column_sums(a, b):
        out.append(s + carry)
        carry = (s + carry) // 10
    return out


def largest_carry(b: int) -> int:
    """The largest carry a multiplication by `b` can produce: the least fixed point of
    c = (9 * digit_sum(b) + c) // 10 reached from 0 (a column sum is at most 9 * digit_sum(b))."""
    bound = 9 * sum(int(ch) for ch in str(b))
    carry = 0
    while (bound + carry) // 10 != carry:
        carry = (bound + carry) // 10
    return carry


def carry_reach(a: int, b: int) -> list[int]:
    """Per answer digit (least significant first): its carry reach (see the module doc)."""
    sums = column_sums(a, b)
    feasible = range(largest_carry(b) + 1)
    reach = []
    for i in range(len(sums)):
        for d in range(i + 1):
            # the carry into column i for every carry entering column i - d
            outcomes = set()
            for carry in feasible:
                for s in sums[i - d : i]:
                    carry = (s + carry) // 10
                outcomes.add(carry)
            if len(outcomes) == 1 or d == i:  # column 0 has no carry in: settled at d = i
                reach.append(d if len(outcomes) == 1 else i)
                break
    return reach
