"""Plotly figures of a carry-wave result (returned, never shown)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from analyses._axes import integer_ticks, label_every_row, log_ticks, percent_ticks

COLORS = qualitative.Plotly


def carry_wave_figures(result) -> dict[str, go.Figure]:
    return {
        "accuracy_by_length": accuracy_by_length(result),
        "lock_in_by_chain": lock_in_by_chain(result),
        "loops_by_chain": loops_by_chain(result),
        "carry_wave": carry_wave(result),
        "delayed_carry": delayed_carry(result),
        "convergence": convergence(result),
        "path_independence": path_independence(result),
        **({"head_reading": head_reading(result), "knockout": knockout(result)}
           if result.heads_far is not None and result.knockout is not None else {}),
    }


def accuracy_by_length(result) -> go.Figure:
    acc = result.accuracy
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for sample in dict.fromkeys(r.sample if r.chain is None else "planted chain = length" for r in acc.rows):
        rows = [r for r in acc.rows if (r.sample if r.chain is None else "planted chain = length") == sample]
        color = COLORS[0] if sample == "uniform" else COLORS[1]
        fig.add_trace(go.Scatter(x=[r.digits for r in rows], y=[r.exact_match for r in rows], mode="lines+markers",
                                 name=f"exact match, {sample}", line={"color": color},
                                 text=[f"n={r.n}" for r in rows]), secondary_y=False)
        fig.add_trace(go.Scatter(x=[r.digits for r in rows], y=[r.loops_median for r in rows], mode="lines+markers",
                                 name=f"median loops used, {sample}", line={"color": color, "dash": "dot"}),
                      secondary_y=True)
    fig.add_vline(x=acc.trained_digits, line_dash="dash", line_color="gray")
    # an annotation's x on a log axis is log10 of the value (a shape's is the value itself):
    # at x=5 the label would sit at 100,000 digits and stretch the axis there
    fig.add_annotation(x=math.log10(acc.trained_digits), y=0, yref="paper", text="trained length", showarrow=False,
                       xanchor="left", yanchor="bottom")
    fig.update_xaxes(title_text="operand digits (both operands)", **log_ticks([r.digits for r in acc.rows], at_values=True))
    fig.update_yaxes(title_text="exact match (solid)", secondary_y=False, **percent_ticks())
    fig.update_yaxes(title_text="median loops used, adaptive (dotted)", secondary_y=True,
                     **integer_ticks([r.loops_median for r in acc.rows], grid=False))
    fig.update_layout(title="Exact match and loops used by operand length")
    return fig


def lock_in_by_chain(result) -> go.Figure:
    fig = go.Figure()
    for i, fit in enumerate(result.lock_in):
        color = COLORS[i % len(COLORS)]
        x = [c for c, _ in fit.median_by_chain]
        fig.add_trace(go.Scatter(x=x, y=[m for _, m in fit.median_by_chain], mode="markers+lines",
                                 name=f"{fit.label} (median)", line={"color": color}))
        if fit.fit.slope is not None:
            fig.add_trace(go.Scatter(x=[min(x), max(x)], y=[fit.fit.slope * v + fit.fit.intercept for v in (min(x), max(x))],
                                     mode="lines", line={"color": color, "dash": "dash"}, showlegend=False,
                                     name=f"fit: {fit.fit.slope:.2f} loops per link"))
    fig.update_layout(title="Lock-in loop of an answer digit against the carry chain arriving at it",
                      xaxis_title="carry distance (links of the chain arriving at the digit)",
                      yaxis_title="lock-in loop (median; dashed: least-squares fit over all digits)")
    return fig


def loops_by_chain(result) -> go.Figure:
    h = result.halting
    fig = go.Figure(go.Scatter(x=h.longest_chain, y=h.loops_used, mode="markers", name=h.label,
                               marker={"color": [COLORS[0] if c else COLORS[1] for c in h.converged], "opacity": 0.6}))
    if h.fit.slope is not None:
        xs = [min(h.longest_chain), max(h.longest_chain)]
        fig.add_trace(go.Scatter(x=xs, y=[h.fit.slope * v + h.fit.intercept for v in xs], mode="lines",
                                 line={"dash": "dash", "color": "gray"}, name=f"fit: {h.fit.slope:.2f} loops per link"))
    fig.update_layout(title=f"Loops used by adaptive halting ({h.label}; red: cap reached)",
                      xaxis_title="longest carry chain of the problem", yaxis_title="loops used")
    return fig


def carry_wave(result) -> go.Figure:
    w = result.wave
    n_digits = len(w.carry_distance)
    fig = go.Figure(go.Heatmap(
        z=[list(row) for row in w.p_correct], x=list(range(n_digits)), y=list(range(1, len(w.p_correct) + 1)),
        zmin=0, zmax=1, colorscale="Viridis", colorbar={"title": "P(right digit)"},
    ))
    fig.update_layout(
        title=f"The carry wave: logit lens per loop on {w.human} (chain of {w.chain})",
        xaxis_title="answer digit (0 = units; the chain runs upward)", yaxis_title="loop",
    )
    return label_every_row(fig)


def convergence(result) -> go.Figure:
    c = result.convergence
    labels = ["converged", "cap reached"]
    values = [c.exact_match_converged, c.exact_match_not_converged]
    fig = go.Figure(go.Bar(x=labels, y=[v if v is not None else 0 for v in values],
                           text=["-" if v is None else f"{v:.0%}" for v in values], textposition="outside"))
    fig.update_layout(title=f"Exact match by convergence at a cap of {c.cap} loops ({c.label}, n={c.n}, "
                            f"{c.converged:.0%} converged)",
                      yaxis={"range": [0, 1.1], "tickformat": ".0%", "title": "exact match"})
    return fig


def delayed_carry(result) -> go.Figure:
    """Lock-in loop of each chain digit when the carry is switched on after s loops: parallel
    lines s loops apart mean the wave starts when the carry does."""
    d = result.delayed
    fig = go.Figure()
    digits = list(range(1, d.chain + 1))
    for i, (s, row) in enumerate(zip(d.switch_loops, d.lock_in, strict=True)):
        name = "clean run (no switch)" if s == 0 else f"carry switched on after {s} loops"
        fig.add_trace(go.Scatter(x=digits, y=list(row), mode="lines+markers", name=name,
                                 line={"color": COLORS[i % len(COLORS)], "dash": "dot" if s == 0 else "solid"}))
    fig.update_xaxes(title_text="answer digit k (1 = tens; the chain is digits 1..chain)")
    fig.update_yaxes(title_text="lock-in loop (from the start)")
    # the two problems are long (20-digit operands): on a line of their own under the title
    fig.update_layout(title=f"Delayed carry: the units column patched after s loops<br><sup>{d.clean} against "
                            f"{d.corrupted}</sup>")
    return fig


def head_reading(result) -> go.Figure:
    """Per head, loop x key group: the share of an answer position's attention (far sample)."""
    r = result.heads_far
    fig = make_subplots(rows=1, cols=len(r.heads), subplot_titles=r.heads, shared_yaxes=True)
    for h, name in enumerate(r.heads):
        z = [list(loop[h]) for loop in r.mass]  # [loop group]
        # the shares printed in the cells: the carry channel is a few percent beside the aligned digits
        fig.add_trace(go.Heatmap(z=z, x=list(r.groups), y=list(range(1, len(r.mass) + 1)), zmin=0, zmax=1,
                                 text=[[f"{v:.0%}" for v in row] for row in z], texttemplate="%{text}",
                                 colorscale="Viridis", showscale=h == len(r.heads) - 1, name=name,
                                 colorbar={"title": "attention share", "tickformat": ".0%"}), row=1, col=h + 1)
    fig.update_yaxes(title_text="loop", row=1, col=1)
    fig.update_xaxes(tickangle=45)
    fig.update_layout(title=f"Where each head reads from an answer position, loop by loop<br><sup>{r.label}, "
                            f"{r.n_rows} answer digits; columns relative to the digit predicted</sup>", height=520)
    return label_every_row(fig)


def knockout(result) -> go.Figure:
    k = result.knockout
    fig = go.Figure()
    for i, (group, row) in enumerate(zip(k.groups, k.exact_match, strict=True)):
        fig.add_trace(go.Bar(x=list(k.heads), y=list(row), name=f"without {group}",
                             marker_color=COLORS[i % len(COLORS)], text=[f"{v:.0%}" for v in row]))
    fig.add_hline(y=k.baseline, line_dash="dash", line_color="gray", annotation_text=f"intact {k.baseline:.0%}")
    fig.update_layout(title=f"Exact match when one head may not read one column ({k.label}, n={k.n_problems}, "
                            f"{k.n_loops} loops)", barmode="group", xaxis_title="head knocked out",
                      yaxis={"title": "exact match", **percent_ticks()})
    return fig


def path_independence(result) -> go.Figure:
    rows = result.path_independence
    fig = go.Figure()
    names = [s.start for s in rows[0].starts] if rows else []
    for i, name in enumerate(names):
        y = [next(s.same_answer for s in r.starts if s.start == name) for r in rows]
        fig.add_trace(go.Scatter(x=[r.digits for r in rows], y=y, mode="lines+markers", name=f"same answer as the zero start, from {name}",
                                 line={"color": COLORS[i % len(COLORS)]}))
    fig.add_trace(go.Scatter(x=[r.digits for r in rows], y=[r.reference_exact_match for r in rows],
                             mode="lines+markers", name="exact match from the zero start",
                             line={"color": "gray", "dash": "dot"}))
    fig.add_vline(x=result.trained_digits, line_dash="dash", line_color="gray")
    # an annotation's x on a log axis is log10 of the value (see accuracy_by_length)
    fig.add_annotation(x=math.log10(result.trained_digits), y=0, yref="paper", text="trained length", showarrow=False,
                       xanchor="left", yanchor="bottom")
    fig.update_xaxes(title_text="operand digits (uniform problems)", **log_ticks([r.digits for r in rows], at_values=True))
    fig.update_yaxes(title_text="share of problems", **percent_ticks())
    horizon = rows[0].horizon if rows else result.horizon
    fig.update_layout(title=f"Path independence by length: the answer after {horizon} loops from other start states")
    return fig
