"""checkpoints/extrap-mul-ft: extrap-mul's shipped weights, warm-started (train.init_from) and
trained 5,000 steps more on a fresh warm-up and cosine. Its step 0 is the source run's last
checkpoint, and it multiplies by two digits better than the source on the same held-out
problems."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.config import ModelConfig

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
WARM, SOURCE = CHECKPOINTS / "extrap-mul-ft", CHECKPOINTS / "extrap-mul"

pytestmark = pytest.mark.skipif(not (WARM / "config.json").exists() or not (SOURCE / "config.json").exists(),
                                reason="checkpoints/extrap-mul-ft and extrap-mul are not shipped in this checkout")


def test_its_step_0_is_the_source_runs_last_checkpoint():
    config = ckpt.read_run_config(WARM)
    last = ckpt.list_checkpoints(SOURCE)[-1][1]
    assert (CHECKPOINTS.parent / config["train"]["init_from"]).resolve() == last.resolve()
    start, source = ckpt.load_tensors(ckpt.step_path(WARM, 0)), ckpt.load_tensors(last)
    assert start.keys() == source.keys() and all(torch.equal(start[k], v) for k, v in source.items())
    same_model = ModelConfig.from_dict(config["model"]) == ModelConfig.from_dict(ckpt.read_run_config(SOURCE)["model"])
    assert same_model and config["train"]["steps"] == 5000


def test_it_multiplies_by_two_digits_better_than_its_source_in_and_beyond_the_trained_length():
    """Held-out uniform 5 x 2 and 20 x 2-digit products, the eval's problems (seed 0), adaptive
    loops: the README's n=100 rows are 96% / 74% against 78% / 40%; here n=48 per row."""
    from abacus_interp.evaluation.extrapolation import length_extrapolation

    def exact(run):
        model, task = ckpt.load_model(run, device="cpu"), ckpt.load_task(run)
        rows = length_extrapolation(model, task, [5, 20], multipliers=[2], n=48, seed=0).rows
        return [row.exact_match for row in rows]

    warm, source = exact(WARM), exact(SOURCE)
    assert warm[0] > source[0] and warm[1] > source[1] + 0.1, (warm, source)
