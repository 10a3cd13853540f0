"""Held-out problem sets, logged during training and reused by evaluation."""

from __future__ import annotations

import logging
import random

logger = logging.getLogger(__name__)

HELDOUT_SEED = 12345  # distinct from training seeds, which hash (seed, rank, step)


def heldout_sets(task, n: int, max_seq_len: int, seed: int = HELDOUT_SEED) -> dict[str, list]:
    """Named sets: the test split for modular tasks; for digit tasks the training lengths
    ("in_distribution") and lengths up to twice the longest trained ("2x_length"). A task
    with a sampled split draws "in_distribution" from its test split, never trained on."""
    rng = random.Random(seed)
    if task.has_fixed_split:
        return {"test": task.full_split("test")}
    sets = {"in_distribution": task.sample_held_out(n, rng)}
    if task.digit_range is not None:
        max_digits = task.digit_range[1]
        longer = 2 * max_digits
        if task.max_sequence_length(max_digits=longer) <= max_seq_len:
            sets["2x_length"] = task.sample(n, rng, min_digits=max_digits + 1, max_digits=longer)
        else:
            logger.info("skipping 2x-length held-out set: %d-digit problems exceed max_seq_len=%d", longer, max_seq_len)
    return sets
