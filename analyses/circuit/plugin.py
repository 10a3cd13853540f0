"""The circuit analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import circuit_reason
from .analysis import run as run_circuit
from .config import CircuitConfig
from .result import CircuitResult


class CircuitAnalysis:
    key = "circuit"
    title = "Circuits across loops: attribution and edge attribution patching"
    Config = CircuitConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return circuit_reason(run.model, run.task)

    def run(self, run: RunContext, config: CircuitConfig, needs: Mapping[str, Result]) -> CircuitResult:
        return run_circuit(run.model, run.task, config=config, seed=run.seed)


ANALYSIS = CircuitAnalysis()
