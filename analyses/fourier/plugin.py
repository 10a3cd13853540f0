"""The Fourier / grokking analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import FourierResult
from .analysis import run as run_fourier
from .config import FourierConfig


class FourierAnalysis:
    key = "fourier"
    title = "Fourier structure and grokking"
    Config = FourierConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        if run.task.modulus is None:
            return f"Fourier / grokking analysis applies to modular tasks; this run's task is {run.task.name}"
        return None

    def run(self, run: RunContext, config: FourierConfig, needs: Mapping[str, Result]) -> FourierResult:
        # the report's model (already on the report's device); the run's checkpoints come from its checkpoint_path
        return run_fourier(run.model, run.task, config=config, seed=run.seed, progress=False)


ANALYSIS = FourierAnalysis()
