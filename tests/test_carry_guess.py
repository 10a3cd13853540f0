"""analyses.multiplication.waves: pairs of products that differ in a long run of digits, read
loop by loop. On the shipped N x 3 run, in most pairs one product locks its run in at once and
the other waits for a wave from the bottom columns, and which one waits varies from pair to pair."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.tasks import MultiplicationTask
from abacus_interp.tasks.product_carries import carries_in
from analyses.multiplication.waves import CarryGuess, PairWave, carry_guess, delayed_pair

BEST = Path(__file__).resolve().parents[1] / "checkpoints" / "extrap-mul-digits-ft4"


@pytest.mark.parametrize("digits, k", [(5, 1), (12, 2), (20, 3)])
def test_a_delayed_pair_differs_in_a_run_decided_by_the_bottom_carry(digits, k):
    task = MultiplicationTask(max_digits=5, max_multiplier_digits=3, answer_format="slots")
    a, b = delayed_pair(task, digits, k, random.Random(digits))
    assert len(str(a)) == digits and len(str(b)) == k
    clean, nines = str((a + 1) * b)[::-1], str(a * b)[::-1]  # units first, as the answer
    differ = [d for d, (x, y) in enumerate(zip(clean, nines, strict=True)) if x != y]
    assert len(differ) >= digits - 1 and differ == list(range(differ[0], differ[-1] + 1))
    # above the k columns whose sums differ, every carry into the run differs by one: the one
    # extra carry that comes up from the bottom
    run = range(k, differ[-1] + 1)
    assert [carries_in(a + 1, b)[i] - carries_in(a, b)[i] for i in run] == [1] * len(run)


def test_slopes_are_loops_per_column_and_the_waiting_product_is_the_steeper():
    wave = PairWave(multiplicand=0, multiplier=1, digits=(2, 3, 4, 5), lock_in=((4, 4, 5, 4), (3, 5, 7, 9)))
    assert wave.slopes() == pytest.approx((0.1, 2.0))
    unlocked = PairWave(multiplicand=0, multiplier=1, digits=(2, 3, 4), lock_in=((1, 2, 3), (3, None, 5)))
    both = PairWave(multiplicand=0, multiplier=1, digits=(2, 3), lock_in=((4, 6), (5, 7)))
    guess = CarryGuess(label="planted", horizon=10, pairs=(wave, unlocked, both))
    # the pair with a digit never locked is left out
    assert guess.fitted() == [pytest.approx((2.0, 0.1)), pytest.approx((2.0, 2.0))]
    assert guess.at_once() == 1 and guess.waits() == (1, 1)


@pytest.mark.skipif(not (BEST / "config.json").exists(), reason="checkpoints/extrap-mul-digits-ft4 is not shipped")
def test_one_product_of_most_pairs_locks_in_at_once_and_the_other_waits_for_the_carry():
    """docs/runs/multiplication.md: 48 pairs at 20 x 3 digits, 36 right throughout; in 25 of them
    one product locks its run in at once (under 0.5 loops per column), in 7 both wait; the steeper
    product's median is 1.76 loops per column, its twin's 0.26; the 9s are the steeper in 23, the
    0s in 13. Here 16 pairs at 12 x 3: 15 right throughout, 11 at once, 1.43 against 0.26, 6 and 9."""
    model, task = ckpt.load_model(BEST, max_loops=128), ckpt.load_task(BEST)
    guess = carry_guess(model, task, 12, 3, n=16)
    waiting, twin = guess.median_slopes()
    assert len(guess.fitted()) >= 12 and waiting >= 1.0 and twin <= 0.5, guess.median_slopes()
    assert guess.at_once() >= 0.6 * len(guess.fitted()), guess.at_once()
    assert min(guess.waits()) >= 3, guess.waits()
