"""The expressions recipe: + - * with parentheses."""

from __future__ import annotations

from ..config import RunConfig, TrainConfig
from .recipe import recipe


def expressions() -> RunConfig:
    """Arithmetic expressions from the ReTran reference's grammar (Miller et al., ACL 2025):
    + - * with parentheses and negative numbers, problems of 8-30 characters, answers of at
    most 5, held-out problems in a hashed test split that training never draws. The model is
    the comparison's smallest looped cell (d_model 32, one layer looped 3 times);
    `abacus-interp compare --spec expressions` trains every family and size from this recipe
    by `--set` edits (abacus_lab/experiments/compare.py).

    2,000 steps of 256 problems (512k problems, a fifth of one epoch of the reference's 2.6M)
    fit a CPU core in about 15 minutes at the smallest size; the reference trains 10 epochs
    with LAMB at batch 2,048, a GPU recipe for the M and L sizes. Abacus offset 0: numbers in
    these problems have at most 5 digits, and problem length, not digit count, is what the
    evaluation stretches. max_seq_len 48 fits the 40-character out-of-distribution problems.
    """
    return recipe(
        "expressions",
        "expressions",
        {"grammar": "reference", "min_len": 8, "max_len": 30, "max_answer_len": 5},
        dict(d_model=32, n_heads=4, n_layers=1, n_loops=3, max_loops=12, max_seq_len=48, abacus_max_offset=0),
        TrainConfig(
            steps=2000, batch_size=256, lr=3e-3, weight_decay=0.01, warmup_steps=100, grad_clip=1.0, processes=2,
            eval_every=250, eval_problems=256, checkpoint_every=1000, dense_checkpoints=2, dense_until=100,
        ),
    )
