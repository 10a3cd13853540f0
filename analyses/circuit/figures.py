"""Plotly figures of a circuit result (returned, never shown): the circuit as a graph with
the loops as columns, attribution against patching node by node, the recovery of top-k
circuits, and edge scores against real single-edge cuts."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from abacus_interp.core.hooks import loop_label
from analyses._axes import percent_ticks
from analyses._titles import title_with_detail

COLORS = qualitative.Plotly
SITE_NAMES = {"resid_pre": "residual (resid_pre)", "z": "head output (hook_z)", "mlp_out": "MLP output",
              "lstm_out": "LSTM output"}
SUPPORTS, OPPOSES = "#d62728", "#1f77b4"  # cutting the edge lowers / raises the metric
KIND_COLORS = {"input": "#2ca02c", "state": "#9467bd", "head": "#ff7f0e", "mlp": "#8c564b", "logits": "#17becf"}


def circuit_figures(result) -> dict:
    out = {"circuit_graph": circuit_graph(result), "attribution_vs_patching": attribution_vs_patching(result),
           "recovery": recovery(result)}
    if any(e.effect is not None for e in result.edges):
        out["edge_scores"] = edge_scores(result)
    return out


def _kind(name: str) -> str:
    if name in ("input", "logits"):
        return name
    return "state" if name.startswith("state") else ("mlp" if name.startswith("MLP") else "head")


def node_position(result, name: str, loop: int | None = None) -> tuple[float, float]:
    """(x, y) of a node: loop t's column spans [t, t + 1); the state node enters it at the top
    (so the state's path from loop to loop runs above the rest), then each layer's heads
    (one above the other) and its MLP; the input's copies run along the bottom. `loop`
    places an input copy."""
    k, h = result.n_layers, result.n_heads
    step = 0.75 / (2 * k + 1)
    middle = (h - 1) / 2
    if name == "logits":
        return result.n_loops, middle
    if name == "input":
        return loop or 0, -1.3
    label, at = name.split("@")
    t = int(at)
    if label == "state":
        return t, h + 0.2
    if label.startswith("MLP"):
        layer = int(label[3:])
        return t + (2 * layer + 2) * step, middle
    layer, head = (int(x) for x in label[1:].split("H"))
    return t + (2 * layer + 1) * step, h - 1 - head


def _end(result, edge) -> tuple[tuple[float, float], tuple[float, float]]:
    """Where an edge starts and ends; an edge from the input leaves the copy in the loop
    where it is read (the previous loop for a state node, the last for the logits)."""
    target = node_position(result, edge.target)
    if edge.source == "input":
        loop = result.n_loops - 1 if edge.target == "logits" else edge.target_loop - (edge.target.startswith("state"))
        source = node_position(result, "input", loop)
    else:
        source = node_position(result, edge.source)
    offset = {"q": 0.18, "k": 0.0, "v": -0.18}.get(edge.channel, 0.0)
    return source, (target[0], target[1] + offset)


def circuit_graph(result) -> go.Figure:
    fig = go.Figure()
    faint_x, faint_y = [], []
    for e in result.edges:
        if not e.in_circuit:
            (x0, y0), (x1, y1) = _end(result, e)
            faint_x += [x0, x1, None]
            faint_y += [y0, y1, None]
    fig.add_trace(go.Scatter(x=faint_x, y=faint_y, mode="lines", line={"color": "lightgray", "width": 0.6},
                             opacity=0.5, hoverinfo="skip", name=f"edges outside the circuit ({result.total_edges - result.circuit_edges})"))
    circuit = result.circuit()
    top = max((abs(e.score) for e in circuit), default=1.0) or 1.0
    mids_x, mids_y, mids_text = [], [], []
    for e in circuit:
        (x0, y0), (x1, y1) = _end(result, e)
        color = SUPPORTS if e.score < 0 else OPPOSES
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                           arrowhead=2, arrowsize=1, arrowwidth=1 + 3 * abs(e.score) / top, arrowcolor=color,
                           opacity=0.85, text="")
        mids_x.append((x0 + x1) / 2)
        mids_y.append((y0 + y1) / 2)
        effect = "" if e.effect is None else f", cut alone: {e.effect:+.2f}"
        mids_text.append(f"{e.source} -> {e.target}{'.' + e.channel if e.channel else ''}<br>score {e.score:+.2f}{effect}")
    fig.add_trace(go.Scatter(x=mids_x, y=mids_y, mode="markers", marker={"size": 6, "color": "rgba(0,0,0,0)"},
                             hovertext=mids_text, hoverinfo="text", name=f"circuit edges ({result.circuit_edges}; red: "
                             "cutting lowers the metric, blue: raises it)"))
    used = {e.source for e in circuit} | {e.target for e in circuit}
    names = sorted({e.source for e in result.edges} | {e.target for e in result.edges} - {"input"})
    points = [(n, *node_position(result, n)) for n in names]
    points += [("input", *node_position(result, "input", t)) for t in range(result.n_loops)]
    fig.add_trace(go.Scatter(
        x=[x for _, x, _ in points], y=[y for _, _, y in points], mode="markers+text",
        text=[n.split("@")[0] for n, _, _ in points], textposition="top center", textfont={"size": 9},
        marker={"size": 11, "color": [KIND_COLORS[_kind(n)] if n in used else "lightgray" for n, _, _ in points],
                "line": {"width": 1, "color": "black"}},
        hovertext=[n for n, _, _ in points], hoverinfo="text", name="nodes (gray: outside the circuit)"))
    fig.update_xaxes(title_text="loop (each column one pass of the shared block; the state node enters it)",
                     tickmode="array", tickvals=[t + 0.35 for t in range(result.n_loops)] + [result.n_loops],
                     ticktext=[loop_label(t) for t in range(result.n_loops)] + ["logits"], showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_layout(
        **title_with_detail(
            f"The circuit across loops: {result.circuit_edges} of {result.total_edges} edges, "
            f"{_pct(result.circuit_recovered)} of the behaviour kept on held-out pairs ({result.ablation} ablation)",
            f"{result.sample}; the state between loops runs along the top, the input (bottom row) is re-injected "
            "at every loop; edges into a head end at its query (top), key (middle) or value (bottom) input"),
        height=560, legend={"orientation": "h", "y": -0.15})
    return fig


def attribution_vs_patching(result) -> go.Figure:
    n = result.nodes
    fig = go.Figure()
    for i, site in enumerate(dict.fromkeys(n.sites)):
        rows = [j for j, s in enumerate(n.sites) if s == site]
        fig.add_trace(go.Scatter(x=[n.patching[j] for j in rows], y=[n.attribution[j] for j in rows], mode="markers",
                                 name=f"{SITE_NAMES.get(site, site)}, {n.steps} steps",
                                 marker={"color": COLORS[i % len(COLORS)], "size": 6, "opacity": 0.7},
                                 text=[n.labels[j] for j in rows], hoverinfo="text+x+y"))
        if n.steps > 1:
            fig.add_trace(go.Scatter(x=[n.patching[j] for j in rows], y=[n.one_gradient[j] for j in rows],
                                     mode="markers", name=f"{SITE_NAMES.get(site, site)}, one gradient",
                                     marker={"color": COLORS[i % len(COLORS)], "size": 5, "symbol": "circle-open",
                                             "opacity": 0.5}, text=[n.labels[j] for j in rows],
                                     hoverinfo="text+x+y", visible="legendonly"))
    low = min([*n.patching, *n.attribution, 0.0])
    high = max([*n.patching, *n.attribution, 0.0])
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", line={"dash": "dash", "color": "gray"},
                             name="attribution = patching"))
    one = "" if n.steps == 1 else f"; one gradient r = {_r(n.one_gradient_pearson)}"
    fig.update_layout(
        **title_with_detail(
            f"Attribution against activation patching, {len(n.labels)} nodes: r = {_r(n.pearson)} "
            f"({n.steps} step{'s' if n.steps > 1 else ''}{one})",
            f"{n.sample}; patching {n.patching_s:.1f} s, attribution {n.attribution_s:.2f} s"),
        xaxis_title="real patch: metric(clean run, one activation from the corrupted run) - metric(clean run)",
        yaxis_title="attribution estimate")
    return fig


def recovery(result) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[p.edges for p in result.curve], y=[p.recovered for p in result.curve],
                               mode="lines+markers", name="top-k edges by score (after pruning), search pairs",
                               text=[f"top {p.top_k}" for p in result.curve], marker={"size": 4}))
    fig.add_trace(go.Scatter(x=[result.circuit_edges], y=[result.circuit_recovered_search], mode="markers",
                             marker={"symbol": "star", "size": 14}, name="the circuit, search pairs"))
    if result.circuit_recovered is not None:
        fig.add_trace(go.Scatter(x=[result.circuit_edges], y=[result.circuit_recovered], mode="markers",
                                 marker={"symbol": "diamond", "size": 12}, name="the circuit, held-out pairs"))
    fig.add_hline(y=result.target, line_dash="dot", line_color="gray", annotation_text=f"target {result.target:.0%}")
    fig.add_vline(x=0.2 * result.total_edges, line_dash="dot", line_color="gray", annotation_text="20% of the edges")
    values = [p.recovered for p in result.curve] + [result.circuit_recovered or 0, 1.0]
    fig.update_yaxes(title_text="share of the behaviour kept (real ablation)",
                     **{**percent_ticks(), "range": [min(0.0, min(values)) - 0.05, max(1.0, max(values)) + 0.05]})
    fig.update_xaxes(title_text=f"edges kept (of {result.total_edges})")
    fig.update_layout(**title_with_detail(
        f"How much of the behaviour a circuit keeps ({result.ablation} ablation of every other edge)", result.sample))
    return fig


def edge_scores(result) -> go.Figure:
    measured = [e for e in result.edges if e.effect is not None]
    fig = go.Figure()
    for flag, name, color in ((True, "in the circuit", SUPPORTS), (False, "outside", "gray")):
        rows = [e for e in measured if e.in_circuit == flag]
        fig.add_trace(go.Scatter(x=[e.effect for e in rows], y=[e.score for e in rows], mode="markers", name=name,
                                 marker={"color": color, "size": 6, "opacity": 0.7},
                                 text=[f"{e.source} -> {e.target}{'.' + e.channel if e.channel else ''}" for e in rows],
                                 hoverinfo="text+x+y"))
    fig.update_layout(title=f"Edge scores against cutting each edge alone: r = {_r(result.edge_score_vs_effect_pearson)}"
                            f" ({result.ablation} ablation, {result.steps} step{'s' if result.steps > 1 else ''})",
                      xaxis_title="real: metric with the edge cut - metric of the full model",
                      yaxis_title="edge attribution score")
    return fig


def _r(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
