"""Training compute of a run (a comparison cell), and its learning curve against that compute.

FLOPs come from `core.flops` (the one count the model card and the benchmarks print too),
with each query attending to n_ctx keys, the run's mean sequence length (real tokens per
training sequence), over the loops and readouts a step runs in expectation
(`core.flops.training_depth`), the backward through those `train.backprop_loops` keeps
(`core.flops.backward_depth`). The in-run evaluations (forward only) are not training compute
and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.config import ModelConfig
from ..core.flops import forward_flops_per_token, training_depth, training_flops_per_token


@dataclass(frozen=True)
class TrainingCost:
    """What a run costs to train, per token and per step (a comparison cell is one such run)."""

    params: int
    n_ctx: float  # mean tokens per training sequence, the attention's key count
    forward_flops_per_token: float  # one forward pass at the trained depth (n_loops), one readout
    layer_applications_per_step: float  # expected layer applications per token in a training step
    readouts_per_step: float  # expected unembeddings per token in a training step
    # the forward through every loop a step runs, plus 2x the forward FLOPs of the loops its
    # backward runs through (`core.flops.backward_depth`), per real token
    train_flops_per_token: float


@dataclass(frozen=True)
class CurvePoint:
    """One in-run evaluation of a cell on its held-out set, with the compute spent so far."""

    step: int
    tokens: int  # real tokens trained on so far
    train_flops: float  # tokens * train_flops_per_token
    elapsed_s: float  # wall seconds of training so far
    exact_match: float
    loss: float  # per answer token
    n: int  # held-out problems the point was scored on


def expected_depth(train: dict[str, Any], n_loops: int) -> tuple[Fraction, Fraction]:
    """(expected loops run, expected readouts) of one training step of a saved config's
    `train` section (`core.flops.training_depth`)."""
    return training_depth(train["progressive"], train.get("mix_depths"), n_loops)


def training_cost(config: dict[str, Any], params: int, n_ctx: float) -> TrainingCost:
    """FLOPs of a run from its saved config (config.json) and mean sequence length."""
    cfg = ModelConfig.from_dict(config["model"])
    loops, readouts = expected_depth(config["train"], cfg.n_loops)
    return TrainingCost(
        params=params,
        n_ctx=n_ctx,
        forward_flops_per_token=forward_flops_per_token(cfg, n_ctx),
        layer_applications_per_step=float(loops) * cfg.n_layers,
        readouts_per_step=float(readouts),
        train_flops_per_token=training_flops_per_token(cfg, n_ctx, config["train"]["progressive"],
                                                       config["train"].get("mix_depths"),
                                                       config["train"].get("backprop_loops")),
    )


def mean_context(config: dict[str, Any], rows: list[dict[str, Any]], fallback: int) -> float:
    """Mean real tokens per training sequence, from the last logged row: tokens are counted
    over every sequence of every step. `fallback` (the task's longest sequence) when the run
    logged nothing or trains on a full batch of unknown size."""
    batch = config["train"]["batch_size"]
    last = next((r for r in reversed(rows) if "tokens" in r and r["step"] > 0), None)
    if batch is None or last is None:
        return float(fallback)
    return last["tokens"] / (last["step"] * batch)


def heldout_key(rows: list[dict[str, Any]]) -> str | None:
    """The name of the held-out set the run evaluated on while training: "in_distribution"
    (generated tasks, `evaluation.heldout.heldout_sets`) or "test" (a fixed split)."""
    for name in ("in_distribution", "test"):
        if any(f"{name}_exact_match" in r for r in rows):
            return name
    return None


def learning_curve(rows: list[dict[str, Any]], compute: TrainingCost, n: int) -> tuple[CurvePoint, ...]:
    """The held-out exact match and loss of every in-run evaluation in metrics.jsonl rows,
    against training FLOPs and wall seconds."""
    key = heldout_key(rows)
    if key is None:
        return ()
    return tuple(
        CurvePoint(step=r["step"], tokens=r["tokens"], train_flops=r["tokens"] * compute.train_flops_per_token,
                   elapsed_s=r["elapsed_s"], exact_match=r[f"{key}_exact_match"], loss=r[f"{key}_loss"], n=n)
        for r in rows if f"{key}_exact_match" in r
    )
