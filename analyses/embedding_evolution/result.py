"""The embedding evolution as frozen dataclasses: `to_dict` is `jsonsafe.to_json` of it, and
`figures()` / `findings()` read its attributes through figures.py and findings.py (arrays stay
numpy until written)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from abacus_interp.jsonsafe import to_json


@dataclass(frozen=True)
class EmbeddingSeries:
    """One set of labelled points (number tokens or positions) across C checkpoints."""

    name: str
    labels: list[str]
    values: list[int]
    coords: np.ndarray  # [C, n_points, n_components], aligned
    explained_variance_ratio: np.ndarray  # [C, n_components], each checkpoint's own PCA
    spearman_pc1: np.ndarray  # [C]
    circularity: np.ndarray  # [C]
    circularity_per_pc: np.ndarray  # [C, n_components]
    circularity_frequency: np.ndarray  # [C] the frequency k carrying PC1's share
    helix_r2: dict[str, np.ndarray]  # "T=2", "T=5", "T=10", "joint", "joint_adjusted" -> [C]
    norms: dict[str, np.ndarray]  # "mean_norm", "mean_vector_norm", "frobenius" -> [C]

    def to_dict(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class EmbeddingEvolution:
    """The result: a series is None when it was skipped (`notes` says why)."""

    run_dir: str
    steps: list[int]  # lists, as callers compare them with lists of steps
    align: str
    tokens: EmbeddingSeries | None
    positions: EmbeddingSeries | None
    notes: tuple[str, ...]
    mark_steps: list[int]  # steps marked on the line figures

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self) -> dict:
        from .figures import figures  # the figures read this class: imported on use

        return figures(self)

    def findings(self) -> list[str]:
        from .findings import findings

        return findings(self)
