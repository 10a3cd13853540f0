"""The comparisons analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import run as run_comparisons
from .analysis import skip_reason
from .config import ComparisonsConfig
from .result import ComparisonsResult


class ComparisonsAnalysis:
    key = "comparisons"
    title = "Sorting: where numbers are compared, and the digit that decides"
    Config = ComparisonsConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return skip_reason(run.model, run.task)

    def run(self, run: RunContext, config: ComparisonsConfig, needs: Mapping[str, Result]) -> ComparisonsResult:
        return run_comparisons(run.model, run.task, config=config, seed=run.seed)


ANALYSIS = ComparisonsAnalysis()
