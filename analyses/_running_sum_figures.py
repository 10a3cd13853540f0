"""The running-sum reading's figure (analyses/_running_sum.py), drawn for the multiplication and
product-columns sections alike (returned, never shown)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from analyses._titles import title_with_detail


def running_sum_by_loop(readings) -> go.Figure:
    fig = go.Figure()
    colors = qualitative.Plotly
    n_loops = len(readings[0].fitted.read)
    mode = "lines+markers" if n_loops < 8 else "lines"
    loops = list(range(1, n_loops + 1))
    for i, r in enumerate(readings):
        color = colors[i % len(colors)]
        fig.add_trace(go.Scatter(x=loops, y=list(r.fitted.read), mode=mode, name=f"{r.label}: fitted readout",
                                 line={"color": color}, text=[f"R² {v:.3f}" for v in r.fitted.r2],
                                 hovertemplate="loop %{x}: %{y:.0%} of columns read (%{text})"))
        if r.trained is not None:
            fig.add_trace(go.Scatter(x=loops, y=list(r.trained.read), mode=mode, name=f"{r.label}: trained readout",
                                     line={"color": color, "dash": "dot"}, text=[f"R² {v:.3f}" for v in r.trained.r2],
                                     hovertemplate="loop %{x}: %{y:.0%} of columns read (%{text})"))
        fig.add_trace(go.Scatter(x=[loops[0], loops[-1]], y=[r.baseline.read[0]] * 2, mode="lines",
                                 name=f"{r.label}: fitted on the input alone", line={"color": color, "dash": "dash"},
                                 hovertemplate=f"the input alone: %{{y:.0%}} (R² {r.baseline.r2[0]:.3f})"))
    r0 = readings[0]
    fig.update_xaxes(title_text="loop", dtick=1 if n_loops < 8 else None)
    fig.update_yaxes(title_text="columns whose running sum is read within 0.5", range=[0, 1.02], tickformat=".0%")
    fig.update_layout(**title_with_detail(
        "Each column's running sum read linearly from the state",
        f"running sum = column sum + carry in; {r0.n_problems} problems per sample, readouts fitted per loop on "
        f"{r0.n_fit_problems} others; dashed: the same fit on the input alone"))
    return fig
