"""The fixed-point analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import FixedPointResult, default_horizon
from .analysis import run as run_fixed_point
from .config import FixedPointConfig


class FixedPointAnalysis:
    key = "fixed_point"
    title = "Fixed-point convergence"
    Config = FixedPointConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        if not run.model.is_looped:
            return (f"a {run.family} model recurs over positions, not over a loop: there is no loop state "
                    "that could converge to a fixed point")
        if not run.has_loop_dynamics:
            return ("the model is not looped (n_loops=1, no input injection): there is no loop whose state "
                    "could converge to a fixed point")
        if default_horizon(run.model.cfg) < 2:
            cfg = run.model.cfg
            return (f"the model runs a single loop (n_loops={cfg.n_loops}, max_loops={cfg.max_loops}, here "
                    f"{cfg.n_layers} layer(s) applied once): with one loop there is no second state to compare, "
                    "so no fixed point to find and no loop for a digit to lock in by")
        return None

    def run(self, run: RunContext, config: FixedPointConfig, needs: Mapping[str, Result]) -> FixedPointResult:
        result = run_fixed_point(run.model, config=config, task=run.task, seed=run.seed, progress=False)
        # the report keeps the summary, not every problem's arrays
        return dataclasses.replace(result, per_example_in_dict=False)


ANALYSIS = FixedPointAnalysis()
