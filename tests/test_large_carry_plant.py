"""The multiplication task's plants of large carries: `large_digit_fraction` (every digit
large), `large_carry_fraction` (uniform problems given a carry of 10 or more) and
`large_carry_run` (given such carries into several columns in a row). Each keeps the plain
stream draw for draw when off, round-trips through the task's config, and refuses what it
cannot plant with a message that says what to change."""

from __future__ import annotations

import random

import pytest

from abacus_interp.errors import UserError
from abacus_interp.tasks import MultiplicationTask, get_task
from abacus_interp.tasks.multiplication import longest_large_carry_run
from abacus_interp.tasks.product_carries import carries_in


def slots_task(**plant) -> MultiplicationTask:
    """extrap-mul's task (<= 5 digits times 1-3 digits, answer slots), with a plant if given."""
    return MultiplicationTask(max_digits=5, max_multiplier_digits=3, answer_format="slots", **plant)


@pytest.mark.parametrize("plant", ["large_digit_fraction", "large_carry_fraction"])
def test_a_plant_at_zero_is_the_plain_stream(plant):
    """No plant: the plain stream draw for draw, and the config as older runs wrote it."""
    unplanted = slots_task(**{plant: 0.0})
    assert unplanted.sample(50, random.Random(3)) == slots_task().sample(50, random.Random(3))
    assert plant not in unplanted.config()


def test_large_digit_plant_makes_the_carries_uniform_digits_rarely_do():
    plain, planted = slots_task(), slots_task(large_digit_fraction=0.5)
    examples = planted.sample(2000, random.Random(0))
    large = [e for e in examples if set("".join(map(str, e.operands))) <= set("56789")]
    assert 0.45 < len(large) / len(examples) < 0.6  # the plant plus the odd uniform problem
    assert all(e.answer == e.operands[0] * e.operands[1] for e in examples)
    assert {len(str(e.operands[1])) for e in large} == {1, 2, 3}  # the multiplier keeps its range
    def share_of_big_carries(exs):
        carries = [c for e in exs if len(str(e.operands[1])) == 2 for c in carries_in(*e.operands)]
        return sum(c > 8 for c in carries) / len(carries)
    assert share_of_big_carries(large) > 5 * share_of_big_carries(plain.sample(2000, random.Random(0)))
    rebuilt = get_task("multiplication", **planted.config())
    assert rebuilt.large_digit_fraction == 0.5
    assert rebuilt.sample(20, random.Random(1)) == planted.sample(20, random.Random(1))
    with pytest.raises(UserError, match="large_digit_fraction"):
        MultiplicationTask(large_digit_fraction=1.5)




def test_large_carry_plant_conditions_uniform_problems_on_a_two_digit_carry():
    plain, planted = slots_task(), slots_task(large_carry_fraction=0.5)

    def share_carrying_ten(exs):
        return sum(max(carries_in(*e.operands)) >= 10 for e in exs) / len(exs)
    examples = planted.sample(2000, random.Random(0))
    assert all(e.answer == e.operands[0] * e.operands[1] for e in examples)
    # half planted, plus the plain half's own share (about 9%)
    assert 0.5 < share_carrying_ten(examples) < 0.6
    assert 0.06 < share_carrying_ten(plain.sample(2000, random.Random(0))) < 0.12
    # every planted problem carries 10 somewhere, and unlike the large-digit plant (5..9 only)
    # its digits are uniform given that: every digit occurs, the small ones less often
    only = slots_task(large_carry_fraction=1.0)
    always = only.sample(1000, random.Random(1))
    assert min(max(carries_in(*e.operands)) for e in always) >= 10
    digits = "".join(str(e.operands[0]) + str(e.operands[1]) for e in always)
    shares = [digits.count(str(d)) / len(digits) for d in range(10)]
    assert 0.01 < shares[0] < 0.06 and 0.15 < shares[9] < 0.25 and sum(shares[:5]) > 0.2
    # the same conditional law as redrawing whole plain problems until one carries 10
    rng = random.Random(4)
    redrawn = []
    while len(redrawn) < 1000:
        example = plain.sample(1, rng)[0]
        if max(carries_in(*example.operands)) >= 10:
            redrawn.append(example)
    def mean_length(exs):
        return sum(len(str(e.operands[0])) + len(str(e.operands[1])) for e in exs) / len(exs)
    assert abs(mean_length(always) - mean_length(redrawn)) < 0.15
    # a one-digit range cannot carry 10: those draws are the plain ones, draw for draw
    assert only.draw_large_carry(random.Random(2), (1, 1), (1, 3)) == plain.draw_problem(random.Random(2), (1, 1), (1, 3))
    rebuilt = get_task("multiplication", **planted.config())
    assert rebuilt.large_carry_fraction == 0.5
    assert rebuilt.sample(20, random.Random(1)) == planted.sample(20, random.Random(1))


def test_large_carry_plant_refuses_what_it_cannot_plant():
    for bad in (-0.1, 1.5, True, "0.3"):
        with pytest.raises(UserError, match="large_carry_fraction must be a number"):
            MultiplicationTask(large_carry_fraction=bad)
    with pytest.raises(UserError, match="2 or more digits"):
        MultiplicationTask(max_digits=5, max_multiplier_digits=1, large_carry_fraction=0.3)
    with pytest.raises(UserError, match="set one of them"):
        MultiplicationTask(max_digits=5, large_carry_fraction=0.3, large_digit_fraction=0.3)
    stubborn = MultiplicationTask(max_digits=5, max_multiplier_digits=3, large_carry_fraction=1.0)
    stubborn.MAX_REDRAWS = 0
    with pytest.raises(UserError, match="carried 10 or more into 1 column\(s\) in a row in 0 draws"):
        stubborn.sample(1, random.Random(0))

def test_longest_large_carry_run_counts_columns_in_a_row():
    assert carries_in(99999, 999) == [0, 8, 17, 26, 26, 26, 18, 9]
    assert longest_large_carry_run(99999, 999, 10) == 5
    assert longest_large_carry_run(99999, 999, 20) == 3
    assert longest_large_carry_run(12, 3, 10) == 0
    # a run broken by a carry of 9 counts its longer side: 17, 17, 17, then 9, then 17, 17, 17
    assert carries_in(9909099, 999) == [0, 8, 17, 17, 17, 9, 17, 17, 17, 9]
    assert longest_large_carry_run(9909099, 999, 10) == 3
    assert longest_large_carry_run(9999909, 999, 10) == 6


def test_large_carry_run_plants_runs_uniform_problems_rarely_hold():
    plain = slots_task(large_carry_fraction=0.5)
    runs = slots_task(large_carry_fraction=0.5, large_carry_run=4)
    def share_with_run(exs, n=4):
        return sum(longest_large_carry_run(*e.operands, 10) >= n for e in exs) / len(exs)
    examples = runs.sample(1000, random.Random(0))
    assert all(e.answer == e.operands[0] * e.operands[1] for e in examples)
    # half planted with a run of 4, against about 3% of the one-column plant's mix
    assert 0.45 < share_with_run(examples) < 0.6
    assert share_with_run(plain.sample(1000, random.Random(0))) < 0.06
    # every planted problem is long enough to hold the run: i + j - 2 >= 4 columns
    planted = [e for e in examples if longest_large_carry_run(*e.operands, 10) >= 4]
    assert min(len(str(a)) + len(str(b)) for a, b in (e.operands for e in planted)) >= 6
    # a run of 1 is the one-column plant, draw for draw, and older configs stay as they were
    assert slots_task(large_carry_fraction=0.5, large_carry_run=1).sample(50, random.Random(3)) == \
        plain.sample(50, random.Random(3))
    assert "large_carry_run" not in plain.config()
    rebuilt = get_task("multiplication", **runs.config())
    assert rebuilt.large_carry_run == 4
    assert rebuilt.sample(20, random.Random(1)) == runs.sample(20, random.Random(1))


def test_large_carry_run_refuses_what_it_cannot_plant():
    for bad in (0, -2, 2.5, True, "4"):
        with pytest.raises(UserError, match="whole number of columns"):
            slots_task(large_carry_fraction=0.5, large_carry_run=bad)
    with pytest.raises(UserError, match="set large_carry_fraction as well"):
        slots_task(large_carry_run=3)
    # 5 x 3 digits: carries of 10 can enter columns 2..7, six in a row at most
    assert slots_task(large_carry_fraction=0.5, large_carry_run=6).large_carry_run == 6
    with pytest.raises(UserError, match="at most 6 columns in a row"):
        slots_task(large_carry_fraction=0.5, large_carry_run=7)
