"""The running-sum reading's figure (analyses/_running_sum.py), drawn for the multiplication and
product-columns sections alike (returned, never shown)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from abacus_interp.tasks.product_carries import partial_product_name
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


def partial_products_by_loop(readings) -> go.Figure:
    """Per loop, the R² of each partial product's fitted readout, one colour per sample and one
    dash per product (the readings that hold partial products only)."""
    fig = go.Figure()
    colors = qualitative.Plotly
    dashes = ("solid", "dash", "dot", "dashdot")
    rows = [r for r in readings if r.partial_products]
    n_loops = len(rows[0].partial_products[0].r2)
    loops = list(range(1, n_loops + 1))
    for i, r in enumerate(rows):
        for j, score in enumerate(r.partial_products):
            fig.add_trace(go.Scatter(x=loops, y=list(score.r2), mode="lines+markers" if n_loops < 8 else "lines",
                                     name=f"{r.label}: {partial_product_name(j)}",
                                     line={"color": colors[i % len(colors)], "dash": dashes[j % len(dashes)]},
                                     hovertemplate="loop %{x}: R² %{y:.3f}"))
    fig.update_xaxes(title_text="loop", dtick=1 if n_loops < 8 else None)
    fig.update_yaxes(title_text="R² of the fitted readout", range=[0, 1.02])
    fig.update_layout(**title_with_detail(
        "Each partial product read linearly from the state, in the columns that add all of them",
        f"{rows[0].n_problems} problems per sample, readouts fitted per loop on {rows[0].n_fit_problems} others"))
    return fig


def product_digits_by_loop(readings) -> go.Figure:
    """Per loop, how often each partial product's units (solid) and tens (dashed) are read as
    classes, one colour per sample and product (the readings that hold partial products only);
    loop 0 is the input alone."""
    fig = go.Figure()
    colors = qualitative.Plotly
    rows = [r for r in readings if r.product_digits]
    n_points = 1 + len(rows[0].product_digits[0].units)
    loops = list(range(n_points))
    for i, r in enumerate(rows):
        for j, digits in enumerate(r.product_digits):
            color = colors[(i * len(r.product_digits) + j) % len(colors)]
            for which, values, dash in (("units", (digits.units_from_input, *digits.units), "solid"),
                                        ("tens", (digits.tens_from_input, *digits.tens), "dash")):
                fig.add_trace(go.Scatter(x=loops, y=list(values), mode="lines+markers" if n_points < 9 else "lines",
                                         name=f"{r.label}: {partial_product_name(j)}, {which}",
                                         line={"color": color, "dash": dash},
                                         hovertemplate=f"loop %{{x}}: {which} read %{{y:.0%}}"))
    fig.add_hline(y=0.1, line={"color": "grey", "dash": "dot"}, annotation_text="chance (one in ten)")
    fig.update_xaxes(title_text="loop (0: the input alone)", dtick=1 if n_points < 9 else None)
    fig.update_yaxes(title_text="columns whose digit is read", range=[0, 1.02], tickformat=".0%")
    fig.update_layout(**title_with_detail(
        "Each partial product's units and tens read as ten classes, in the columns that add all of them",
        f"a least-squares classifier per loop, fitted on {rows[0].n_fit_problems} other problems; "
        f"{rows[0].n_problems} problems per sample; solid: units, dashed: tens"))
    return fig
