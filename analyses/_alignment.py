"""Helpers shared by the evolution analyses: the checkpoint series of a run, PCA frames
aligned across checkpoints, and the structure metrics of a set of labelled points
(rank correlation, circularity, helix fit).

Alignment. Every checkpoint gets its own PCA (so its explained variance is its own), and the
coordinates of consecutive checkpoints are then matched by orthogonal Procrustes: the
rotation or reflection R minimising ||A R - B||_F. PCA axes are only defined up to sign (and
up to rotation inside a degenerate eigenspace, as for a perfect ring), so without this step
an animation flips and spins between frames although nothing changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA

from abacus_interp.checkpoints import (
    CheckpointError,
    list_checkpoints,
    run_dir_of,
    subsample_evenly,
)
from abacus_interp.errors import UserError

ALIGN_MODES = ("chain", "final", "project", "none")


# --------------------------------------------------------------------- checkpoint series
def checkpoint_series(
    run_dir_or_checkpoints, max_checkpoints: int | None = None
) -> tuple[Path, list[tuple[int, Path]]]:
    """(run directory, [(step, path)] ascending) from a run directory or an explicit list of
    (step, path). `max_checkpoints` keeps that many, evenly spread, first and last included."""
    if isinstance(run_dir_or_checkpoints, (str, Path)):
        run_dir = Path(run_dir_or_checkpoints)
        series = list_checkpoints(run_dir)
        if not series:
            raise CheckpointError(f"{run_dir} has no checkpoints yet; train it first (abacus-interp train)")
    else:
        try:
            series = sorted((int(step), Path(path)) for step, path in run_dir_or_checkpoints)
        except (TypeError, ValueError) as e:
            raise UserError("pass a run directory or a list of (step, path) pairs, e.g. list_checkpoints(run)") from e
        if not series:
            raise UserError("the list of checkpoints is empty")
        run_dir = run_dir_of(series[0][1])
    steps = [s for s, _ in series]
    if len(set(steps)) != len(steps):
        raise UserError(f"duplicate steps in the checkpoint list: {steps}")
    return run_dir, subsample_evenly(series, max_checkpoints)


def value_tokens(vocab) -> tuple[list[int], list[int], list[str]]:
    """Ids, values and labels of the tokens that name a number: the digits 0..9 of the
    arithmetic vocabularies, the residues 0..p-1 of modular addition. Sorted by value."""
    found = [(int(tok), i, tok) for i, tok in enumerate(vocab.tokens) if tok.isascii() and tok.isdigit()]
    found.sort()
    return [i for _, i, _ in found], [v for v, _, _ in found], [t for _, _, t in found]


# ----------------------------------------------------------------------------- PCA frames
def pca_frame(X: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """PCA coordinates [n, n_components] and explained-variance ratios [n_components] of the
    rows of X. Components a small point set cannot have are zero coordinates and NaN ratios."""
    n, d = X.shape
    k = min(n_components, n, d)
    coords = np.zeros((n, n_components))
    ratio = np.full(n_components, np.nan)
    if np.allclose(X, X.mean(0)):
        return coords, ratio  # every point identical: no direction to speak of
    pca = PCA(n_components=k, svd_solver="full").fit(X)
    coords[:, :k] = pca.transform(X)
    ratio[:k] = pca.explained_variance_ratio_
    return coords, ratio


def procrustes(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The orthogonal R (rotation or reflection) minimising ||A R - B||_F."""
    U, _, Vt = np.linalg.svd(A.T @ B)
    return U @ Vt


def align_frames(frames: Sequence[np.ndarray], mode: str = "chain") -> np.ndarray:
    """Align per-checkpoint PCA coordinates [n, k] (same points, same order) to each other.

    "chain": the last frame keeps its own PCA axes; each earlier frame is Procrustes-matched
        to the already aligned frame after it, so consecutive frames move as little as possible.
    "final": every frame is matched directly to the last one.
    "none":  raw per-checkpoint PCA coordinates (signs may flip between frames).
    """
    frames = [np.asarray(f, dtype=float) for f in frames]
    if mode == "none":
        return np.stack(frames)
    if mode not in ("chain", "final"):
        raise UserError(f"align must be one of {ALIGN_MODES}, got {mode!r}")
    out = list(frames)
    for i in range(len(frames) - 2, -1, -1):
        target = out[i + 1] if mode == "chain" else out[-1]
        out[i] = frames[i] @ procrustes(frames[i], target)
    return np.stack(out)


def project_on_final(matrices: Sequence[np.ndarray], n_components: int) -> np.ndarray:
    """Fit PCA on the last matrix and project every (self-centred) matrix onto its axes."""
    last = matrices[-1]
    k = min(n_components, *last.shape)
    pca = PCA(n_components=k, svd_solver="full").fit(last)
    out = np.zeros((len(matrices), last.shape[0], n_components))
    for i, X in enumerate(matrices):
        out[i, :, :k] = (X - X.mean(0)) @ pca.components_.T
    return out


# ------------------------------------------------------------------------ structure metrics
def spearman_abs(x: np.ndarray, values: Sequence[float]) -> float:
    """|Spearman rho| between a coordinate and the point values (a PC's sign is arbitrary)."""
    x = np.asarray(x, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        return math.nan
    rx = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)
    rv = np.argsort(np.argsort(np.asarray(values, dtype=float), kind="stable"), kind="stable").astype(float)
    return float(abs(np.corrcoef(rx, rv)[0, 1]))


def circularity(v: np.ndarray) -> tuple[float, int | None]:
    """Circularity of one principal component v (points ordered by value), after Zhong et al.:

        c(v) = max_{1 <= k < n/2}  2 |F_k|^2 / (n ||v - mean(v)||^2),
        F_k  = sum_j (v_j - mean(v)) exp(-2 pi i j k / n),

    the largest share of v's variance carried by one frequency (by Parseval the shares of
    k and n-k add up to 2|F_k|^2 / (n ||v||^2), so c is in [0, 1]). A ring of n points in a
    PC plane, ordered by value, has v_j = r cos(2 pi j / n + phi) on each of its two PCs, so
    c = 1 at k = 1. The Nyquist frequency k = n/2 is excluded: a +-1 parity pattern is not a
    circle. Returns (c, argmax k); NaN for fewer than 3 points or a constant v.
    """
    v = np.asarray(v, dtype=float)
    n = len(v)
    v = v - v.mean()
    energy = float(v @ v)
    ks = np.arange(1, (n + 1) // 2)
    if n < 3 or len(ks) == 0 or energy <= 1e-300:
        return math.nan, None
    share = 2 * np.abs(np.fft.fft(v)[ks]) ** 2 / (n * energy)
    best = int(np.argmax(share))
    return float(min(share[best], 1.0)), int(ks[best])


def helix_fit(X: np.ndarray, values: Sequence[float], periods: Sequence[float] = (2, 5, 10)) -> dict:
    """R^2 of a least-squares fit of the points X [n, d] (all dimensions, centred) on
    [1, a, cos(2 pi a / T), sin(2 pi a / T)] for each period T ("T=2", ...), and on all periods
    at once ("joint", with "joint_adjusted" penalising its extra regressors, which with 10
    points and 6 regressors matters)."""
    X = np.asarray(X, dtype=float)
    a = np.asarray(values, dtype=float)
    out = {}
    for T in periods:
        out[f"T={T:g}"] = _r2(X, [a, np.cos(2 * np.pi * a / T), np.sin(2 * np.pi * a / T)])[0]
    joint = [a] + [f(2 * np.pi * a / T) for T in periods for f in (np.cos, np.sin)]
    out["joint"], out["joint_adjusted"] = _r2(X, joint)
    return out


def _r2(X: np.ndarray, columns: list[np.ndarray]) -> tuple[float, float]:
    n = X.shape[0]
    Xc = X - X.mean(0)
    total = float((Xc**2).sum())
    if total <= 1e-300:
        return math.nan, math.nan
    design = np.column_stack([np.ones(n), *columns])
    beta, *_ = np.linalg.lstsq(design, X, rcond=None)
    r2 = 1.0 - float(((X - design @ beta) ** 2).sum()) / total
    p = np.linalg.matrix_rank(design, tol=1e-8 * n) - 1  # regressors besides the intercept
    adjusted = 1.0 - (1.0 - r2) * (n - 1) / (n - p - 1) if n - p - 1 > 0 else math.nan
    return r2, adjusted
