"""The carry wave's result, a tree of frozen dataclasses: `to_dict` is `jsonsafe.to_json` of
it, and `figures()` / `findings()` read its attributes through figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.evaluation.extrapolation import ExtrapolationResult
from abacus_interp.jsonsafe import to_json
from analyses.prose import LinearFit

from .heads import HeadReading, Knockout
from .patching import DelayedCarry
from .stability import PathIndependenceAtLength


@dataclass(frozen=True)
class LockInFit:
    """Lock-in loop against carry distance over the answer digits of one sample."""

    label: str  # e.g. "planted chains, 20 digits"
    sample: str  # "uniform" or "planted chains"
    digits: int
    n_problems: int
    exact_match_at_horizon: float
    never_locked: int  # answer digits still wrong at the horizon (left out of the fit)
    chain: tuple[int, ...]  # per locked digit: the carry distance arriving at it
    lock_in: tuple[int, ...]  # per locked digit: its lock-in loop (1-based)
    median_by_chain: tuple[tuple[int, float], ...]  # (carry distance, median lock-in loop)
    fit: LinearFit


@dataclass(frozen=True)
class HaltingFit:
    """Loops used by adaptive halting against the longest carry distance of each problem."""

    label: str
    longest_chain: tuple[int, ...]  # per problem: its longest carry distance
    loops_used: tuple[int, ...]
    converged: tuple[bool, ...]
    fit: LinearFit


@dataclass(frozen=True)
class WaveProblem:
    """One long planted chain, loop by loop: the probability of the right digit at each answer
    position (the carry wave travelling up the answer)."""

    prompt: str  # model order, least-significant digit first
    human: str  # "a+b" in the usual order
    chain: int  # the longest carry distance of the problem
    p_correct: tuple[tuple[float, ...], ...]  # [loop][answer digit, least significant first]
    carry_distance: tuple[int, ...]  # per answer digit
    lock_in: tuple[int | None, ...]  # per answer digit; None: not right at the horizon


@dataclass(frozen=True)
class ConvergenceCheck:
    """Does not converging by the cap predict a wrong answer (Anil et al. 2022)?"""

    label: str
    cap: int
    n: int
    converged: float
    exact_match_converged: float | None
    exact_match_not_converged: float | None


@dataclass(frozen=True)
class CarryWaveResult:
    trained_digits: int
    horizon: int
    accuracy: ExtrapolationResult
    lock_in: tuple[LockInFit, ...]
    halting: HaltingFit
    wave: WaveProblem
    delayed: DelayedCarry
    convergence: ConvergenceCheck
    # where each head reads, planted chains in distribution and at the far length, and the
    # per-head knockouts at the far length; None for a model whose attention reads no index
    heads_trained: HeadReading | None
    heads_far: HeadReading | None
    knockout: Knockout | None
    path_independence: tuple[PathIndependenceAtLength, ...]

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import carry_wave_figures

        return carry_wave_figures(self)

    def findings(self) -> list[str]:
        from .findings import carry_wave_findings

        return carry_wave_findings(self)
