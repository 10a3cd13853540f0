"""The carry-wave analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import far_length_reason
from .analysis import run as run_carry_wave
from .config import CarryWaveConfig
from .result import CarryWaveResult


class CarryWaveAnalysis:
    key = "carry_wave"
    title = "Extrapolation by looping: the carry wave"
    Config = CarryWaveConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        cfg = run.model.cfg
        if not getattr(run.task, "has_carries", False):
            return f"task {run.task.name!r} has no carries to follow"
        if not (run.has_loop_dynamics and cfg.answer_slots):
            return ("the carry wave is read off an answer-slot model's loops (answer_format='slots'); "
                    "this model writes its answer token by token, so carries travel through its own answer")
        return far_length_reason(run.model, run.task, CarryWaveConfig.far_multiple)

    def run(self, run: RunContext, config: CarryWaveConfig, needs: Mapping[str, Result]) -> CarryWaveResult:
        horizon = min(config.horizon, run.model.cfg.max_loops)
        return run_carry_wave(run.model, run.task, config=config, horizon=horizon, seed=run.seed)


ANALYSIS = CarryWaveAnalysis()
