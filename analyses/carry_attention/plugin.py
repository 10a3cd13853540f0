"""The carry analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from . import run as run_carry_attention
from .config import CarryAttentionConfig
from .result import CarryAttentionResult


class CarryAttentionAnalysis:
    key = "carry_attention"
    title = "Carry attention"
    Config = CarryAttentionConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        if not run.task.has_carries:
            return f"carry attention is defined for multi-digit addition; this run's task is {run.task.name}"
        if not run.model.is_looped:
            return (f"carry attention reads the looped family's attention, one hook set per loop; "
                    f"a {run.family} model has no such hooks")
        return None

    def run(self, run: RunContext, config: CarryAttentionConfig, needs: Mapping[str, Result]) -> CarryAttentionResult:
        return run_carry_attention(run.model, task=run.task, config=config, seed=run.seed, progress=False)


ANALYSIS = CarryAttentionAnalysis()
