"""How the number-token and position embeddings organise over a run's checkpoints.

For every checkpoint: a PCA of the embeddings of the tokens that name a number (the digits
0..9; for modular addition the residues 0..p-1) and of the first position embeddings
(Abacus indices 1..N, i.e. the 1st..N-th digit of a number at evaluation offset 0; for a
learned positional scheme the absolute positions 0..N-1). The per-checkpoint PCA
coordinates are aligned across checkpoints by orthogonal Procrustes (see `_alignment`), so
the animation shows the geometry changing, not the arbitrary signs of PCA axes.

Structure metrics per checkpoint (all on the checkpoint's own PCA):
  spearman_pc1          |Spearman rho| of PC1 with the value (digit or position index)
  circularity           mean over the first `circularity_pcs` PCs of
                        max_{1<=k<n/2} 2|DFT_k(v)|^2 / (n ||v||^2)  (v centred; see
                        `_alignment.circularity`): 1 for a ring ordered by value
  helix_r2["T=..."]     R^2 of the embeddings on [1, a, cos(2 pi a/T), sin(2 pi a/T)]
  norms                 mean row norm, norm of the mean row, Frobenius norm

    >>> result = run("checkpoints/small-add")      # the report's settings (EmbeddingEvolutionConfig)
    >>> result.tokens.circularity[-1]
    >>> result.figures()["tokens_pca"]          # plotly animation with a step slider
"""

from analyses._alignment import ALIGN_MODES, checkpoint_series

from .analysis import run
from .config import EmbeddingEvolutionConfig
from .findings import findings
from .plugin import ANALYSIS, EmbeddingEvolutionAnalysis
from .result import EmbeddingEvolution, EmbeddingSeries

__all__ = ["ALIGN_MODES", "ANALYSIS", "EmbeddingEvolution", "EmbeddingEvolutionAnalysis", "EmbeddingEvolutionConfig",
           "EmbeddingSeries", "checkpoint_series", "findings", "run"]
