"""Plotly figures of an `EmbeddingEvolution`: the aligned PCA of each series animated over the
checkpoints, and its explained variance, structure metrics and norms against the step.

The result types are read, not imported: result.py imports this module when `figures()` is
called, so `r` is an `EmbeddingEvolution` and `s` one of its `EmbeddingSeries`, unannotated."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def figures(r) -> dict[str, go.Figure]:
    figs = {}
    present = [s for s in (r.tokens, r.positions) if s is not None]
    for s in present:
        figs[f"{s.name}_pca"] = _animation(s, r.steps, r.align)
    if present:
        figs["explained_variance"] = _explained_variance(present, r.steps, r.mark_steps)
        figs["structure"] = _structure(present, r.steps, r.mark_steps)
        figs["norms"] = _norms(present, r.steps, r.mark_steps)
    return figs


def _animation(s, steps: list[int], align: str) -> go.Figure:
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
