"""The heatmaps of `_head_groups`: attention by key group per loop and head, and one-head
knockouts (returned, never shown)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from abacus_interp.core.hooks import loop_label
from analyses._axes import label_every_row


def group_reading(reading) -> go.Figure:
    """A `GroupReading`: one row per (loop, head), one column per key group."""
    mass = np.asarray(reading.mass)  # [loop head group]
    rows = [f"{loop_label(t)} {h}" for t in range(mass.shape[0]) for h in reading.heads]
    z = mass.reshape(-1, mass.shape[-1])
    fig = go.Figure(go.Heatmap(z=z, x=list(reading.groups), y=rows, colorscale="Blues", zmin=0, zmax=1,
                               text=[[f"{v:.0%}" for v in row] for row in z], texttemplate="%{text}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Attention of the {reading.queries} by key group, per loop and head ({reading.label}, "
                            f"n={reading.n_problems})", height=140 + 30 * len(rows))
    return label_every_row(fig)


def knockout(result) -> go.Figure:
    """A `Knockout`: exact match with one head forbidden one key group, per (group, head)."""
    fig = go.Figure(go.Heatmap(z=result.exact_match, x=list(result.heads), y=list(result.groups), colorscale="RdBu",
                               zmin=0, zmax=1, text=[[f"{v:.0%}" for v in row] for row in result.exact_match],
                               texttemplate="%{text}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Exact match with one head forbidden one key group in every loop "
                            f"({result.label}, n={result.n_problems}, {result.n_loops} loops; "
                            f"none forbidden: {result.baseline:.0%})")
    return label_every_row(fig)
