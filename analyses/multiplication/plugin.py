"""The multiplication analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import run as run_multiplication
from .analysis import skip_reason
from .config import MultiplicationConfig
from .result import MultiplicationResult


class MultiplicationAnalysis:
    key = "multiplication"
    title = "Multiplication by looping: multiplier heads and the carry wave of products"
    Config = MultiplicationConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return skip_reason(run.model, run.task)

    def run(self, run: RunContext, config: MultiplicationConfig, needs: Mapping[str, Result]) -> MultiplicationResult:
        horizon = min(config.horizon, run.model.cfg.max_loops)
        switch_loops = tuple(s for s in config.switch_loops if s < horizon) or (0,)
        return run_multiplication(run.model, run.task, config=config, horizon=horizon, switch_loops=switch_loops,
                                  seed=run.seed)


ANALYSIS = MultiplicationAnalysis()
