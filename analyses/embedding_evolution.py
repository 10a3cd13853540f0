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

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from safetensors import SafetensorError, safe_open
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from abacus_interp.checkpoints import CheckpointError, read_run_config
from abacus_interp.core.config import ModelConfig
from abacus_interp.errors import UserError
from abacus_interp.jsonsafe import to_json
from analyses.contract import Result, RunContext, configure
from analyses.prose import limit, num, pct

from ._alignment import (
    ALIGN_MODES,
    align_frames,
    checkpoint_series,
    circularity,
    helix_fit,
    pca_frame,
    project_on_final,
    spearman_abs,
    value_tokens,
)

logger = logging.getLogger(__name__)


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

    def figures(self) -> dict[str, go.Figure]:
        figs = {}
        present = [s for s in (self.tokens, self.positions) if s is not None]
        for s in present:
            figs[f"{s.name}_pca"] = _animation(s, self.steps, self.align)
        if present:
            figs["explained_variance"] = _explained_variance(present, self.steps, self.mark_steps)
            figs["structure"] = _structure(present, self.steps, self.mark_steps)
            figs["norms"] = _norms(present, self.steps, self.mark_steps)
        return figs

    def findings(self) -> list[str]:
        return findings(self)


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


# ---------------------------------------------------------------------------------- figures
def _animation(s: EmbeddingSeries, steps: list[int], align: str) -> go.Figure:
    n = len(s.labels)
    small = n <= 30
    xy = s.coords[:, :, :2]
    lo, hi = xy.min((0, 1)), xy.max((0, 1))
    pad = 0.08 * np.maximum(hi - lo, 1e-9)
    colorscale = "Viridis" if n <= 20 else "Twilight"

    def scatter(i):
        return go.Scatter(
            x=xy[i, :, 0], y=xy[i, :, 1], text=s.labels if small else None,
            mode="lines+markers+text" if small else "markers", textposition="top center",
            line=dict(color="rgba(150,150,150,0.5)", width=1),
            marker=dict(color=s.values, colorscale=colorscale, size=10 if small else 7),
            hovertext=[f"{s.name[:-1]} {lab}" for lab in s.labels], hoverinfo="text+x+y", showlegend=False,
        )

    def title(i):
        ev = s.explained_variance_ratio[i, :2]
        return (f"{s.name} PCA, step {steps[i]} (align={align}; own PC1/PC2 explain "
                f"{np.nan_to_num(ev[0]):.0%}/{np.nan_to_num(ev[1]):.0%}; circularity {s.circularity[i]:.2f})")

    frames = [go.Frame(data=[scatter(i)], name=str(st), layout=go.Layout(title_text=title(i))) for i, st in enumerate(steps)]
    last = len(steps) - 1
    fig = go.Figure(data=[scatter(last)], frames=frames)
    animate = {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}}
    fig.update_layout(
        title=title(last), xaxis_title="aligned PC1", yaxis_title="aligned PC2",
        xaxis_range=[lo[0] - pad[0], hi[0] + pad[0]], yaxis_range=[lo[1] - pad[1], hi[1] + pad[1]],
        sliders=[dict(active=last, currentvalue={"prefix": "step "}, pad={"t": 40},
                      steps=[dict(label=str(st), method="animate", args=[[str(st)], animate]) for st in steps])],
        updatemenus=[dict(type="buttons", showactive=False, x=0, y=-0.12, xanchor="left", direction="left", buttons=[
            dict(label="Play", method="animate",
                 args=[None, {"frame": {"duration": 400, "redraw": True}, "fromcurrent": True}]),
            dict(label="Pause", method="animate", args=[[None], animate]),
        ])],
    )
    return fig


def _mark(fig: go.Figure, steps: list[int]) -> None:
    for st in steps:
        fig.add_vline(x=st, line_dash="dot", line_color="red", opacity=0.5)


def _explained_variance(present, steps, mark_steps) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(present), subplot_titles=[f"{s.name}: explained variance ratio" for s in present])
    for c, s in enumerate(present, 1):
        for j in range(s.explained_variance_ratio.shape[1]):
            fig.add_trace(go.Scatter(x=steps, y=s.explained_variance_ratio[:, j], mode="lines+markers",
                                     name=f"{s.name} PC{j + 1}"), row=1, col=c)
    fig.update_xaxes(title_text="step")
    _mark(fig, mark_steps)
    return fig


def _structure(present, steps, mark_steps) -> go.Figure:
    titles = [f"{s.name}: {m}" for s in present for m in ("|Spearman(PC1, value)|", "circularity", "helix fit R^2")]
    fig = make_subplots(rows=len(present), cols=3, subplot_titles=titles)
    for r, s in enumerate(present, 1):
        fig.add_trace(go.Scatter(x=steps, y=s.spearman_pc1, name=f"{s.name} |rho|"), row=r, col=1)
        fig.add_trace(go.Scatter(x=steps, y=s.circularity, name=f"{s.name} circularity"), row=r, col=2)
        for key, ys in s.helix_r2.items():
            fig.add_trace(go.Scatter(x=steps, y=ys, name=f"{s.name} helix {key}"), row=r, col=3)
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(title_text="step")
    _mark(fig, mark_steps)
    return fig


def _norms(present, steps, mark_steps) -> go.Figure:
    fig = go.Figure()
    for s in present:
        for key, ys in s.norms.items():
            fig.add_trace(go.Scatter(x=steps, y=ys, mode="lines+markers", name=f"{s.name} {key}"))
    fig.update_layout(title="embedding norms", xaxis_title="step", yaxis_title="L2 norm")
    _mark(fig, mark_steps)
    return fig


# --------------------------------------------------------------------------- findings


def _values(xs) -> list:
    """Plain Python numbers with NaN as None, as `num` reads them (ints stay ints)."""
    return [None if isinstance(x, float) and not math.isfinite(x) else x for x in np.asarray(xs).tolist()]


def _series_sentence(what: str, s: EmbeddingSeries, steps: list[int]) -> str | None:
    rho, circ = _values(s.spearman_pc1), _values(s.circularity)
    if not rho or not steps:
        return None
    sentence = (f"{what}: PC1 orders them by value with |Spearman rho| {num(rho[0], 2)} at step {steps[0]:,} "
                f"and {num(rho[-1], 2)} at step {steps[-1]:,}")
    if circ and circ[-1] is not None:
        freq = _values(s.circularity_frequency)[-1]
        sentence += f"; circularity {num(circ[0], 2)} -> {num(circ[-1], 2)} (1 = a ring ordered by value" + (
            f", dominant frequency {freq})" if freq is not None else ")")
    return sentence + "."


def findings(r: EmbeddingEvolution) -> list[str]:
    """Up to four sentences from the typed result, written once here; a series that was
    skipped is stated with the note that says why."""
    out: list[str | None] = []
    missing: list[str] = []  # after the measured findings, so they never crowd one out
    steps = list(r.steps)
    for s, what, key in ((r.tokens, "Number-token embeddings", "tokens"), (r.positions, "Position embeddings",
                                                                             "positions")):
        if s is not None:
            out.append(_series_sentence(what, s, steps))
        else:
            why = next((n for n in r.notes if n.startswith(f"{key} skipped")), None)
            missing.append(f"{what} were not analysed" + (f": {why.split(': ', 1)[-1]}." if why else "."))
    evr = [_values(row) for row in r.tokens.explained_variance_ratio] if r.tokens is not None else []
    if evr and evr[-1] and len(evr[-1]) >= 2:
        out.append(f"At the last checkpoint the first two principal components explain "
                   f"{pct((evr[-1][0] or 0) + (evr[-1][1] or 0))} of the number-token embeddings' variance.")
    for s, what in ((r.tokens, "number-token"), (r.positions, "position")):
        rho = _values(s.spearman_pc1) if s is not None else []
        if len(rho) >= 3 and len(steps) == len(rho):
            jumps = [(abs((rho[i + 1] or 0) - (rho[i] or 0)), i) for i in range(len(rho) - 1)]
            jump, i = max(jumps)
            if jump >= 0.2:
                out.append(f"The {what} ordering changed most between steps {steps[i]:,} and {steps[i + 1]:,} "
                           f"(|rho| {num(rho[i], 2)} -> {num(rho[i + 1], 2)}).")
                break
    return limit(out + missing)


# --------------------------------------------------------------------------- as the report runs it


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
