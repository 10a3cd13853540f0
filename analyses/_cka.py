"""The comparisons behind checkpoint_compare: linear CKA between representations, change
points of a series over training, and how far each parameter moved between two checkpoints.

Linear CKA (Kornblith et al. 2019) of X [n, d1] and Y [n, d2], the same n samples:

    CKA(X, Y) = ||Xc^T Yc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F),   Xc = X - column means.

It is 1 for X against itself and unchanged by orthogonal transforms and isotropic scaling
of either side. It depends on X only through Xc Xc^T, so a representation wider than it has
samples is first compressed to Xc = U S (n x n) without changing any CKA value.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from abacus_interp.errors import UserError

HEAD_PARAM = re.compile(r"\.attn\.(W_Q|W_K|W_V|W_O|b_Q|b_K|b_V)$")


def center(X: Tensor) -> Tensor:
    return X - X.mean(0, keepdim=True)


def compress(X: Tensor) -> Tensor:
    """Centre X [n, d]; when d > n replace it by U S [n, n], which has the same X X^T."""
    Xc = center(X)
    if Xc.shape[1] > Xc.shape[0]:
        U, S, _ = torch.linalg.svd(Xc.double(), full_matrices=False)
        Xc = (U * S).to(X.dtype)
    return Xc


def linear_cka(X: Tensor | np.ndarray, Y: Tensor | np.ndarray) -> float:
    """Linear CKA of two representations of the same samples (rows)."""
    X, Y = (torch.as_tensor(np.asarray(Z) if not torch.is_tensor(Z) else Z).double() for Z in (X, Y))
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"CKA needs the same samples on both sides: {X.shape[0]} rows vs {Y.shape[0]}")
    Xc, Yc = center(X), center(Y)
    cross = (Xc.T @ Yc).square().sum()
    norm = (Xc.T @ Xc).square().sum().sqrt() * (Yc.T @ Yc).square().sum().sqrt()
    return float(cross / norm) if norm > 0 else math.nan


def _self_norms(reps: Tensor) -> Tensor:
    """||Xc^T Xc||_F of each stacked representation [M, n, w] (already centred)."""
    return torch.stack([(R.T @ R).double().square().sum().sqrt() for R in reps])


def cka_matrix(reps_a: Tensor, reps_b: Tensor | None = None) -> np.ndarray:
    """CKA of every pair: reps [M, n, w] (each slice centred, e.g. by `compress`) against
    reps_b [N, n, w'] (or against itself, symmetric, computing the upper triangle only).

    Each row block is one matmul Xi^T [R_j ...] of shape w x (N w'), so the work runs in
    large BLAS calls rather than M*N small ones."""
    symmetric = reps_b is None
    reps_b = reps_a if symmetric else reps_b
    M, n, _ = reps_a.shape
    N, n_b, wb = reps_b.shape
    if n != n_b:
        raise ValueError(f"CKA needs the same samples on both sides: {n} vs {n_b}")
    norm_a = _self_norms(reps_a)
    norm_b = norm_a if symmetric else _self_norms(reps_b)
    wide_b = reps_b.permute(1, 0, 2).reshape(n, N * wb)  # [n, N*w']
    out = np.full((M, N), np.nan)
    for i in range(M):
        start = i if symmetric else 0
        cross = reps_a[i].T @ wide_b[:, start * wb :]  # [w, (N-start) w']
        sq = cross.reshape(cross.shape[0], N - start, wb).double().square().sum((0, 2))
        denom = norm_a[i] * norm_b[start:]
        values = torch.where(denom > 0, sq / denom.clamp_min(1e-300), torch.nan).numpy()
        out[i, start:] = values
        if symmetric:
            out[start:, i] = values
    return np.clip(out, 0.0, 1.0)


# ------------------------------------------------------------------------------ change points
def rates(steps: Sequence[int], values: Sequence[float], per: str = "step") -> np.ndarray:
    """Rate of an interval quantity: values[k] (the change between checkpoint k and k+1)
    divided by the gap, in steps (per="step") or in log time, ln(1 + step) (per="log_step"),
    which suits log-spaced early checkpoints and runs whose phases are seen on a log axis."""
    steps = np.asarray(steps, dtype=float)
    if per == "step":
        gaps = np.maximum(np.diff(steps), 1.0)
    elif per == "log_step":
        gaps = np.diff(np.log1p(steps))
    else:
        raise UserError(f"per must be 'step' or 'log_step', got {per!r}")
    return np.asarray(values, dtype=float) / gaps


def change_points(steps: Sequence[int], speed: Sequence[float], top: int = 3) -> list[dict]:
    """The `top` intervals where a per-step speed peaks.

    speed[k] is the rate of change between checkpoints k and k+1. Candidates are local maxima
    of the speed (an interval at least as fast as both neighbours; the two ends compare with
    their one neighbour), ranked by speed. Each is reported as the checkpoint that closes
    the interval ("step"), with the interval's start ("from_step") and its speed."""
    speed = np.asarray(speed, dtype=float)
    steps = list(steps)
    if len(speed) != len(steps) - 1:
        raise ValueError(f"{len(speed)} speeds for {len(steps)} checkpoints; expected one per interval")
    finite = np.where(np.isfinite(speed), speed, -np.inf)
    padded = np.concatenate([[-np.inf], finite, [-np.inf]])
    peaks = [k for k in range(len(speed)) if np.isfinite(finite[k]) and finite[k] >= padded[k] and finite[k] >= padded[k + 2]]
    peaks.sort(key=lambda k: -finite[k])
    return [
        {"step": int(steps[k + 1]), "from_step": int(steps[k]), "speed": float(speed[k])}
        for k in peaks[:top]
    ]


# --------------------------------------------------------------------------- parameter moves
def param_group(name: str) -> str:
    """The parameter group a state-dict key belongs to."""
    if name == "W_E":
        return "embed"
    if name == "W_pos":
        return "pos_embed"
    if name in ("W_U", "b_U"):
        return "unembed"
    m = re.match(r"blocks\.(\d+)\.(attn|mlp|ln1|ln2)\.", name)
    if m:
        return "layernorm" if m.group(2).startswith("ln") else f"blocks.{m.group(1)}.{m.group(2)}"
    return "layernorm" if name.startswith("ln_final") else "other"


def moved_parameters(sa: dict, sb: dict, top_k: int, rank_by: str) -> dict:
    """Change of every parameter tensor (and attention head) between two state dicts."""

    def row(label, group, x, y):
        x, y = x.double(), y.double()
        d = float((y - x).norm())
        scale = max(float(x.norm()), float(y.norm()), 1e-12)
        return {"name": label, "group": group, "abs_change": d, "rms_change": d / math.sqrt(max(x.numel(), 1)),
                "relative_change": d / scale, "norm_a": float(x.norm()), "norm_b": float(y.norm()), "numel": x.numel()}

    # per parameter group: squared norms in a and b, and of their difference
    groups: defaultdict[str, tuple[float, float, float]] = defaultdict(lambda: (0.0, 0.0, 0.0))
    params, heads = [], []
    for name in sa:
        g = param_group(name)
        params.append(row(name, g, sa[name], sb[name]))
        if HEAD_PARAM.search(name):
            heads += [row(f"{name}[head {h}]", g, sa[name][h], sb[name][h]) for h in range(sa[name].shape[0])]
        ga, gb, gd = groups[g]
        groups[g] = (ga + float(sa[name].double().square().sum()), gb + float(sb[name].double().square().sum()),
                     gd + float((sb[name].double() - sa[name].double()).square().sum()))
    group_rows = [{"group": g, "abs_change": math.sqrt(d), "relative_change": math.sqrt(d) / max(math.sqrt(a), math.sqrt(b), 1e-12)}
                  for g, (a, b, d) in groups.items()]
    def key(r):
        return -r[rank_by]

    return {"rank_by": rank_by, "parameters": sorted(params, key=key)[:top_k], "heads": sorted(heads, key=key)[:top_k],
            "groups": sorted(group_rows, key=lambda r: -r["relative_change"])}
