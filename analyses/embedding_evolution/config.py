"""The settings of the embedding evolution: `EmbeddingEvolutionConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError
from analyses._alignment import ALIGN_MODES


@dataclass(frozen=True)
class EmbeddingEvolutionConfig:
    """The settings `embedding_evolution.run` uses: the defaults are what the report runs, so
    `run(run_dir)` in a notebook computes the report's numbers; `quick()` the tests'.
    `run(run_dir, config=c, max_checkpoints=8)` overrides one field of `c`."""

    # checkpoints read, spread evenly over the run (None: all of them)
    max_checkpoints: int | None = 24
    # principal components kept per checkpoint (the animation shows the first two)
    n_components: int = 4
    # position embeddings analysed: Abacus indices 1..N, or absolute positions 0..N-1
    n_positions: int = 20
    # "chain" (Procrustes to the next frame, the last keeps its own axes), "final" (Procrustes
    # to the last frame), "project" (PCA of the last checkpoint, all projected), "none"
    align: str = "chain"
    # circularity is the mean over this many first PCs
    circularity_pcs: int = 2
    # periods T of the helix fit
    periods: tuple[float, ...] = (2, 5, 10)

    def __post_init__(self) -> None:
        if self.align not in ALIGN_MODES:
            raise UserError(f"align must be one of {ALIGN_MODES}, got {self.align!r}")
        if self.n_components < 2:
            raise UserError("n_components must be >= 2 (the animation shows two components)")

    @classmethod
    def report(cls) -> EmbeddingEvolutionConfig:
        """The report's settings (the defaults), named where a caller wants to say so."""
        return cls()

    @classmethod
    def quick(cls) -> EmbeddingEvolutionConfig:
        return cls(max_checkpoints=6)
