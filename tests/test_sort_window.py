"""The shipped sorter whose digits meet only the digits near them (`checkpoints/extrap-sort-window`:
rotary="abacus_closers", digit_window=2; docs/runs/sorting.md) against extrap-sort-spare-ft2 on the
same held-out lists: length moves, the count pays."""

from __future__ import annotations

from pathlib import Path

from abacus_interp.checkpoints import load_model, load_task
from abacus_interp.evaluation.common import section_rng
from abacus_interp.evaluation.lists import list_row
from tests.test_choice import SHIPPED, SPARE_FT2_RUN, needs

WINDOW_RUN = SHIPPED.parent / "extrap-sort-window"


def exact_match(run: Path, label: str, numbers: tuple[int, int], digits: tuple[int, int], n: int = 200) -> float:
    """`run`'s exact match on the lists of the eval's row `label` (seed 0), that row alone."""
    task = load_task(run)
    examples = task.sample(n, section_rng(0, "comparisons rows", label), min_numbers=numbers[0],
                           max_numbers=numbers[1], min_digits=digits[0], max_digits=digits[1])
    return list_row(load_model(run), task, label, numbers, digits, examples, False).exact_match


@needs(WINDOW_RUN, SPARE_FT2_RUN)
def test_the_digit_window_sorts_longer_numbers_and_costs_the_count():
    """On 200 held-out lists per row, drawn as the eval draws its rows (seed 0): 2-5 numbers of 20
    digits 34% against 15%; 10 numbers of 1-5 digits 45% against 67% (at n=400: 34 / 13.75%, 46.75 /
    70.5%)."""
    runs = (WINDOW_RUN, SPARE_FT2_RUN)
    long_numbers = {run.name: exact_match(run, "20-digit numbers", (2, 5), (20, 20)) for run in runs}
    assert long_numbers["extrap-sort-window"] >= long_numbers["extrap-sort-spare-ft2"] + 0.15, long_numbers
    count = {run.name: exact_match(run, "10 numbers", (10, 10), (1, 5)) for run in runs}
    assert count["extrap-sort-window"] <= count["extrap-sort-spare-ft2"] - 0.15, count
