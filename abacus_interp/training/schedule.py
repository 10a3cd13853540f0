"""Learning-rate schedule and checkpoint schedule, both pure functions of the step."""

from __future__ import annotations

import math

import numpy as np

from .config import TrainConfig


def lr_multiplier(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to 1, then cosine / linear decay to `min_lr_ratio`, or constant. Steps
    count from 1; with `warmup_starts_at_zero` the schedule is read one step earlier, so
    step 1 has multiplier 0."""
    if cfg.warmup_starts_at_zero:
        step -= 1
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return step / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    progress = min(max(progress, 0.0), 1.0)
    floor = cfg.min_lr_ratio
    if cfg.schedule == "cosine":
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return 1 - (1 - floor) * progress


def checkpoint_steps(cfg: TrainConfig) -> list[int]:
    """Step 0 (the initialisation), log-spaced steps up to `dense_until`, then every
    `checkpoint_every` steps, and the last step. Evolution analyses need the early phase,
    where the model changes fastest, resolved finely."""
    dense_until = min(cfg.dense_until or cfg.checkpoint_every, cfg.steps)
    early = np.geomspace(1, dense_until, max(cfg.dense_checkpoints, 1))
    steps = {0, cfg.steps, *(int(round(s)) for s in early)}
    steps.update(range(cfg.checkpoint_every, cfg.steps + 1, cfg.checkpoint_every))
    return sorted(steps)
