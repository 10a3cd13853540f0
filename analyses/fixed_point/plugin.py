"""The fixed-point analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from dataclasses import dataclass

from analyses.contract import RunContext

from .analysis import FixedPointResult
from .analysis import run as run_fixed_point


@dataclass(frozen=True)
class FixedPointConfig:
    n_problems: int = 96
    n_jacobian: int = 4
    jacobian_iters: int = 40
    n_trajectories: int = 4

    @classmethod
    def quick(cls) -> FixedPointConfig:
        return cls(n_problems=16, n_jacobian=1, jacobian_iters=5, n_trajectories=2)


class FixedPointAnalysis:
    key = "fixed_point"
    title = "Fixed-point convergence"
    Config = FixedPointConfig

    def skip_reason(self, run: RunContext) -> str | None:
        if not run.is_looped:
            return ("the model is not looped (n_loops=1, no input injection): there is no loop whose state "
                    "could converge to a fixed point")
        return None

    def run(self, run: RunContext, config: FixedPointConfig) -> FixedPointResult:
        result = run_fixed_point(
            run.model, task=run.task, n_problems=config.n_problems, n_jacobian=config.n_jacobian,
            jacobian_iters=config.jacobian_iters, n_trajectories=config.n_trajectories, seed=run.seed,
            progress=False)
        result.per_example_in_dict = False  # the report keeps the summary, not every problem's arrays
        return result


ANALYSIS = FixedPointAnalysis()
