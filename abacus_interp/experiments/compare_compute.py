"""Training compute of a comparison cell, and its learning curve against that compute.

FLOPs count the matrix multiplications only (2 FLOPs per multiply-add); LayerNorms,
softmax, activations, the LSTM's gate nonlinearities and the step penalty's norms are
elementwise and left out (a few percent at these widths). Per token, forward:

* an attention layer: the Q, K, V and O projections, 2 * 4 * d_model * (n_heads * d_head),
  and the scores and their weighted sum, 2 * 2 * n_ctx * (n_heads * d_head), every query
  against all n_ctx keys of its sequence (a masked dense product computes the masked half
  too); n_ctx is the run's mean sequence length (real tokens per training sequence);
* an MLP: 2 * 2 * d_model * d_mlp (2 * 3 * ... gated: ModelConfig.mlp_matrices);
* an LSTM layer (lstm family, and ReTran's in place of the MLP): x W_ih and h W_hh,
  2 * 2 * d_model * 4 * d_model;
* a readout (unembedding): 2 * d_model * d_vocab.

Training runs forward and backward: 3x the forward FLOPs (the backward pass is two matmuls
per forward matmul, for the inputs' and the weights' gradients). What one step runs is
read from `training.loop.training_losses`:

* progressive="none": n_loops applications of the block, one readout;
* progressive="mix": a depth r uniform in train.mix_depths; one pass runs to max(n_loops, r)
  loops (the step penalty's state one loop earlier is read on the way, and a start from
  noise, init_state_noise, runs the same loops from another state), and the loss reads out
  at n_loops and, unless r == n_loops, at r too: the expected loops are E[max(n_loops, r)],
  the expected readouts 1 + P(r != n_loops);
* progressive="mcleish": the full pass of n_loops, plus n_progressive more loops from the
  (detached) state after n_prefix loops, with n_prefix uniform in 0..n_loops-1 and
  n_progressive uniform in 1..n_loops-n_prefix; two readouts.

The in-run evaluations (forward only) are not training compute and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.config import ModelConfig

BACKWARD_FACTOR = 3  # forward + backward = 3x forward: the backward pass is two matmuls per forward one


@dataclass(frozen=True)
class CellCompute:
    """What a cell costs to train, per token and per step."""

    params: int
    n_ctx: float  # mean tokens per training sequence, the attention's key count
    forward_flops_per_token: float  # one forward pass at the trained depth (n_loops), one readout
    layer_applications_per_step: float  # expected layer applications per token in a training step
    readouts_per_step: float  # expected unembeddings per token in a training step
    train_flops_per_token: float  # 3x the forward FLOPs of what a step runs, per real token


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


def layer_flops(cfg: ModelConfig, n_ctx: float) -> float:
    """Forward FLOPs per token of one application of one layer of the model's family."""
    d, inner = cfg.d_model, cfg.n_heads * cfg.d_head
    attention = 2 * 4 * d * inner + 2 * 2 * n_ctx * inner
    mlp = 2 * cfg.mlp_matrices * d * cfg.d_mlp
    lstm = 2 * 2 * d * 4 * d
    return {"looped": attention + mlp, "lstm": lstm, "retran": attention + lstm}[cfg.family]


def expected_depth(train: dict[str, Any], n_loops: int) -> tuple[Fraction, Fraction]:
    """(expected loops run, expected readouts) of one training step; exact fractions."""
    progressive = train["progressive"]
    if progressive == "mix":
        lo, hi = train["mix_depths"] or (1, n_loops)
        depths = range(lo, hi + 1)
        loops = Fraction(sum(max(n_loops, r) for r in depths), len(depths))
        readouts = 1 + Fraction(sum(r != n_loops for r in depths), len(depths))
        return loops, readouts
    if progressive == "mcleish":
        # E over n_prefix of E[n_progressive] = (n_loops - n_prefix + 1) / 2
        extra = Fraction(sum(n_loops - p + 1 for p in range(n_loops)), 2 * n_loops)
        return n_loops + extra, Fraction(2)
    return Fraction(n_loops), Fraction(1)


def cell_compute(config: dict[str, Any], params: int, n_ctx: float) -> CellCompute:
    """FLOPs of a run from its saved config (config.json) and mean sequence length."""
    cfg = ModelConfig.from_dict(config["model"])
    per_layer = layer_flops(cfg, n_ctx)
    readout = 2 * cfg.d_model * cfg.d_vocab
    loops, readouts = expected_depth(config["train"], cfg.n_loops)
    applications = float(loops) * cfg.n_layers
    return CellCompute(
        params=params,
        n_ctx=n_ctx,
        forward_flops_per_token=cfg.n_loops * cfg.n_layers * per_layer + readout,
        layer_applications_per_step=applications,
        readouts_per_step=float(readouts),
        train_flops_per_token=BACKWARD_FACTOR * (applications * per_layer + float(readouts) * readout),
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


def learning_curve(rows: list[dict[str, Any]], compute: CellCompute, n: int) -> tuple[CurvePoint, ...]:
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
