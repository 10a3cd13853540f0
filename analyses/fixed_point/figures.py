"""Plotly figures of a fixed-point result, built from its typed summary alone."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from abacus_interp.core.hooks import loop_label
from abacus_interp.tasks import task_from_config
from abacus_interp.tasks.base import lsd_text_to_human
from analyses._axes import integer_ticks, percent_ticks

from .result import FixedPointSummary, Quantiles

COLORS = qualitative.Plotly
SHOWN_CLASSES = ("operand", "operator", "answer", "readout")


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _none_to_nan(values):
    return [float("nan") if v is None else v for v in values]


def _band(fig, x, q: Quantiles, name, color, row=None, col=None, showlegend=True, skip: int = 0):
    """Median line with a shaded interquartile band, from loop `skip` + 1 on."""
    kw = {} if row is None else {"row": row, "col": col}
    x = list(x)[skip:]
    fig.add_trace(go.Scatter(x=x + x[::-1], y=_none_to_nan(q.q75[skip:]) + _none_to_nan(q.q25[skip:])[::-1],
                             fill="toself", fillcolor=_rgba(color, 0.15), line={"width": 0},
                             hoverinfo="skip", showlegend=False, legendgroup=name), **kw)
    fig.add_trace(go.Scatter(x=x, y=_none_to_nan(q.median[skip:]), mode="lines+markers", name=name,
                             line={"color": color}, legendgroup=name, showlegend=showlegend), **kw)


def _trained_line(fig, trained, **kw):
    fig.add_vline(x=trained, line_dash="dash", line_color="gray", annotation_text="trained depth", **kw)


def step_sizes(d: FixedPointSummary) -> go.Figure:
    x, trained = d.loops, d.trained_loops
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "relative step ||s_t - s_{t-1}|| / ||s_t||", "distance to last ||s_t - s_H|| / ||s_H||"))
    for i, name in enumerate(SHOWN_CLASSES):
        color = COLORS[i % len(COLORS)]
        _band(fig, x, d.steps.relative_step[name], name, color, 1, 1)
        _band(fig, x, d.steps.distance_to_last[name], name, color, 1, 2, showlegend=False)
    tol = d.settings.halt_tol
    fig.add_hline(y=tol, line_dash="dot", line_color="black", annotation_text=f"tol {tol}", row=1, col=1)
    for c in (1, 2):
        fig.add_vline(x=trained, line_dash="dash", line_color="gray", row=1, col=c)
    fig.update_yaxes(type="log")
    fig.update_xaxes(title_text="loop t")
    fig.update_layout(title="Convergence of the latent state by position class (median, IQR band)", width=1100)
    return fig


def logit_lens(d: FixedPointSummary) -> go.Figure:
    lens, x = d.logit_lens, d.loops
    fig = make_subplots(rows=1, cols=2, subplot_titles=("teacher-forced accuracy per loop",
                                                        "KL(p_t || p_{t-1}) of next-token distributions"))
    acc = lens.digit_accuracy.accuracy
    for k in lens.digit_accuracy.digit:
        fig.add_trace(go.Scatter(x=x, y=_none_to_nan([row[k] for row in acc]), mode="lines",
                                 name=f"digit {k}", line={"width": 1}), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=_none_to_nan(lens.eos_accuracy), mode="lines", name="EOS",
                             line={"width": 1, "dash": "dot"}), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=lens.exact_match, mode="lines+markers", name="exact match",
                             line={"color": "black", "width": 3}), row=1, col=1)
    _band(fig, x, lens.kl, "KL (median)", COLORS[0], 1, 2, skip=1)  # no KL at loop 1: nothing before it
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    for c in (1, 2):
        fig.add_vline(x=d.trained_loops, line_dash="dash", line_color="gray", row=1, col=c)
    fig.update_xaxes(title_text="loop t")
    fig.update_layout(title="Logit lens at every loop (final norm + unembedding)", width=1100)
    return fig


def lock_in(d: FixedPointSummary) -> go.Figure:
    lock = d.lock_in
    key = "chain" if lock.by_chain else "digit"
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    reached = [d.trained_loops]  # every loop value drawn on the left axis
    for i, (part, label) in enumerate((("horizon", "through the horizon"), ("trained_depth", "through the trained depth"))):
        table = getattr(lock, part).by_chain or getattr(lock, part).by_digit
        x = [getattr(r, key) for r in table]
        med = _none_to_nan([r.median for r in table])
        lo = [m - q for m, q in zip(med, _none_to_nan([r.q25 for r in table]), strict=True)]
        hi = [q - m for m, q in zip(med, _none_to_nan([r.q75 for r in table]), strict=True)]
        reached += [*med, *_none_to_nan([r.q75 for r in table])]
        color = COLORS[i]
        fig.add_trace(go.Scatter(x=x, y=med, mode="lines+markers", name=f"lock-in loop {label} (median, IQR)",
                                 error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                                 line={"color": color}))
        fig.add_trace(go.Bar(x=x, y=[r.locked_fraction for r in table], name=f"share of digits locked {label}",
                             marker_color=color, opacity=0.25), secondary_y=True)
    fig.add_hline(y=d.trained_loops, line_dash="dash", line_color="gray", annotation_text="trained depth")
    fig.update_yaxes(title_text="lock-in loop", secondary_y=False, **integer_ticks(reached))
    fig.update_yaxes(title_text="share locked", secondary_y=True, **percent_ticks(grid=False))
    title = "carry-chain length reaching the digit" if key == "chain" else "answer digit (LSD first)"
    fig.update_xaxes(title_text=title, dtick=1)
    fig.update_layout(title="Lock-in loop of each answer digit" + (" by carry chain" if key == "chain" else ""),
                      barmode="group", width=950, height=520,
                      # under the plot: to its right the legend would cover the second axis's title
                      legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"})
    return fig


def exact_match(d: FixedPointSummary) -> go.Figure:
    fig = go.Figure(go.Scatter(x=d.loops, y=d.logit_lens.exact_match, mode="lines+markers",
                               name="exact match"))
    _trained_line(fig, d.trained_loops)
    overall = d.behaviour.overall
    label = f" (past training: {overall})" if overall else ""
    fig.update_layout(title=f"Exact match vs loops{label}", xaxis_title="loops",
                      yaxis={"title": "exact match", "range": [-0.02, 1.02]})
    return fig


def halting(d: FixedPointSummary) -> go.Figure:
    h = d.halting
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=h.fixed_depth.loops, y=h.fixed_depth.exact_match,
                             mode="lines+markers", name="fixed depth"))
    rows = h.table
    fig.add_trace(go.Scatter(x=[r.mean_loops for r in rows], y=[r.exact_match for r in rows],
                             mode="markers+text", text=[f"{r.tol:g}" for r in rows], textposition="top center",
                             name=f"adaptive (relative step on {h.on} < tol)", marker={"size": 10}))
    _trained_line(fig, d.trained_loops)
    fig.update_layout(title="Adaptive halting vs fixed depth", xaxis_title="mean loops used",
                      yaxis={"title": "exact match", "range": [-0.02, 1.02]})
    return fig


def _is_digit_task(task: dict | None) -> bool:
    """Whether the run's task writes numbers digit by digit, LSD-first (every task but modular
    addition, whose tokens are whole residues)."""
    return task is not None and task_from_config(task).modulus is None


def orbit(d: FixedPointSummary) -> go.Figure:
    traj = d.trajectories
    fig = go.Figure()
    if not traj:
        return fig.update_layout(title="No trajectories kept (n_trajectories=0)")
    evr = traj.explained_variance_ratio
    digit_task = _is_digit_task(d.task)
    for i, item in enumerate(traj.examples):
        pts = item.coords
        x, y = [p[0] for p in pts], [p[1] if len(p) > 1 else 0.0 for p in pts]
        color = COLORS[i % len(COLORS)]
        problem = f"{item.prompt}{item.target}"
        name = (lsd_text_to_human(problem) if digit_task else problem) + (
            f" (chain {item.longest_chain})" if item.longest_chain is not None else "")
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name, line={"color": color},
                                 text=[loop_label(t) for t in range(len(x))], hovertemplate="%{text}"))
        fig.add_trace(go.Scatter(x=[x[0]], y=[y[0]], mode="markers", marker={"symbol": "circle-open", "size": 14,
                                 "color": color}, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[x[-1]], y=[y[-1]], mode="markers", marker={"symbol": "x", "size": 12,
                                 "color": color}, showlegend=False, hoverinfo="skip"))
    pc = [f"PC{j + 1} ({100 * v:.0f}%)" for j, v in enumerate(evr)] + ["PC2"]
    order = "problems in the usual order, most significant digit first" if digit_task else "problems as the model reads them"
    fig.update_layout(title="Latent trajectories across loops (o start, x horizon; readout state of the hardest digit)"
                            f"<br><sup>legend: {order}</sup>",
                      xaxis_title=pc[0], yaxis_title=pc[1], width=800, height=700)
    return fig


def contraction(d: FixedPointSummary) -> go.Figure:
    fig = go.Figure()
    for i, (at, est) in enumerate(d.contraction.at.items()):
        fig.add_trace(go.Box(y=est.spectral_radius, name=f"radius, loop {at}", marker_color=COLORS[i]))
        fig.add_trace(go.Box(y=est.sigma_max, name=f"sigma_max, loop {at}", marker_color=COLORS[i], opacity=0.5))
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", annotation_text="1 (neutral)")
    fig.update_layout(title="Jacobian of the loop map: spectral radius and largest singular value",
                      yaxis_title="value")
    return fig


def path_independence(d: FixedPointSummary) -> go.Figure:
    p = d.path_independence
    x = list(range(1, p.horizon + 1))
    fig = go.Figure()
    for i, (name, s) in enumerate(p.starts.items()):
        fig.add_trace(go.Scatter(x=x, y=s.cosine_median_by_loop, mode="lines+markers", line={"color": COLORS[i]},
                                 name=f"{name}: {100 * s.same_answer_fraction:.0f}% same answer"))
        fig.add_trace(go.Scatter(x=x, y=s.cosine_q25_by_loop, mode="lines", line={"color": COLORS[i], "dash": "dot"},
                                 name=f"{name} (25th percentile)", showlegend=False))
    fig.add_hline(y=p.threshold, line_dash="dot", line_color="black", annotation_text=f"cosine {p.threshold}")
    _trained_line(fig, d.trained_loops)
    fig.update_layout(title="Path independence: cosine to the state of the model's own start (median; dotted: 25th pct)",
                      xaxis_title="loop t", yaxis_title="cosine over real positions")
    return fig


def all_figures(d: FixedPointSummary) -> dict[str, go.Figure]:
    out = {
        "step_sizes": step_sizes(d),
        "logit_lens": logit_lens(d),
        "lock_in": lock_in(d),
        "exact_match": exact_match(d),
        "halting": halting(d),
        "orbit": orbit(d),
    }
    if d.contraction is not None:
        out["contraction"] = contraction(d)
    if d.path_independence is not None:
        out["path_independence"] = path_independence(d)
    return out
