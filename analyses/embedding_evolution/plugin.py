"""The embedding evolution as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import run
from .config import EmbeddingEvolutionConfig
from .result import EmbeddingEvolution


class EmbeddingEvolutionAnalysis:
    key = "embedding_evolution"
    title = "Embedding evolution"
    Config = EmbeddingEvolutionConfig
    requires: tuple[str, ...] = ()
    # its curves mark the steps where checkpoint_compare saw the representation change fastest;
    # without that result (a single-pass model, or the section not requested) they go unmarked
    uses: tuple[str, ...] = ("checkpoint_compare",)

    def skip_reason(self, ctx: RunContext) -> str | None:
        if ctx.n_checkpoints < 2:
            return "the run has a single checkpoint; evolution needs at least two"
        return None

    def run(self, ctx: RunContext, config: EmbeddingEvolutionConfig,
            needs: Mapping[str, Result]) -> EmbeddingEvolution:
        compared = needs.get("checkpoint_compare")
        change_steps = list(compared.change_steps) if compared is not None else []
        return run(ctx.run_dir, config=config, mark_steps=change_steps or None, progress=False)


ANALYSIS = EmbeddingEvolutionAnalysis()
