"""The ablation's presentation: what an ablation found (ablation.json -> sentences) and its
figure, exact match against operand length per factor.

The ablation itself (its specs, cells, training and evaluation) is the experiment driver
`abacus_lab.experiments.ablation`, which writes these findings into ablation.json; the report's
ablation section recomputes them from the cells (so an edit here shows without a re-run) and
draws `ablation_figure`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots


def extrapolation_limit(cell: dict[str, Any], threshold: float = 0.5) -> int | None:
    """The longest length up to which exact match stays >= threshold (None: not even 1)."""
    last = None
    for n, em in zip(cell["lengths"], cell["exact_match"], strict=True):
        if em is None or em < threshold:
            break
        last = n
    return last


def _at(cell: dict[str, Any], length: int) -> float | None:
    return dict(zip(cell["lengths"], cell["exact_match"], strict=True)).get(length)


def findings(data: dict[str, Any]) -> list[str]:
    """One sentence per factor: exact match at 1x, 2x and 3x the trained length of each value
    and the longest length it still gets half right; then the cells that never learned the
    trained range, since their extrapolation says nothing about the factor."""
    trained = data["spec"]["trained_max_digits"]
    if not trained:
        return []
    lengths = data["spec"]["lengths"]
    marks = lengths if len(lengths) <= 4 else [m for m in (trained, 2 * trained, 3 * trained) if m in lengths]
    chains = [tuple(c) for c in data["spec"].get("chains") or ()]  # none in ablations written before chains

    def percent(e):
        return "-" if e is None else f"{100 * e:.0f}%"

    def describe(cell):
        ems = "/".join(percent(_at(cell, m)) for m in marks)
        limit = extrapolation_limit(cell)
        text = f"{cell['label']} {ems} (>= 50% up to {limit if limit is not None else 0} digits"
        if chains:
            text += ", chains " + "/".join(percent(e) for e in cell["chain_exact_match"])
            if any(x is not None for x in cell.get("chain_loops_median") or ()):  # generated answers: their loops
                text += " in median " + "/".join("-" if x is None else f"{x:g}" for x in cell["chain_loops_median"])
                text += " loops"
        return text + ")"

    base = next(c for c in data["cells"] if c["factor"] == "baseline")
    out = []
    factors = list(dict.fromkeys(c["factor"] for c in data["cells"] if c["factor"] != "baseline"))
    header = "/".join(f"{m} digits" for m in marks)
    if chains:
        header += "; planted chains " + "/".join(f"{c} in {d} digits" for d, c in chains)
    for factor in factors:
        cells = [c for c in data["cells"] if c["factor"] == factor]
        out.append(f"{factor} (exact match at {header}): " + ", ".join(describe(c) for c in [base, *cells]) + ".")
    stalled = [c["label"] for c in data["cells"] if (_at(c, trained) or 0.0) < 0.5]
    if stalled:
        out.append(f"{len(stalled)} of {len(data['cells'])} cells did not learn the trained range (< 50% at "
                   f"{trained} digits: {', '.join(stalled)}); they stalled, so compare the others.")
    return out


def ablation_figure(data: dict[str, Any]) -> go.Figure:
    """Exact match vs operand length, one panel per factor, the baseline in every panel."""
    base = next(c for c in data["cells"] if c["factor"] == "baseline")
    factors = list(dict.fromkeys(c["factor"] for c in data["cells"] if c["factor"] != "baseline"))
    cols = min(2, max(1, len(factors)))
    rows = (len(factors) + cols - 1) // cols
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=factors, shared_yaxes=True)
    trained = data["spec"]["trained_max_digits"]
    for i, factor in enumerate(factors):
        r, c = i // cols + 1, i % cols + 1
        cells = [base, *[x for x in data["cells"] if x["factor"] == factor]]
        for j, cell in enumerate(cells):
            color = "black" if cell is base else qualitative.Plotly[j % len(qualitative.Plotly)]
            fig.add_trace(go.Scatter(x=cell["lengths"], y=cell["exact_match"], mode="lines+markers",
                                     name=cell["label"], line={"color": color, "dash": "dot" if cell is base else None},
                                     legendgroup=f"{factor}-{cell['label']}", showlegend=True), row=r, col=c)
        if trained:
            fig.add_vline(x=trained, line_dash="dash", line_color="gray", row=r, col=c)
    fig.update_xaxes(title_text="operand length (digits, both operands)")
    fig.update_yaxes(title_text="exact match", range=[-0.02, 1.02])
    fig.update_layout(title="Ablation: exact match vs operand length (dashed: longest trained length)",
                      height=320 * rows)
    return fig
