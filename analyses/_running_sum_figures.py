"""The running-sum reading's figure (analyses/_running_sum.py), drawn for the multiplication and
product-columns sections alike (returned, never shown)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from analyses._running_sum import readout_description


def running_sum_by_loop(readings) -> go.Figure:
    fig = go.Figure()
    colors = qualitative.Plotly
    for i, reading in enumerate(readings):
        loops = list(range(1, len(reading.read) + 1))
        fig.add_trace(go.Scatter(x=loops, y=list(reading.read), mode="lines+markers" if len(loops) < 8 else "lines",
                                 name=reading.label, line={"color": colors[i % len(colors)]},
                                 text=[f"R² {r:.3f}" for r in reading.r2],
                                 hovertemplate="loop %{x}: %{y:.0%} of columns read (%{text})"))
    r0 = readings[0]
    fig.update_xaxes(title_text="loop", dtick=1 if len(r0.read) < 8 else None)
    fig.update_yaxes(title_text="columns whose running sum is read within 0.5", range=[0, 1.02], tickformat=".0%")
    fig.update_layout(title=f"Each column's running sum (column sum + carry in) read linearly from the state by "
                            f"{readout_description(r0)} (n={r0.n_problems} problems per sample)")
    return fig
