"""Plotly figures of a `CheckpointComparison`: loss and exact match over training, CKA
between checkpoints, parameter speeds, and what moved most.

The result types are read, not imported: result.py imports this module when `figures()` is
called, so `c` is a `CheckpointComparison` and `moved` its `Moved`, unannotated."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from abacus_interp.core.hooks import loop_label
from analyses._axes import label_every_row
from analyses.prose import metric_label

from .config import SIGNALS


def figures(c) -> dict[str, go.Figure]:
    runs = [("A", c.a)] + ([("B", c.b)] if c.b else [])
    marks = c.change_steps

    def mark(fig):
        for st in marks:
            fig.add_vline(x=st, line_dash="dot", line_color="red", opacity=0.6)
        return fig

    figs = {"training_curves": mark(_training_curves(runs)), "weight_norms": mark(_weight_norms(runs)),
            "change_speed": mark(_change_speed(runs, c.per)), "cka_vs_final": mark(_cka_vs_final(c.a)),
            "cka_steps": _heatmaps(c.a.cka, c.a.steps, c.a.steps, "CKA between checkpoints", "step", "step"),
            "moved_most": _moved_bar(c.moved)}
    if c.b is not None:
        figs["cka_runs"] = _heatmaps(c.cross_cka, c.a.steps, c.b.steps, "CKA between runs", "run A step", "run B step")
        matched = go.Figure([go.Scatter(x=c.a.steps, y=c.matched_cka[t], name=loop_label(t), mode="lines+markers")
                             for t in range(len(c.matched_cka))])
        matched.update_layout(title="CKA of run A vs run B at the nearest step", xaxis_title="step",
                              yaxis_title="CKA", yaxis_range=[0, 1.05])
        figs["cka_runs_matched"] = mark(matched)
    return figs


def _training_curves(runs) -> go.Figure:
    """The logged loss and exact-match curves of each run, with its problem-set scores."""
    curves = make_subplots(rows=1, cols=2, subplot_titles=["loss", "exact match / accuracy"])
    for tag, r in runs:
        keys = sorted({k for row in r.metrics for k in row} - {"step"})
        for k in keys:
            pts = [(row["step"], row[k]) for row in r.metrics if row.get(k) is not None]
            if pts:
                col = 1 if k.endswith("loss") else 2
                curves.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=f"{tag} {metric_label(k)}",
                                            mode="lines", opacity=0.8), row=1, col=col)
        curves.add_trace(go.Scatter(x=r.steps, y=r.problem_loss, name=f"{tag} problem-set loss", mode="markers"), row=1, col=1)
        curves.add_trace(go.Scatter(x=r.steps, y=r.problem_exact_match, name=f"{tag} problem-set exact match",
                                    mode="markers"), row=1, col=2)
    curves.update_yaxes(type="log", row=1, col=1)
    curves.update_xaxes(title_text="step")
    return curves


def _weight_norms(runs) -> go.Figure:
    norms = go.Figure()
    for tag, r in runs:
        for g, ys in r.group_norms.items():
            norms.add_trace(go.Scatter(x=r.steps, y=ys, name=f"{tag} {g}", mode="lines+markers",
                                       line_dash="solid" if tag == "A" else "dash"))
    norms.update_layout(title="weight norm per parameter group", xaxis_title="step", yaxis_title="Frobenius norm")
    return norms


def _change_speed(runs, per: str) -> go.Figure:
    """Each signal's speed per interval, one row each, its change points starred."""
    speed = make_subplots(rows=len(SIGNALS), cols=1, shared_xaxes=True,
                          subplot_titles=[f"{s} change per {per.replace('_', ' ')}" for s in SIGNALS])
    for i, name in enumerate(SIGNALS, 1):
        for tag, r in runs:
            if len(r.steps) < 2:
                continue
            speed.add_trace(go.Scatter(x=r.steps[1:], y=r.speeds[name], name=f"{tag} {name}", mode="lines+markers"), row=i, col=1)
            cps = r.change_points[name]
            speed.add_trace(go.Scatter(x=[p.step for p in cps], y=[p.speed for p in cps], mode="markers",
                                       marker=dict(symbol="star", size=14, color="red"), name=f"{tag} {name} change points"),
                            row=i, col=1)
        speed.update_yaxes(type="log", row=i, col=1)
    speed.update_xaxes(title_text="step (end of interval)", row=len(SIGNALS), col=1)
    return speed


def _cka_vs_final(a) -> go.Figure:
    """CKA of each loop's state against the final checkpoint and the previous one (run A)."""
    vs_final = go.Figure()
    for t in range(a.n_loops):
        vs_final.add_trace(go.Scatter(x=a.steps, y=a.cka[t, :, -1], name=f"{loop_label(t)} vs final", mode="lines+markers"))
        vs_final.add_trace(go.Scatter(x=a.steps[1:], y=np.diagonal(a.cka[t], 1), name=f"{loop_label(t)} vs previous",
                                      mode="lines", line_dash="dot"))
    vs_final.update_layout(title=f"linear CKA of the state after each loop (final = step {a.steps[-1]})",
                           xaxis_title="step", yaxis_title="CKA", yaxis_range=[0, 1.05])
    return vs_final


def _heatmaps(mats, y_steps, x_steps, title, y_title, x_title) -> go.Figure:
    """One heatmap per loop (steps as categories, since checkpoints are unevenly spaced),
    switched by a dropdown; the last loop is shown first."""
    labels_y, labels_x = [str(s) for s in y_steps], [str(s) for s in x_steps]
    last = len(mats) - 1
    fig = go.Figure([go.Heatmap(z=m, x=labels_x, y=labels_y, zmin=0, zmax=1, colorscale="Viridis", visible=t == last,
                                colorbar_title="CKA", hovertemplate="x %{x}<br>y %{y}<br>CKA %{z:.3f}<extra></extra>")
                     for t, m in enumerate(mats)])
    buttons = [dict(label=loop_label(t), method="update",
                    args=[{"visible": [i == t for i in range(len(mats))]}, {"title": f"{title}, {loop_label(t)}"}])
               for t in range(len(mats))]
    fig.update_layout(title=f"{title}, {loop_label(last)}", xaxis_title=x_title, yaxis_title=y_title,
                      xaxis_type="category", yaxis_type="category",
                      updatemenus=[dict(buttons=buttons, active=last, x=1.0, y=1.15, xanchor="right")])
    return label_every_row(fig)


def _moved_bar(moved) -> go.Figure:
    rank_by = moved.rank_by
    rows = moved.parameters[::-1]
    fig = go.Figure(go.Bar(x=[getattr(r, rank_by) for r in rows], y=[r.name for r in rows], orientation="h",
                           customdata=[[r.abs_change, r.norm_a, r.norm_b] for r in rows],
                           hovertemplate="%{y}: %{x:.3g}<br>abs %{customdata[0]:.3g}, norm %{customdata[1]:.3g}"
                                         " -> %{customdata[2]:.3g}<extra></extra>"))
    a, b = moved.steps
    fig.update_layout(title=f"parameters that moved most, step {a} -> {b} ({rank_by})", xaxis_title=rank_by,
                      height=max(300, 24 * len(rows) + 120))
    return fig
