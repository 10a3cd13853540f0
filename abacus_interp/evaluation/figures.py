"""Plotly figures of an `EvalReport`, built from its numbers alone (never shown)."""

from __future__ import annotations

import plotly.graph_objects as go

from abacus_interp.evaluation.result import Carry, EdgeCases, Grid, Lengths, Loops, SetScores


def grid_figure(grid: Grid) -> go.Figure:
    """Exact-match heatmap over (digits of a, digits of b), trained region outlined. Cells and
    colour bar are both in percent, so the printed numbers read straight off the bar."""
    z = [[None if v is None else 100 * v for v in row] for row in grid.exact_match]
    text = [["" if v is None else f"{v:.0f}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(grid.digits_b),
            y=list(grid.digits_a),
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            text=text,
            texttemplate="%{text}",
            colorbar={"title": "exact match (%)", "ticksuffix": "%"},
            hovertemplate="a: %{y} digits<br>b: %{x} digits<br>exact match %{z:.1f}%<extra></extra>",
        )
    )
    lo, hi = grid.trained_digits
    a_lo, a_hi = min(grid.digits_a), max(grid.digits_a)
    b_lo, b_hi = min(grid.digits_b), max(grid.digits_b)
    x0, x1 = max(lo, b_lo), min(hi, b_hi)
    y0, y1 = max(lo, a_lo), min(hi, a_hi)
    if x0 <= x1 and y0 <= y1:
        fig.add_shape(
            type="rect",
            x0=x0 - 0.5,
            x1=x1 + 0.5,
            y0=y0 - 0.5,
            y1=y1 + 0.5,
            line={"color": "red", "width": 3},
            fillcolor="rgba(0,0,0,0)",
        )
    ind, ood = grid.in_distribution_exact_match, grid.out_of_distribution_exact_match
    summary = ", ".join(
        f"{name} {100 * v:.1f}%" for name, v in (("in-dist", ind), ("OOD", ood)) if v is not None
    )
    # the sample and the loops, where the numbers carry them (a hand-made grid may not)
    how = "; ".join(part for part in (
        f"n={grid.n_per_cell} per cell" if grid.n_per_cell is not None else None,
        grid.decoding or (f"{grid.n_loops} loops" if grid.n_loops is not None else None)) if part)
    fig.update_layout(
        # the sample on a line of its own: the figure is 700 px wide and a title is never wrapped
        title=f"Exact match (%) by operand length<br><sup>trained region outlined; {summary}"
              + (f"<br>{how}" if how else "") + "</sup>",
        xaxis={"title": "digits of b", "dtick": 1},
        yaxis={"title": "digits of a", "dtick": 1},
        width=700,
        height=650,
    )
    return fig


def loops_figure(loops: Loops) -> go.Figure:
    fig = go.Figure()
    for name, s in loops.sets.items():
        fig.add_trace(
            go.Scatter(x=list(loops.loops), y=list(s.exact_match), mode="lines+markers", name=name)
        )
    fig.add_vline(
        x=loops.trained_loops,
        line_dash="dash",
        line_color="gray",
        annotation_text="trained depth",
    )
    adaptive = loops.adaptive
    for k, (name, a) in enumerate(adaptive.sets.items() if adaptive is not None else ()):
        # the run's own decoding: one exact match per set, whatever loop count each problem took
        fig.add_hline(y=a.exact_match, line_dash="dot", line_color=["#1f77b4", "#ff7f0e"][k % 2],
                      annotation_text=f"{name}, adaptive (median {a.median_loops} loops)",
                      annotation_position="bottom right" if k % 2 else "top right")
    sizes = ", ".join(f"{name} n={s.n}" for name, s in loops.sets.items() if s.n is not None)
    fig.update_layout(
        title="Exact match vs number of loops<br><sup>teacher-forced at each fixed loop count"
              + (f"; {sizes}" if sizes else "")
              + (f"; dotted: {adaptive.label}" if adaptive else "") + "</sup>",
        xaxis_title="loops (R)",
        yaxis={"title": "exact match", "range": [-0.02, 1.02]},
    )
    return fig


def lengths_figure(lengths: Lengths) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=list(lengths.lengths),
            y=list(lengths.exact_match),
            mode="lines+markers",
            name="equal-length operands",
        )
    )
    fg = lengths.from_grid
    if fg is not None and fg.max_operand_digits:
        fig.add_trace(
            go.Scatter(
                x=list(fg.max_operand_digits),
                y=list(fg.exact_match),
                mode="lines+markers",
                name="grid, by longer operand",
                line={"dash": "dot"},
            )
        )
    fig.add_vline(
        x=lengths.trained_max + 0.5,
        line_dash="dash",
        line_color="gray",
        annotation_text="trained",
    )
    how = lengths.decoding
    fig.update_layout(
        title=f"Exact match by operand length<br><sup>n={lengths.n_per_length} per length"
              + (f", {how}" if how else "") + "</sup>",
        xaxis={"title": "digits", "dtick": 1},
        yaxis={"title": "exact match", "range": [-0.02, 1.02]},
    )
    return fig


def edge_cases_figure(edge: EdgeCases) -> go.Figure:
    cases = edge.cases
    colors = [["#d4f7d4" if c.passed else "#f7d4d4" for c in cases]] * 5
    fig = go.Figure(
        go.Table(
            header={"values": ["group", "problem", "expected", "model", "result"]},
            cells={
                "values": [
                    [c.group for c in cases],
                    [c.name + ("" if c.in_distribution else " (OOD)") for c in cases],
                    [" / ".join(c.expected) for c in cases],
                    [" / ".join(c.answers) for c in cases],
                    ["pass" if c.passed else "FAIL" for c in cases],
                ],
                "fill_color": colors,
            },
        )
    )
    rates = [f"{label} {100 * r:.0f}% pass" for label, r in (
        ("in distribution", edge.in_distribution_pass_rate),
        ("out of distribution", edge.out_of_distribution_pass_rate)) if r is not None]
    how = edge.decoding
    # tall enough for every row: a table figure scrolls inside its height, hiding the rest
    fig.update_layout(
        title="Edge cases" + (f" ({'; '.join(rates)})" if rates else "") + (f"<br><sup>{how}</sup>" if how else ""),
        height=160 + 24 * (len(cases) + 1),
    )
    fig.update_traces(cells_height=24, header_height=24)
    return fig


def carry_figure(carry: Carry) -> go.Figure:
    b = carry.buckets
    fig = go.Figure(
        go.Bar(
            x=[r.bucket for r in b],
            y=[r.exact_match for r in b],
            text=[f"n={r.n}" for r in b],
            textposition="outside",
        )
    )
    how = carry.decoding
    fig.update_layout(
        title="Exact match by longest carry cascade (balanced set)"
              + (f"<br><sup>n={carry.n_per_bucket} per bucket, {how}</sup>" if how else ""),
        xaxis_title="longest carry cascade",
        yaxis={"title": "exact match", "range": [0, 1.1]},
    )
    return fig


def perplexity_figure(ppl: dict[str, SetScores], n_loops: int | None = None) -> go.Figure:
    names = list(ppl)
    fig = go.Figure(go.Bar(x=[f"{n} (n={ppl[n].n})" for n in names], y=[ppl[n].perplexity for n in names]))
    how = "teacher-forced" + (f" at {n_loops} loops" if n_loops is not None else "")
    fig.update_layout(title=f"Per-token perplexity of the correct answer<br><sup>{how}</sup>", yaxis_title="perplexity")
    return fig


def splits_figure(splits: dict[str, SetScores], n_loops: int | None = None) -> go.Figure:
    names = list(splits)
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[splits[n].exact_match for n in names],
            text=[f"loss {splits[n].loss:.3g}" for n in names],
            textposition="outside",
        )
    )
    sizes = ", ".join(f"{n} n={splits[n].n}" for n in names)
    how = "teacher-forced" + (f" at {n_loops} loops" if n_loops is not None else "")
    fig.update_layout(title=f"Accuracy by split<br><sup>{sizes}, every problem; {how}</sup>",
                      yaxis={"title": "accuracy", "range": [0, 1.1]})
    return fig


def report_figures(report) -> dict[str, go.Figure]:
    builders = {
        "grid": grid_figure,
        "loops": loops_figure,
        "lengths": lengths_figure,
        "edge_cases": edge_cases_figure,
        "carry": carry_figure,
        "perplexity": perplexity_figure,
        "splits": splits_figure,
    }
    figures = {
        name: build(getattr(report, name))
        for name, build in builders.items()
        if getattr(report, name)
    }
    # their loop count is the report's, not the section's
    if report.perplexity:
        figures["perplexity"] = perplexity_figure(report.perplexity, report.settings.n_loops)
    if report.splits:
        figures["splits"] = splits_figure(report.splits, report.settings.n_loops)
    return figures
