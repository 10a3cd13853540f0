"""checkpoints/extrap-mul-digits: extrap-mul trained from nothing with a readout that learns each
partial product's units and tens (train.partial_product_loss). Its config is the preset's, it
multiplies far better than extrap-mul at the same step on the same held-out problems, and its
state holds the products as digits where extrap-mul-ft16's holds the later ones as magnitudes."""

from __future__ import annotations

from pathlib import Path

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.training import RunConfig, get_preset

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
RUN = CHECKPOINTS / "extrap-mul-digits"
BASELINE = CHECKPOINTS / "extrap-mul"

pytestmark = pytest.mark.skipif(not (RUN / "config.json").exists() or not (BASELINE / "config.json").exists(),
                                reason="checkpoints/extrap-mul-digits and extrap-mul are not shipped in this checkout")


def step(run: Path, number: int) -> Path:
    return run / "checkpoints" / f"step_{number:07d}.safetensors"


def test_the_shipped_config_is_the_preset():
    """The preset matches the shipped config: extrap-mul with the readout and its loss, two
    processes, 12,000 steps (the run was trained to 9,000 and resumed to 12,000, which stretched
    its cosine; a fresh run of the preset decays over 12,000)."""
    saved = RunConfig.from_dict(ckpt.read_run_config(RUN))
    preset = get_preset("extrap-mul-digits")
    assert saved.model == preset.model and saved.train == preset.train
    assert saved.task_kwargs == preset.task_kwargs == get_preset("extrap-mul").task_kwargs
    assert saved.model.replace(partial_product_probe=None) == get_preset("extrap-mul").model


def test_the_digits_multiply_far_better_than_extrap_mul_at_the_same_step():
    """At step 9,000 of one schedule, batches and seed: on the eval's 400 problems of seed 1,
    5 x 2 99.2% against 26.8% and 5 x 3 47.8% against 1.2%. Here 48 problems per row (seed 0,
    adaptive loops): 100% against 29%, 48% against 0%."""
    from abacus_interp.evaluation.extrapolation import length_extrapolation

    rows = {}
    for name, run in (("digits", RUN), ("extrap-mul", BASELINE)):
        model, task = ckpt.load_model(step(run, 9000), device="cpu"), ckpt.load_task(run)
        report = length_extrapolation(model, task, [5], multipliers=[2, 3], n=48, seed=0)
        rows[name] = [row.exact_match for row in report.rows]
    (digits_x2, digits_x3), (plain_x2, plain_x3) = rows["digits"], rows["extrap-mul"]
    assert digits_x2 >= 0.9 and digits_x2 >= plain_x2 + 0.5, rows
    assert digits_x3 >= plain_x3 + 0.25, rows


def test_its_state_holds_the_later_products_as_digits():
    """The report's running-sum reading (uniform 5 x 3, 48 problems, classifiers fitted per loop on
    192 others): a_(i-2) * b_2's units are read as ten classes 72% of the time at step 9,000
    (extrap-mul-ft16: 33%), a_i * b_0's 99% (67%); the run's own readout gives the first two
    products' units 100% of the time after the last loop and a_(i-2) * b_2's 97%."""
    from analyses.multiplication.analysis import _running_sum
    from analyses.multiplication.config import MultiplicationConfig

    model = ckpt.load_model(step(RUN, 9000), device="cpu")
    reading = _running_sum(model, ckpt.load_task(RUN), 5, 3, MultiplicationConfig())
    units = [d.units[d.best_units_loop()] for d in reading.product_digits]
    assert units[0] >= 0.9 and units[2] >= 0.6, units
    assert all(max(d.units) >= 0.9 for d in reading.product_digits_trained[:2]), reading.product_digits_trained
