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

from abacus_interp.jsonsafe import from_json, json_safe, to_json
from abacus_interp.tasks.base import Example
from analyses.common import resolve
from analyses.contract import configure

from .collect import Collected, collect, model_spectrum
from .config import FixedPointConfig
from .dynamics import quantiles
from .figures import all_figures
from .findings import findings
from .path_independence import path_independence
from .problems import CLASSES, as_examples, balanced_problems, chain_lengths
from .result import FixedPointSummary
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

@dataclass(frozen=True)
class FixedPointResult:
    """Everything `run` computed: `summary`, the typed numbers (what `to_dict` writes without
    per-example arrays), and the per-example arrays kept for notebook use."""

    summary: FixedPointSummary
    examples: tuple[Example, ...]
    collected: Collected = field(repr=False, compare=False)
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
        """JSON-safe: the summary, plus per-example arrays unless `per_example=False`
        (default: `per_example_in_dict`)."""
        out = to_json(self.summary)
        if self.per_example_in_dict if per_example is None else per_example:
            out["per_example"] = json_safe(self._per_example())
        return out

    def figures(self) -> dict[str, Any]:
        """Plotly figures (never shown): step_sizes, logit_lens, lock_in, exact_match,
        halting, orbit, contraction and path_independence (the last two when computed)."""
        return all_figures(self.summary)

    def findings(self) -> list[str]:
        return findings(self.summary)

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
            "behaviour": self.summary.behaviour.labels,
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


def run(
    model_or_run,
    problems: Sequence | None = None,
    *,
    task=None,
    config: FixedPointConfig | None = None,
    progress: bool = True,
    **overrides: Any,
) -> FixedPointResult:
    """Does the loop converge to a fixed point, when does each answer digit lock in, and
    what happens past the trained depth?

    model_or_run: a LoopedTransformer, a run directory or a .safetensors checkpoint.
    problems: task Examples, operand tuples or human strings; default `n_problems` from
      `balanced_problems` (in-distribution lengths, longest carry chains 0..max_chain
      equally represented, plus uniform samples).
    config: every setting (`FixedPointConfig`, whose field comments say what each does);
      default `FixedPointConfig()`, the report's, so this computes the report's numbers.
    overrides: fields of the config by name, e.g. `n_problems=8, horizon=12`.
    """
    cfg = configure(FixedPointConfig, config, overrides, "fixed_point.run()")
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    subject = resolve(model_or_run, task=task)
    model, task = subject.model, subject.task
    horizon = default_horizon(model.cfg) if cfg.horizon is None else int(cfg.horizon)
    # the trained depth as a reference point inside the horizon (a shorter horizon clips it)
    trained = min(model.cfg.n_loops, horizon)
    model = _with_capacity(model, horizon)
    examples = balanced_problems(task, cfg.n_problems, cfg.seed, cfg.max_chain) if problems is None else as_examples(task, problems)
    chains = chain_lengths(task, examples)

    was_training = model.training
    model.eval()
    try:
        c = collect(model, examples, horizon, cfg.batch_size, cfg.state_budget_mb,
                    _spread(chains, len(examples), cfg.n_trajectories), progress)
    finally:
        model.train(was_training)

    data = _header(subject, model, task, cfg, c, trained, horizon, len(examples))
    data.update(_sections(model, cfg, examples, chains, c, trained, horizon))
    data["resources"] = _resources(started, rss_before, model)
    result = FixedPointResult(summary=from_json(FixedPointSummary, json_safe(data)), examples=tuple(examples),
                              collected=c, chains=chains)
    for line in result.findings():
        logger.info("fixed point: %s", line)
    return result


def _header(subject, model, task, cfg: FixedPointConfig, c: Collected, trained: int, horizon: int,
            n_problems: int) -> dict[str, Any]:
    """What was analysed and with which settings: the summary's first fields."""
    return {
        "analysis": "fixed_point",
        "run_dir": str(subject.run_dir) if subject.run_dir else None,
        "checkpoint": model.checkpoint_path,
        "task": {"name": task.name, **task.config()},
        "model": {k: model.cfg.to_dict()[k] for k in ("d_model", "n_layers", "n_heads", "n_loops", "max_loops", "max_seq_len")},
        "trained_loops": trained,
        "model_n_loops": model.cfg.n_loops,
        "horizon": horizon,
        "loops": list(range(1, horizon + 1)),
        "n_problems": n_problems,
        "settings": {"tolerances": cfg.tolerances, "halt_tol": cfg.halt_tol,
                     "halting_tolerances": cfg.halting_tolerances, "halt_on": cfg.halt_on, "seed": cfg.seed,
                     "batch_size": c.batch_size, "state_budget_mb": cfg.state_budget_mb,
                     "jacobian_iters": cfg.jacobian_iters, "jacobian_tol": cfg.jacobian_tol},
    }


def _sections(model, cfg: FixedPointConfig, examples: list[Example], chains: list[list[int]] | None, c: Collected,
              trained: int, horizon: int) -> dict[str, Any]:
    """The summary's sections, in its order: from the collected numbers, then the Jacobian
    spectrum and the path-independence test (each None when its config turns it off)."""
    data: dict[str, Any] = {}
    # the findings quote the crossing of halt_tol: measure it even where the sweep leaves it out
    data["steps"] = steps_section(c, sorted(set(cfg.tolerances) | {cfg.halt_tol}, reverse=True))
    data["logit_lens"] = logit_lens_section(c, chains)
    exact = (c.correct | ~c.answer_mask[:, None, :]).all(-1)
    data["lock_in"] = lock_in_section(c, chains, trained)
    data["behaviour"] = behaviour_section(c, trained, exact.mean(0))
    data["halting"] = halting_section(c, cfg.halting_tolerances, exact, cfg.halt_tol, cfg.halt_on)
    data["trajectories"] = trajectories_section(c, examples, chains)
    data["contraction"] = _contraction(model, examples, chains, c, trained, horizon, cfg.n_jacobian,
                                       cfg.jacobian_iters, cfg.jacobian_tol, cfg.seed)
    data["path_independence"] = (
        path_independence(model, [examples[i] for i in _stratified(chains, len(examples), cfg.n_path)], horizon,
                          cfg.path_starts, seed=cfg.seed, batch_size=cfg.batch_size)
        if cfg.n_path > 0 else None
    )
    return data


def _resources(started: float, rss_before: int, model) -> dict[str, float | None]:
    """Seconds since `started` and peak memory (this process's, and CUDA's on a GPU)."""
    return {
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_increase_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024,
        "cuda_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if model.W_E.is_cuda else None,
    }


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

