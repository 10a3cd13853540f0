"""`run`: the whole fixed-point analysis of a looped model, and its result object."""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from abacus_interp.errors import UserError
from abacus_interp.jsonsafe import json_safe
from analyses.common import resolve
from analyses.contract import takes_config

from . import figures as _figures
from .collect import Collected, collect, model_spectrum
from .config import FixedPointConfig
from .dynamics import quantiles
from .findings import findings
from .path_independence import STARTS, path_independence
from .problems import CLASSES, as_examples, balanced_problems, chain_lengths
from .summary import (
    ALL,
    behaviour_section,
    halting_section,
    lock_in_loops,
    lock_in_section,
    logit_lens_section,
    relative_distance,
    relative_steps,
    steps_section,
    trajectories_section,
)

logger = logging.getLogger(__name__)

DEFAULT_TOLERANCES = (0.1, 0.03, 0.01, 0.003, 0.001)
DEFAULT_HALTING = (0.3, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.001)


@dataclass
class FixedPointResult:
    """Everything `run` computed. `data` is the JSON-safe summary (what `to_dict` returns
    without per-example arrays); the numpy arrays are kept for notebook use."""

    data: dict[str, Any]
    examples: list
    collected: Collected = field(repr=False)
    chains: list[list[int]] | None = field(repr=False, default=None)
    per_example_in_dict: bool = field(repr=False, default=True)  # what to_dict() gives by default

    # -- convenience views -------------------------------------------------------------
    @property
    def headline(self) -> list[str]:
        """The findings: a few sentences on convergence, lock-in, contraction and paths."""
        return self.findings()

    @property
    def relative_step(self) -> np.ndarray:
        """[N, H, C] per-example relative step by class (classes in `CLASSES` order)."""
        return relative_steps(self.collected)

    @property
    def distance_to_last(self) -> np.ndarray:
        return relative_distance(self.collected)

    @property
    def exact_match_per_example(self) -> np.ndarray:
        """[N, H] teacher-forced (= greedy) exact match after n loops."""
        c = self.collected
        return (c.correct | ~c.answer_mask[:, None, :]).all(-1)

    @property
    def lock_in(self) -> np.ndarray:
        """[N, L] lock-in loop per answer token (digits then EOS), NaN if never / padding."""
        return lock_in_loops(self.collected)

    def to_dict(self, per_example: bool | None = None) -> dict[str, Any]:
        """JSON-safe: the summary sections, plus per-example arrays unless `per_example=False`
        (default: `per_example_in_dict`)."""
        out = dict(self.data)
        if self.per_example_in_dict if per_example is None else per_example:
            out["per_example"] = json_safe(self._per_example())
        return out

    def figures(self) -> dict[str, Any]:
        """Plotly figures (never shown): step_sizes, logit_lens, lock_in, exact_match,
        halting, orbit and contraction."""
        return _figures.all_figures(self.data)

    def findings(self) -> list[str]:
        return findings(self.data)

    def _per_example(self) -> dict[str, Any]:
        c = self.collected
        rel, dist = self.relative_step, self.distance_to_last
        return {
            "prompt": [e.prompt for e in self.examples],
            "target": [e.target for e in self.examples],
            "carry_chains": self.chains,
            "relative_step": {name: rel[:, :, j] for j, name in enumerate(CLASSES)},
            "distance_to_last": {name: dist[:, :, j] for j, name in enumerate(CLASSES)},
            "exact_match": self.exact_match_per_example.astype(int),
            "token_correct": c.correct.astype(int),
            "teacher_forced_argmax": c.predicted,
            "kl": c.kl,
            "lock_in": self.lock_in,
            "behaviour": self.data["behaviour"].get("labels"),
        }


def _stratified(chains: list[list[int]] | None, n: int, k: int) -> list[int]:
    """`k` example indices spread over longest-chain values (round robin from short to
    long), or the first `k` without chain labels."""
    if k <= 0:
        return []
    if chains is None:
        return list(range(min(k, n)))
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(chains):
        groups.setdefault(max(row, default=0), []).append(i)
    keys, out = sorted(groups), []
    while len(out) < min(k, n):
        for key in keys:
            if groups[key] and len(out) < k:
                out.append(groups[key].pop(0))
    return sorted(out)


def _spread(chains: list[list[int]] | None, n: int, k: int) -> dict[int, int]:
    """Trajectory examples (one per distinct longest chain, evenly spread) -> answer slot of
    their longest chain (the hardest digit); the last answer digit without chain labels."""
    if k <= 0:
        return {}
    if chains is None:
        return {i: 10**6 for i in range(min(k, n))}  # clipped to the last slot (EOS) later
    firsts: dict[int, int] = {}
    for i, row in enumerate(chains):
        firsts.setdefault(max(row, default=0), i)
    keys = sorted(firsts)
    picks = [keys[round(j * (len(keys) - 1) / max(k - 1, 1))] for j in range(min(k, len(keys)))]
    return {firsts[key]: int(np.argmax(chains[firsts[key]])) for key in dict.fromkeys(picks)}


def default_horizon(cfg) -> int:
    """Loops run when no horizon is given: 4 x the trained depth, within the model's hook sets."""
    return min(4 * cfg.n_loops, cfg.max_loops)


def _with_capacity(model, horizon: int):
    """The same weights with at least `horizon` hook sets (hook sets hold no parameters)."""
    if horizon <= model.cfg.max_loops:
        return model
    logger.info("rebuilding the model with max_loops=%d (was %d) to reach the horizon", horizon, model.cfg.max_loops)
    return model.with_max_loops(horizon).eval()


@takes_config(FixedPointConfig)
def run(
    model_or_run,
    problems: Sequence | None = None,
    *,
    task=None,
    horizon: int | None = None,
    n_problems: int = 300,
    max_chain: int = 5,
    seed: int = 0,
    batch_size: int = 256,
    state_budget_mb: float = 256.0,
    tolerances: Sequence[float] = DEFAULT_TOLERANCES,
    halt_tol: float = 0.03,
    halting_tolerances: Sequence[float] = DEFAULT_HALTING,
    halt_on: str = "readout",
    n_jacobian: int = 16,
    jacobian_iters: int = 200,
    jacobian_tol: float = 1e-5,
    n_trajectories: int = 4,
    n_path: int = 128,
    path_starts: Sequence[str] = STARTS,
    progress: bool = True,
) -> FixedPointResult:
    """Does the loop converge to a fixed point, when does each answer digit lock in, and
    what happens past the trained depth?

    model_or_run: a LoopedTransformer, a run directory or a .safetensors checkpoint.
    problems: task Examples, operand tuples or human strings; default `n_problems` from
      `balanced_problems` (in-distribution lengths, longest carry chains 0..max_chain
      equally represented, plus uniform samples).
    horizon: loops to run, default min(4 x trained loops, max_loops); a larger value
      rebuilds the model with more hook sets.
    halt_tol / halting_tolerances: Huginn's exit rule, relative step over `halt_on`
      positions below tol; the sweep is compared with fixed depth.
    n_jacobian / jacobian_iters: examples and power iterations for the Jacobian spectrum
      (0 examples skips it).
    state_budget_mb: bound on the per-batch states kept for distances to the last state.
    n_path / path_starts: problems and alternative initial states of the path-independence
      test (0 problems skips it); see `path_independence`.
    """
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    subject = resolve(model_or_run, task=task)
    model, task = subject.model, subject.task
    horizon = default_horizon(model.cfg) if horizon is None else int(horizon)
    if horizon < 1:
        raise UserError(f"horizon must be >= 1, got {horizon}")
    # the trained depth as a reference point inside the horizon (a shorter horizon clips it)
    trained = min(model.cfg.n_loops, horizon)
    if halt_on not in CLASSES:
        raise UserError(f"halt_on={halt_on!r}; choose one of {CLASSES}")
    model = _with_capacity(model, horizon)
    examples = balanced_problems(task, n_problems, seed, max_chain) if problems is None else as_examples(task, problems)
    chains = chain_lengths(task, examples)

    was_training = model.training
    model.eval()
    try:
        c = collect(model, examples, horizon, batch_size, state_budget_mb,
                    _spread(chains, len(examples), n_trajectories), progress)
    finally:
        model.train(was_training)

    data: dict[str, Any] = {
        "analysis": "fixed_point",
        "run_dir": str(subject.run_dir) if subject.run_dir else None,
        "checkpoint": model.checkpoint_path,
        "task": {"name": task.name, **task.config()},
        "model": {k: model.cfg.to_dict()[k] for k in ("d_model", "n_layers", "n_heads", "n_loops", "max_loops", "max_seq_len")},
        "trained_loops": trained,
        "model_n_loops": model.cfg.n_loops,
        "horizon": horizon,
        "loops": list(range(1, horizon + 1)),
        "n_problems": len(examples),
        "settings": {"tolerances": list(tolerances), "halt_tol": halt_tol, "halting_tolerances": list(halting_tolerances),
                     "halt_on": halt_on, "seed": seed, "batch_size": c.batch_size, "state_budget_mb": state_budget_mb,
                     "jacobian_iters": jacobian_iters, "jacobian_tol": jacobian_tol},
    }
    data["steps"] = steps_section(c, tolerances)
    data["logit_lens"] = logit_lens_section(c, chains)
    exact = (c.correct | ~c.answer_mask[:, None, :]).all(-1)
    data["lock_in"] = lock_in_section(c, chains, trained)
    data["behaviour"] = behaviour_section(c, trained, exact.mean(0))
    data["halting"] = halting_section(c, halting_tolerances, exact, halt_tol, halt_on)
    data["trajectories"] = trajectories_section(c, examples, chains)
    data["contraction"] = _contraction(model, examples, chains, c, trained, horizon, n_jacobian,
                                       jacobian_iters, jacobian_tol, seed)
    data["path_independence"] = (
        path_independence(model, [examples[i] for i in _stratified(chains, len(examples), n_path)], horizon,
                          path_starts, seed=seed, batch_size=batch_size)
        if n_path > 0 else None
    )
    data["resources"] = {
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_increase_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024,
        "cuda_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if model.W_E.is_cuda else None,
    }
    result = FixedPointResult(data=json_safe(data), examples=list(examples), collected=c, chains=chains)
    for line in result.findings():
        logger.info("fixed point: %s", line)
    return result


def _contraction(model, examples, chains, c, trained, horizon, n_jacobian, iters, tol, seed) -> dict | None:
    if n_jacobian <= 0:
        return None
    picked = _stratified(chains, len(examples), n_jacobian)
    at = sorted({trained, horizon})
    estimates = model_spectrum(model, [examples[i] for i in picked], at, iters, tol, seed)
    rel = relative_steps(c)[picked]
    out = {"examples": picked, "at": {}}
    for n, est in estimates.items():
        out["at"][str(n)] = {
            **est.to_dict(),
            "radius_quantiles": quantiles(est.spectral_radius),
            "sigma_quantiles": quantiles(est.sigma_max),
            "contracting_fraction": float((est.spectral_radius < 1).mean()),
            # the fixed-point residual ||f(s) - s|| / ||f(s)|| there (the next relative step)
            "residual": rel[:, n, ALL] if n < horizon else None,
        }
    return out

