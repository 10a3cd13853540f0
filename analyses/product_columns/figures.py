"""Plotly figures of a product-columns result (returned, never shown)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from analyses._axes import label_every_row
from analyses._head_group_figures import group_reading, knockout
from analyses._running_sum_figures import running_sum_by_loop


def product_columns_figures(result) -> dict[str, go.Figure]:
    figures = {"grid": grid(result), "column_reading": group_reading(result.reading),
               "knockout": knockout(result.knockout)}
    if result.running_sum:
        figures["running_sum_by_loop"] = running_sum_by_loop(result.running_sum)
    return figures


def grid(result) -> go.Figure:
    top = max(max(c.digits_a, c.digits_b) for c in result.grid)
    z = np.full((top, top), np.nan)
    for c in result.grid:
        z[c.digits_a - 1, c.digits_b - 1] = c.exact_match
    labels = [str(d) for d in range(1, top + 1)]
    text = [["" if np.isnan(v) else f"{v:.0%}" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=labels, colorscale="Viridis", zmin=0, zmax=1, text=text,
                               texttemplate="%{text}", colorbar={"title": "exact match"}))
    n = result.grid[0].n
    fig.update_xaxes(title_text="digits of b (multiplier)")
    fig.update_yaxes(title_text="digits of a (multiplicand)", autorange="reversed")
    fig.update_layout(title=f"Uniform N x M products: exact match per cell (n={n} each, {result.n_loops} loops; "
                            f"trained up to {result.trained_digits} x {result.trained_digits})")
    return label_every_row(fig)
