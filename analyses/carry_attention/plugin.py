"""The carry analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from dataclasses import dataclass

from analyses.contract import RunContext

from . import run as run_carry_attention
from .result import CarryAttentionResult


@dataclass(frozen=True)
class CarryAttentionConfig:
    n_problems: int = 64
    n_pairs: int = 16
    n_probe_problems: int = 128
    patch_heads: bool = False  # per-head patching multiplies the cost by the number of heads

    @classmethod
    def quick(cls) -> CarryAttentionConfig:
        return cls(n_problems=12, n_pairs=4, n_probe_problems=24)


class CarryAttentionAnalysis:
    key = "carry_attention"
    title = "Carry attention"
    Config = CarryAttentionConfig

    def skip_reason(self, run: RunContext) -> str | None:
        if not run.task.has_carries:
            return f"carry attention is defined for multi-digit addition; this run's task is {run.task.name}"
        return None

    def run(self, run: RunContext, config: CarryAttentionConfig) -> CarryAttentionResult:
        return run_carry_attention(run.model, task=run.task, n_problems=config.n_problems, n_pairs=config.n_pairs,
                                   n_probe_problems=config.n_probe_problems, patch_heads=config.patch_heads,
                                   seed=run.seed, progress=False)


ANALYSIS = CarryAttentionAnalysis()
