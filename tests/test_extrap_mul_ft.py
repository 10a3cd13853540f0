"""The warm-started continuations of extrap-mul: checkpoints/extrap-mul-ft starts from extrap-mul's
last checkpoint and checkpoints/extrap-mul-ft2 from extrap-mul-ft's (train.init_from), each
trained 5,000 steps more on a fresh warm-up and cosine. Each one's step 0 is its source's last
checkpoint, and each multiplies by two digits better than the run it started from on the same
held-out problems."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.config import ModelConfig

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
# (the continuation, the run it started from)
CHAIN = [("extrap-mul-ft", "extrap-mul"), ("extrap-mul-ft2", "extrap-mul-ft")]


def shipped(*runs: str) -> bool:
    return all((CHECKPOINTS / run / "config.json").exists() for run in runs)


@pytest.mark.parametrize("warm, source", CHAIN)
def test_its_step_0_is_the_source_runs_last_checkpoint(warm, source):
    if not shipped(warm, source):
        pytest.skip(f"checkpoints/{warm} and {source} are not shipped in this checkout")
    config = ckpt.read_run_config(CHECKPOINTS / warm)
    last = ckpt.list_checkpoints(CHECKPOINTS / source)[-1][1]
    assert (CHECKPOINTS.parent / config["train"]["init_from"]).resolve() == last.resolve()
    start, before = ckpt.load_tensors(ckpt.step_path(CHECKPOINTS / warm, 0)), ckpt.load_tensors(last)
    assert start.keys() == before.keys() and all(torch.equal(start[k], v) for k, v in before.items())
    source_model = ckpt.read_run_config(CHECKPOINTS / source)["model"]
    assert ModelConfig.from_dict(config["model"]) == ModelConfig.from_dict(source_model)
    assert config["train"]["steps"] == 5000


def two_digit_exact_match(run: str, lengths: list[int]) -> list[float]:
    """Held-out uniform N x 2-digit products, the eval's problems (seed 0), adaptive loops, n=48."""
    from abacus_interp.evaluation.extrapolation import length_extrapolation

    model, task = ckpt.load_model(CHECKPOINTS / run, device="cpu"), ckpt.load_task(CHECKPOINTS / run)
    rows = length_extrapolation(model, task, lengths, multipliers=[2], n=48, seed=0).rows
    return [row.exact_match for row in rows]


def test_the_first_continuation_beats_extrap_mul_in_and_beyond_the_trained_length():
    """README's n=100 rows at 5 / 20 digits: 96% / 74% against 78% / 40%."""
    if not shipped("extrap-mul-ft", "extrap-mul"):
        pytest.skip("checkpoints/extrap-mul-ft and extrap-mul are not shipped in this checkout")
    warm, source = two_digit_exact_match("extrap-mul-ft", [5, 20]), two_digit_exact_match("extrap-mul", [5, 20])
    assert warm[0] > source[0] and warm[1] > source[1] + 0.1, (warm, source)


def test_the_second_continuation_holds_and_gains_at_ten_times_the_trained_length():
    """The second cycle gains least where the first gained most: README's n=100 rows at 5 / 20 /
    50 digits are 98 / 78 / 72% against 96 / 74 / 62%, so it must not lose in distribution and
    must gain at 50 digits."""
    if not shipped("extrap-mul-ft2", "extrap-mul-ft"):
        pytest.skip("checkpoints/extrap-mul-ft2 and extrap-mul-ft are not shipped in this checkout")
    warm, source = two_digit_exact_match("extrap-mul-ft2", [5, 50]), two_digit_exact_match("extrap-mul-ft", [5, 50])
    assert warm[0] >= source[0] and warm[1] > source[1], (warm, source)
