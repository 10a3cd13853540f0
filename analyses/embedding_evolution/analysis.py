"""`run`: read the number-token and position embeddings of every checkpoint (lazily, only the
rows needed), then per series a PCA per checkpoint aligned across checkpoints and its
structure metrics (see the package docstring)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from abacus_interp.checkpoints import CheckpointError, read_run_config
from abacus_interp.core.config import ModelConfig
from analyses._alignment import (
    align_frames,
    checkpoint_series,
    circularity,
    helix_fit,
    pca_frame,
    project_on_final,
    spearman_abs,
    value_tokens,
)
from analyses.contract import configure

from .config import EmbeddingEvolutionConfig
from .result import EmbeddingEvolution, EmbeddingSeries

logger = logging.getLogger(__name__)


def run(run_dir_or_checkpoints, *, config: EmbeddingEvolutionConfig | None = None,
        mark_steps: Iterable[int] | None = None, progress: bool = True, **overrides) -> EmbeddingEvolution:
    """Embedding PCA and structure metrics over the checkpoints of a run.

    run_dir_or_checkpoints: a run directory or a list of (step, path).
    config: every setting (`EmbeddingEvolutionConfig`, whose field comments say what each
        does); default `EmbeddingEvolutionConfig()`, the report's, so this computes its numbers.
    overrides: fields of the config by name, e.g. `align="project", max_checkpoints=None`.
    mark_steps: steps to mark on the line figures (e.g. checkpoint_compare's change points).
    Only W_E and the needed rows of W_pos are read from each file (lazy safetensors).
    """
    settings = configure(EmbeddingEvolutionConfig, config, overrides, "embedding_evolution.run()")
    n_components, n_positions, align = settings.n_components, settings.n_positions, settings.align
    run_dir, series = checkpoint_series(run_dir_or_checkpoints, settings.max_checkpoints)
    cfg = ModelConfig.from_dict(read_run_config(run_dir)["model"])
    notes: list[str] = []

    token_ids, token_values, token_labels = value_tokens(cfg.vocab)
    if len(token_ids) < 3:
        notes.append(f"tokens skipped: the vocabulary has {len(token_ids)} number tokens (need >= 3)")
        token_ids = []
    if cfg.positional == "abacus":
        rows = list(range(1, min(n_positions, cfg.n_abacus_positions - 1) + 1))
    elif cfg.positional == "learned":
        rows = list(range(min(n_positions, cfg.max_seq_len)))
        notes.append("positions are learned absolute positions 0..N-1 (no Abacus indices in this model)")
    else:
        rows = []
        notes.append("positions skipped: the model has no positional embedding (positional='none')")
    if 0 < len(rows) < 3:
        notes.append(f"positions skipped: only {len(rows)} positions (need >= 3)")
        rows = []

    token_mats, pos_mats = [], []
    for _, path in tqdm(series, desc="embeddings", disable=not progress, leave=False):
        W_E, W_pos = _read_embeddings(path, rows)
        if token_ids:
            token_mats.append(W_E[token_ids])
        if rows:
            pos_mats.append(W_pos)
    opts = dict(n_components=n_components, align=align, circularity_pcs=settings.circularity_pcs,
                periods=settings.periods)
    # Hundreds of tiny SVDs: one BLAS thread is fastest, and on a busy machine a multi-threaded
    # BLAS spinning on small matrices is 10-100x slower.
    with threadpool_limits(1, user_api="blas"):
        tokens = _analyse("tokens", token_mats, token_values, token_labels, **opts) if token_ids else None
        positions = _analyse("positions", pos_mats, rows, [str(r) for r in rows], **opts) if rows else None
    logger.info("embedding evolution of %s: %d checkpoints", run_dir, len(series))
    return EmbeddingEvolution(
        run_dir=str(run_dir), steps=[s for s, _ in series], align=align, tokens=tokens,
        positions=positions, notes=tuple(notes), mark_steps=list(mark_steps or []),
    )


def _read_embeddings(path: Path, rows: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """W_E and rows `rows` of W_pos, without reading the rest of the checkpoint."""
    try:
        with safe_open(str(path), framework="pt") as f:
            W_E = f.get_tensor("W_E").double().numpy()
            W_pos = f.get_slice("W_pos")[rows[0] : rows[-1] + 1].double().numpy() if rows else None
    except (OSError, RuntimeError, ValueError, KeyError, SafetensorError) as e:  # an empty or truncated file too
        raise CheckpointError(f"cannot read the embeddings of {path}: {e}") from e
    return W_E, W_pos


def _analyse(name, mats, values, labels, *, n_components, align, circularity_pcs, periods) -> EmbeddingSeries:
    own = [pca_frame(X, n_components) for X in mats]
    frames = [c for c, _ in own]
    coords = project_on_final(mats, n_components) if align == "project" else align_frames(frames, align)
    circ = np.array([[circularity(c[:, j])[0] for j in range(n_components)] for c in frames])
    helix = [helix_fit(X, values, periods) for X in mats]
    return EmbeddingSeries(
        name=name, labels=labels, values=list(values), coords=coords,
        explained_variance_ratio=np.stack([r for _, r in own]),
        spearman_pc1=np.array([spearman_abs(c[:, 0], values) for c in frames]),
        circularity=_nanmean(circ[:, :circularity_pcs]),
        circularity_per_pc=circ,
        circularity_frequency=np.array([circularity(c[:, 0])[1] or 0 for c in frames]),
        helix_r2={k: np.array([h[k] for h in helix], dtype=float) for k in helix[0]},
        norms={
            "mean_norm": np.array([np.linalg.norm(X, axis=1).mean() for X in mats]),
            "mean_vector_norm": np.array([np.linalg.norm(X.mean(0)) for X in mats]),
            "frobenius": np.array([np.linalg.norm(X) for X in mats]),
        },
    )


def _nanmean(a: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():  # an all-NaN row (degenerate checkpoint) stays NaN quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=1)
