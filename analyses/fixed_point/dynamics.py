"""Fixed-point numerics for any loop map `f: state -> state`, independent of the model.

Every function takes a batch of states `[batch, ...]` and a map that acts on each example
independently (the looped transformer does: examples never see each other), so the
Jacobian of the batched map is block-diagonal and one power iteration, normalised per
example, estimates every example's spectrum at once.

Two numbers describe how a map contracts near a state s:

* the spectral radius rho(J) = max |eigenvalue| of the Jacobian J = df/ds. It sets the
  asymptotic rate: steps near a fixed point shrink like rho^t, and rho < 1 means the
  fixed point attracts. Estimated by power iteration on J itself with Jacobian-vector
  products: the per-example norm ratio ||J v|| / ||v||, averaged geometrically over the
  last `window` iterations (which also handles a complex dominant pair, whose rotation
  makes single ratios oscillate), and the Rayleigh quotient <v, J v> (the signed dominant
  eigenvalue when it is real).
* the largest singular value sigma_max(J) = ||J||_2 >= rho, the worst one-step
  amplification, by power iteration on J^T J (a JVP then a VJP). For a non-normal J the
  two differ, and sigma_max > 1 with rho < 1 means transient growth before contraction.

Jacobian-vector products use the double-VJP trick on a single forward pass:
g(u) = J^T u is linear in u, so the VJP of g with cotangent v is J v. This needs only
reverse-mode AD, which every op supports (torch's fused CPU attention kernel has no
forward-mode rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from abacus_interp.errors import UserError

LoopMap = Callable[[Tensor], Tensor]


def batch_norm(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Per-example Euclidean norm over every non-batch dimension (masked entries dropped)."""
    if mask is not None:
        x = x * mask
    return x.flatten(1).float().norm(dim=1)


class Linearization:
    """J v and J^T w of `f` at `state`, from one forward pass kept alive for both."""

    def __init__(self, f: LoopMap, state: Tensor):
        self.state = state.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            self.output = f(self.state)
            self.u = torch.zeros_like(self.output, requires_grad=True)
            (self.g,) = torch.autograd.grad(self.output, self.state, self.u, create_graph=True)

    def vjp(self, w: Tensor) -> Tensor:
        with torch.enable_grad():
            (out,) = torch.autograd.grad(self.output, self.state, w, retain_graph=True)
        return out

    def jvp(self, v: Tensor) -> Tensor:
        with torch.enable_grad():
            (out,) = torch.autograd.grad(self.g, self.u, v, retain_graph=True)
        return out


@dataclass
class SpectrumEstimate:
    """Per-example estimates (numpy arrays of shape [batch])."""

    spectral_radius: np.ndarray  # geometric mean of ||Jv||/||v|| over the last `window` steps
    rayleigh: np.ndarray  # <v, Jv> at the last step: the dominant eigenvalue, with sign, if real
    sigma_max: np.ndarray  # largest singular value (power iteration on J^T J)
    radius_iterations: int
    sigma_iterations: int
    converged: bool  # both iterations met `tol` before `n_iter`

    def to_dict(self) -> dict:
        return {
            "spectral_radius": self.spectral_radius.tolist(),
            "rayleigh": self.rayleigh.tolist(),
            "sigma_max": self.sigma_max.tolist(),
            "radius_iterations": self.radius_iterations,
            "sigma_iterations": self.sigma_iterations,
            "converged": self.converged,
        }


def _unit(v: Tensor, mask: Tensor | None) -> Tensor:
    if mask is not None:
        v = v * mask
    n = batch_norm(v).clamp_min(1e-30)
    return v / n.view(-1, *[1] * (v.dim() - 1)).to(v.dtype)


@dataclass
class _PowerIteration:
    estimate: Tensor  # per example
    iterations: int
    converged: bool
    v: Tensor  # the last unit input and its image, for a Rayleigh quotient
    w: Tensor


def _power_iteration(
    apply: Callable[[Tensor], Tensor], v: Tensor, n_iter: int, tol: float, window: int, root: int = 1
) -> _PowerIteration:
    """Power iteration of the linear map `apply` from the unit vector `v`.

    The per-example growth ||apply(v)|| is averaged geometrically over the last `window`
    iterations (the ratio oscillates when the top eigenvalues are complex), and its
    `root`-th root is the estimate (2 for J^T J gives sigma). Every `window` iterations the
    estimate is compared with the previous check; it stops once no example moved by more
    than `tol` (relative)."""
    logs: list[Tensor] = []
    previous = None
    for k in range(n_iter):
        w = apply(v)
        logs.append(batch_norm(w).clamp_min(1e-30).log() / root)
        if len(logs) >= window and (k + 1) % window == 0:
            estimate = torch.stack(logs[-window:]).mean(0).exp()
            if previous is not None and bool(((estimate - previous).abs() <= tol * previous.clamp_min(1e-12)).all()):
                return _PowerIteration(estimate, k + 1, True, v, w)
            previous = estimate
        if k + 1 < n_iter:
            v = _unit(w, None)
    return _PowerIteration(torch.stack(logs[-window:]).mean(0).exp(), n_iter, False, v, w)


def spectrum(
    f: LoopMap,
    state: Tensor,
    mask: Tensor | None = None,
    n_iter: int = 200,
    tol: float = 1e-5,
    window: int = 20,
    seed: int = 0,
) -> SpectrumEstimate:
    """Spectral radius and largest singular value of df/ds at `state`, per example.

    `mask` (broadcastable to `state`, 1 for real entries) restricts the operator to the real
    part of the state (padding excluded). Each power iteration stops early once its
    per-example estimates change by less than `tol` (relative) over `window` iterations,
    and never runs more than `n_iter` iterations."""
    if n_iter < 2:
        raise UserError(f"n_iter must be >= 2, got {n_iter}")
    window = max(1, min(window, n_iter // 2))
    lin = Linearization(f, state)
    gen = torch.Generator().manual_seed(seed)
    start = torch.randn(state.shape, generator=gen, dtype=torch.float32).to(state)

    def masked(x: Tensor) -> Tensor:
        return x if mask is None else x * mask

    on_j = _power_iteration(lambda v: masked(lin.jvp(v)), _unit(start, mask), n_iter, tol, window)
    # sigma^2 = ||J^T J u|| for unit u; the estimate is checked per iteration (window 1)
    on_jtj = _power_iteration(lambda u: masked(lin.vjp(masked(lin.jvp(u)))), _unit(start, mask), n_iter, tol,
                              window=1, root=2)
    rayleigh = (on_j.v.float() * on_j.w.float()).flatten(1).sum(1)
    return SpectrumEstimate(
        spectral_radius=on_j.estimate.detach().cpu().double().numpy(),
        rayleigh=rayleigh.detach().cpu().double().numpy(),
        sigma_max=on_jtj.estimate.detach().cpu().double().numpy(),
        radius_iterations=on_j.iterations,
        sigma_iterations=on_jtj.iterations,
        converged=on_j.converged and on_jtj.converged,
    )


def iterate(f: LoopMap, state: Tensor, n_steps: int, mask: Tensor | None = None) -> dict[str, np.ndarray]:
    """Run `s <- f(s)` for `n_steps` steps and return per-example `step` ||s_n - s_{n-1}||,
    `norm` ||s_n|| and `relative_step` (their ratio), each of shape [batch, n_steps]."""
    steps, norms = [], []
    s = state
    with torch.no_grad():
        for _ in range(n_steps):
            nxt = f(s)
            steps.append(batch_norm(nxt - s, mask))
            norms.append(batch_norm(nxt, mask))
            s = nxt
    step = torch.stack(steps, 1).double().cpu().numpy()
    norm = torch.stack(norms, 1).double().cpu().numpy()
    return {"step": step, "norm": norm, "relative_step": step / np.maximum(norm, 1e-30)}


def decay_rate(steps: np.ndarray, start: int = 0) -> np.ndarray:
    """Geometric rate r of steps ~ c * r^n: exp of the least-squares slope of log(step)
    over indices `start`.. (last axis), per row. r < 1: shrinking steps."""
    steps = np.atleast_2d(np.asarray(steps, dtype=float))[:, start:]
    if steps.shape[1] < 2:
        return np.full(steps.shape[0], np.nan)
    x = np.arange(steps.shape[1], dtype=float)
    y = np.log(np.maximum(steps, 1e-30))
    x = x - x.mean()
    slope = ((y - y.mean(1, keepdims=True)) * x).sum(1) / (x**2).sum()
    return np.exp(slope)


BEHAVIOURS = ("converging", "cycling", "drifting")


def classify(
    step: np.ndarray,
    distance_to_last: np.ndarray,
    converged_tol: float = 1e-4,
    decay_threshold: float = 0.97,
    recurrence_ratio: float = 0.5,
) -> np.ndarray:
    """Label each row's tail of loops "converging", "cycling" or "drifting".

    `step[i, n]` is ||s_n - s_{n-1}|| / ||s_last|| (normalised by the *final* norm, so a
    state whose norm grows linearly shows a flat step trend, not a falsely decaying relative
    step) and `distance_to_last[i, n]` is ||s_n - s_last|| / ||s_last|| over the same loops.

    converging: steps shrink geometrically (fitted rate < `decay_threshold` per loop) or the
      last step is below `converged_tol`;
    cycling: steps do not shrink but the state returns near an earlier one: some state two
      or more loops back is closer to the last than `recurrence_ratio` x the median step;
    drifting: neither (the state keeps moving away).
    """
    step = np.atleast_2d(step)
    dist = np.atleast_2d(distance_to_last)
    rate = decay_rate(step)
    out = []
    for i in range(step.shape[0]):
        if step[i, -1] < converged_tol or rate[i] < decay_threshold:
            out.append("converging")
            continue
        earlier = dist[i, :-2]
        typical = np.median(step[i])
        if earlier.size and np.min(earlier) < recurrence_ratio * typical:
            out.append("cycling")
        else:
            out.append("drifting")
    return np.array(out)


def first_below(curve: np.ndarray, tol: float, loops: np.ndarray | None = None) -> int | None:
    """The first loop (1-based unless `loops` given) where `curve` < tol, or None."""
    curve = np.asarray(curve, dtype=float)
    hits = np.flatnonzero(np.nan_to_num(curve, nan=np.inf) < tol)
    if not hits.size:
        return None
    return int(hits[0] + 1 if loops is None else loops[hits[0]])


def quantiles(x: np.ndarray, axis: int = 0) -> dict[str, np.ndarray]:
    """Median, quartiles and mean along `axis`, NaNs ignored (all-NaN slices give NaN)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"), _quiet():
        q25, med, q75 = np.nanpercentile(x, [25, 50, 75], axis=axis)
        mean = np.nanmean(x, axis=axis)
    return {"median": med, "q25": q25, "q75": q75, "mean": mean}


class _quiet:
    """Silence numpy's RuntimeWarning for all-NaN slices (a class with no examples)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)
