"""Keeps the demo-add preset honest: its recipe, shortened to 1,000 steps in one process, must
already add in distribution and past it.

The full preset (1,600 steps, two processes, ~55 s) reaches 100% at 5, 50 and 125 digits on
seeds 0 and 1 (its docstring has the figures); a 1,000-step run of the same recipe passes the
lower bar below, so a change that breaks the recipe (window, loops, lr, schedule) fails here
rather than in a newcomer's first report.
"""

from __future__ import annotations

import random

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.halting import generate_adaptive
from abacus_interp.training import apply_overrides, get_preset, train

pytestmark = pytest.mark.slow

SHORT = ["train.steps=1000", "train.processes=1", "train.eval_every=1000", "train.checkpoint_every=1000",
         "train.dense_checkpoints=1", "train.dense_until=1", "train.eval_problems=32"]


def test_short_demo_run_adds_and_extrapolates(tmp_path):
    cfg = apply_overrides(get_preset("demo-add"), SHORT)
    train(cfg, tmp_path / "run", progress=False)
    model = ckpt.load_model(tmp_path / "run")
    task = cfg.make_task()
    rng = random.Random(12345)
    for digits, bar in ((5, MIN_IN_DISTRIBUTION), (20, MIN_AT_4X)):
        problems = task.sample_cell(100, rng, digits, digits)
        decoded = generate_adaptive(model, [p.prompt for p in problems])
        exact = sum(task.check(p, c) for p, c in zip(problems, decoded.completions, strict=True)) / len(problems)
        assert exact >= bar, f"demo-add recipe at 1,000 steps: {exact:.0%} exact match at {digits} digits"


MIN_IN_DISTRIBUTION = 0.8  # measured: 96% (one thread, seed 0)
# measured: 75% where this test was written and 49% on a later 2-core machine, same code and seed
# (CPUs round floats differently and the 1,000-step run is midway through learning 20 digits); the
# bar catches a recipe that has stopped extrapolating, not the machine
MIN_AT_4X = 0.3


def test_the_shipped_demo_adder_carries_through_runs_of_identical_columns():
    """Issue 38: extrap-add got 0% on 5555555555+4444444445 (its carry wave stalls at the 7th
    column). checkpoints/demo-add, given the loops (max_loops 320), solves every run of
    identical columns x...x + (9-x)...(9-x)(10-x) (a carry through every column) and
    x...x + (9-x)...(9-x) (none) for x = 1..8, up to 100 digits."""
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "checkpoints" / "demo-add"
    if not (run / "config.json").exists():
        pytest.skip(f"{run} is not shipped (abacus-interp train --preset demo-add --out {run})")
    model, task = ckpt.load_model(run), ckpt.load_task(run)
    for n in (10, 100):
        problems = [task.make(int(str(x) * n), b) for x in range(1, 9)
                    for b in (10**n - int(str(x) * n), int(str(9 - x) * n))]
        decoded = generate_adaptive(model, [p.prompt for p in problems], max_new_tokens=n + 2)
        wrong = [p.operands for p, c in zip(problems, decoded.completions, strict=True) if not task.check(p, c)]
        assert not wrong, f"{len(wrong)} of {len(problems)} wrong at {n} digits, e.g. {wrong[0]}"
