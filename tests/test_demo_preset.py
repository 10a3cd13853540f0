"""Keeps the demo-add preset honest: its recipe, shortened to 600 steps, must already add.

The full preset (1,500 steps) reaches >= 99% on seeds 0, 1 and 2 (its docstring has the
figures); a 600-step run of the same recipe passes the lower bar below, so a change that
breaks the recipe (offsets, lr, shape) fails here rather than in a newcomer's first report.
"""

from __future__ import annotations

import random

import pytest

from abacus_interp import checkpoints as ckpt
from abacus_interp.core.scoring import score_examples
from abacus_interp.training import apply_overrides, get_preset, train

pytestmark = pytest.mark.slow

SHORT = ["train.steps=600", "train.eval_every=600", "train.checkpoint_every=600", "train.dense_checkpoints=1",
         "train.dense_until=1", "train.eval_problems=64"]


def test_short_demo_run_adds(tmp_path):
    cfg = apply_overrides(get_preset("demo-add"), SHORT)
    train(cfg, tmp_path / "run", progress=False)
    model = ckpt.load_model(tmp_path / "run")
    task = cfg.make_task()
    heldout = task.sample(300, random.Random(12345))
    exact = score_examples(model, heldout).exact_match
    assert exact >= 0.6, f"demo-add recipe at 600 steps: {exact:.1%} exact match on held-out problems"
