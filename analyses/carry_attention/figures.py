"""Plotly figures of a carry-attention result, built from its typed numbers alone (never shown).

The result types are read, not imported: result.py imports this module when `figures()` is
called, so `r` is a `CarryAttentionResult` and each part (`attention`, `example`, `ablation`,
`patching`, `probes`) the field of that name, unannotated."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from abacus_interp.core.hooks import head_label, layer_label, loop_label
from abacus_interp.tasks.base import lsd_text_to_human
from analyses._axes import label_every_row

from .attention_stats import CATEGORIES


def figures(r) -> dict[str, go.Figure]:
    """Every figure of the sections that ran, keyed by name; one staircase and example pattern
    per layer when there are several."""
    out: dict[str, go.Figure] = {}
    n_layers = r.model.n_layers
    if r.attention is not None:
        for layer in range(n_layers):
            out[f"staircase_layer{layer}" if n_layers > 1 else "staircase"] = staircase_figure(r.attention, layer)
        out["alignment"] = alignment_figure(r.attention)
        out["attention_mass"] = mass_figure(r.attention)
    if r.example is not None:
        for layer in range(n_layers):
            out[f"example_pattern_layer{layer}" if n_layers > 1 else "example_pattern"] = pattern_figure(r.example, layer)
    if r.ablation is not None:
        out["ablation"] = ablation_figure(r.ablation)
        out["ablation_subtasks"] = ablation_subtask_figure(r.ablation)
    if r.patching is not None:
        out["patching"] = patching_figure(r.patching)
        out["carry_presence"] = carry_presence_figure(r.patching)
    if r.probes is not None:
        out["probes"] = probes_figure(r.probes)
    return out


def _head_labels(n_layers: int, n_heads: int) -> list[str]:
    return [f"L{layer}H{h}" for layer in range(n_layers) for h in range(n_heads)]


def _loop_by_head_grid(n_loops: int, n_heads: int) -> go.Figure:
    """Empty subplots: one row per loop, one column per head, sharing axes."""
    return make_subplots(rows=n_loops, cols=n_heads, shared_xaxes=True, shared_yaxes=True,
                         horizontal_spacing=0.01, vertical_spacing=0.02,
                         column_titles=[f"head {h}" for h in range(n_heads)],
                         row_titles=[loop_label(t) for t in range(n_loops)])


def staircase_figure(attention, layer: int = 0) -> go.Figure:
    """Mean attention from the position predicting answer digit i (rows) to every token slot
    (columns), one panel per loop (rows) and head (columns)."""
    s = np.asarray(attention.staircase, dtype=float)[:, layer]  # [loop head digit slot]
    n_loops, n_heads = s.shape[:2]
    cols = list(attention.staircase_cols[:-1])  # EOS is never a key of a digit query
    fig = _loop_by_head_grid(n_loops, n_heads)
    for t in range(n_loops):
        for h in range(n_heads):
            fig.add_trace(go.Heatmap(z=s[t, h, :, :-1], x=cols, y=list(attention.staircase_rows), zmin=0, zmax=1,
                                     colorscale="Blues", showscale=(t == 0 and h == 0),
                                     hovertemplate="predicting %{y}<br>key %{x}<br>mass %{z:.2f}<extra></extra>"),
                          row=t + 1, col=h + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Average attention staircase, layer {layer} (rows: answer digit predicted)",
                      height=max(300, 180 * n_loops), width=max(500, 330 * n_heads))
    return label_every_row(fig)


def pattern_figure(example, layer: int = 0) -> go.Figure:
    """Full attention pattern of one problem: one panel per loop (rows) and head (columns)."""
    p = np.asarray(example.pattern, dtype=float)[:, layer]  # [loop head q k]
    n_loops, n_heads = p.shape[:2]
    labels = [f"{i}:{tok}" for i, tok in enumerate(example.tokens)]
    fig = _loop_by_head_grid(n_loops, n_heads)
    for t in range(n_loops):
        for h in range(n_heads):
            fig.add_trace(go.Heatmap(z=p[t, h], x=labels, y=labels, zmin=0, zmax=1, colorscale="Blues",
                                     showscale=(t == 0 and h == 0),
                                     hovertemplate="query %{y}<br>key %{x}<br>%{z:.2f}<extra></extra>"),
                          row=t + 1, col=h + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Attention pattern of {lsd_text_to_human(example.problem)} (layer {layer})<br><sup>"
                            "axes: the tokens in the model's order, numbers least-significant digit first</sup>",
                      height=max(300, 200 * n_loops), width=max(500, 330 * n_heads))
    return label_every_row(fig)


def alignment_figure(attention) -> go.Figure:
    """Aligned-digit and carry-source scores per loop x head, by carry group (a group none of
    whose rows has an aligned digit is left out)."""
    groups = [g for g in attention.groups if attention.alignment[g] is not None]
    fig = make_subplots(rows=2, cols=len(groups), shared_yaxes=True, column_titles=groups,
                        row_titles=["aligned a(i) + b(i)", "carry source a(i-1) + b(i-1)"])
    for r, key in enumerate(("alignment", "carry_source")):
        for c, g in enumerate(groups):
            entry = getattr(attention, key)[g]
            if entry is None:
                continue
            score = np.asarray(entry.score, dtype=float)  # [loop layer head]
            z = score.reshape(score.shape[0], -1)
            fig.add_trace(go.Heatmap(z=z, x=_head_labels(score.shape[1], score.shape[2]),
                                     y=[loop_label(t) for t in range(z.shape[0])], zmin=0, zmax=1,
                                     colorscale="Viridis", showscale=(r == 0 and c == 0),
                                     hovertemplate=f"%{{y}} %{{x}}<br>score %{{z:.2f}} (chance {entry.chance:.2f})"
                                                   "<extra></extra>"),
                          row=r + 1, col=c + 1)
    fig.update_layout(title="Attention mass on the aligned digits and on the carry source",
                      height=550, width=max(600, 260 * len(groups)))
    return label_every_row(fig)


def mass_figure(attention) -> go.Figure:
    """Stacked mean attention mass per category, for every loop x layer x head (all digits)."""
    m = np.asarray(attention.mass["all"], dtype=float)  # [loop layer head cat]
    n_loops, n_layers, n_heads, _ = m.shape
    x = [[loop_label(t) for t in range(n_loops) for _ in range(n_layers * n_heads)],
         [f"L{layer}H{h}" for _ in range(n_loops) for layer in range(n_layers) for h in range(n_heads)]]
    fig = go.Figure([go.Bar(x=x, y=m[..., c].reshape(-1), name=name) for c, name in enumerate(CATEGORIES)])
    fig.update_layout(barmode="stack", title="Where each head looks from the predicting position",
                      yaxis={"title": "attention mass", "range": [0, 1]})
    return fig


def ablation_figure(ablation) -> go.Figure:
    """Change in exact match when one head is ablated in one loop, per kind."""
    kinds = ablation.kinds
    fig = make_subplots(rows=1, cols=len(kinds), shared_yaxes=True,
                        column_titles=[f"{k} ablation" for k in kinds])
    base = ablation.baseline.exact_match
    for c, kind in enumerate(kinds):
        em = np.asarray(ablation.arrays[kind].exact_match, dtype=float)
        z = (em - base).reshape(em.shape[0], -1)
        fig.add_trace(go.Heatmap(z=z, x=_head_labels(em.shape[1], em.shape[2]),
                                 y=[loop_label(t) for t in range(z.shape[0])], zmid=0, colorscale="RdBu",
                                 showscale=c == 0, colorbar={"title": "Δ exact match"},
                                 hovertemplate="%{y} %{x}<br>Δ exact match %{z:.3f}<extra></extra>"),
                      row=1, col=c + 1)
    fig.update_layout(title=f"Head ablation (baseline exact match {base:.3f})", height=420,
                      width=max(500, 420 * len(kinds)))
    return label_every_row(fig)


def ablation_subtask_figure(ablation) -> go.Figure:
    """Change in per-sub-task loss for every ablation (rows) and sub-task (columns)."""
    rows = ablation.table
    subtasks = list(ablation.baseline.loss_by_subtask)
    z = [[r.delta_loss_by_subtask[s] if r.delta_loss_by_subtask[s] is not None else np.nan
          for s in subtasks] for r in rows]
    y = [f"{r.kind} {head_label(r.layer, r.head, r.loop)}" for r in rows]
    fig = go.Figure(go.Heatmap(z=z, x=subtasks, y=y, zmid=0, colorscale="RdBu_r", colorbar={"title": "Δ loss"},
                               hovertemplate="%{y}<br>%{x}: Δ loss %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="Head ablation: change in loss by sub-task", height=max(400, 14 * len(rows) + 150))
    return label_every_row(fig)


def patching_figure(patching, group: str = "all") -> go.Figure:
    """Fraction of the logit difference restored per site (rows) and position (columns)."""
    g = patching.groups[group]
    pos = list(patching.positions)
    resid = np.asarray(g.resid, dtype=float)
    heads = np.asarray(g.heads, dtype=float)
    n_loops, n_layers = resid.shape[:2]
    rows = [np.asarray(g.input, dtype=float)] + [resid[t, layer] for t in range(n_loops) for layer in range(n_layers)]
    labels = ["input"] + [f"resid {layer_label(layer, t)}" for t in range(n_loops) for layer in range(n_layers)]
    # without per-head patching (patch_heads=False, the default) the head array is all NaN:
    # its rows would be empty, so they are left out and the title says how to get them
    patched_heads = heads.size > 0 and bool(np.isfinite(heads).any())
    if patched_heads:
        rows += [heads[t, layer, h] for t in range(n_loops) for layer in range(n_layers) for h in range(heads.shape[2])]
        labels += [f"z {head_label(layer, h, t)}" for t in range(n_loops) for layer in range(n_layers) for h in range(heads.shape[2])]
    fig = go.Figure(go.Heatmap(z=np.stack(rows), x=pos, y=labels, zmid=0, zmin=-1, zmax=1, colorscale="RdBu",
                               colorbar={"title": "restored"},
                               hovertemplate="%{y} @ %{x}<br>restored %{z:.2f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    title = f"Activation patching, fraction of logit difference restored ({group}, {g.n_pairs} pairs)"
    if not patched_heads:
        title += "<br><sup>residual stream only: heads were not patched one by one (patch_heads=True adds them)</sup>"
    fig.update_layout(title=title, height=max(400, 16 * len(rows) + 150), width=700)
    return label_every_row(fig)


def carry_presence_figure(patching) -> go.Figure:
    """Restored fraction when patching the predicting position's residual after each loop
    (empty when "pred" was not among the patched positions)."""
    p = patching.positions.index("pred") if "pred" in patching.positions else None
    fig = go.Figure()
    if p is None:
        return fig
    for name, g in patching.groups.items():
        resid = np.asarray(g.resid, dtype=float)  # [loop layer pos]
        x = [layer_label(layer, t) for t in range(resid.shape[0]) for layer in range(resid.shape[1])]
        fig.add_trace(go.Scatter(x=x, y=resid[:, :, p].reshape(-1), mode="lines+markers",
                                 name=f"{name} ({g.n_pairs})"))
    fig.add_hline(y=patching.threshold, line_dash="dash", line_color="gray")
    fig.update_layout(title="When is the carry at the predicting position? (patch resid there)",
                      yaxis_title="fraction restored", xaxis_title="loop / layer patched")
    return fig


def probes_figure(probes) -> go.Figure:
    """Held-out probe accuracy for carry-in per loop/layer, with the shuffled-label control."""
    acc = np.asarray(probes.accuracy, dtype=float)
    shuf = np.asarray(probes.shuffled_accuracy, dtype=float)
    casc = np.asarray(probes.cascade_accuracy, dtype=float)
    x = ["input"] + [layer_label(layer, t) for t in range(acc.shape[0]) for layer in range(acc.shape[1])]
    inp = probes.input
    fig = go.Figure()
    for name, series, first in (("probe", acc, inp.accuracy), ("shuffled labels", shuf, inp.shuffled_accuracy),
                                ("cascade digits", casc, inp.cascade_accuracy)):
        y = [np.nan if first is None else first] + list(series.reshape(-1))
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name))
    fig.add_hline(y=0.5, line_dash="dot", line_color="gray", annotation_text="chance")
    fig.update_layout(title="Linear decodability of carry-in (held-out, class-balanced)",
                      yaxis={"title": "accuracy", "range": [0.3, 1.02]}, xaxis_title="site")
    return fig
