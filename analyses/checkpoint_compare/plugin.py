"""checkpoint_compare as the report runs it: its config, when it applies, and the registry entry."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from abacus_interp.checkpoints import read_run_config
from analyses.contract import Result, RunContext

from .analysis import run
from .config import CheckpointCompareConfig
from .result import CheckpointComparison


class CheckpointCompareAnalysis:
    key = "checkpoint_compare"
    title = "Checkpoint comparison"
    Config = CheckpointCompareConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, ctx: RunContext) -> str | None:
        if not ctx.model.is_looped:
            return (f"checkpoint comparison reads the looped model's per-loop states; a {ctx.family} model "
                    "has none (its recurrence runs over positions)")
        if ctx.n_checkpoints < 2 and ctx.compare_dir is None:
            return "the run has a single checkpoint; comparison needs at least two"
        return None

    def run(self, ctx: RunContext, config: CheckpointCompareConfig, needs: Mapping[str, Result]) -> CheckpointComparison:
        run_b, skipped = ctx.compare_dir, None
        if run_b is not None:
            other = read_run_config(run_b)
            if (other.get("model") or {}).get("vocab") != read_run_config(ctx.run_dir)["model"].get("vocab"):
                skipped = (f"{run_b} uses a different vocabulary (task {(other.get('task') or {}).get('name')}), so "
                           "its states cannot be compared on the same inputs; only this run's checkpoints are compared")
                run_b = None
        result = run(ctx.run_dir, str(run_b) if run_b is not None else None, config=config, seed=ctx.seed,
                     progress=False)
        if skipped:
            result = dataclasses.replace(result, compare_skipped=skipped, notes=(*result.notes, skipped))
        return result


ANALYSIS = CheckpointCompareAnalysis()
