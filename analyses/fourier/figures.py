"""Plotly figures of a Fourier result, built from its typed numbers (never shown). Every figure carries
the detected phases: shaded spans on the step axis of the curves, a note on the snapshots.

The summary's types (result.py) are read, not imported: result.py imports this module when
`figures()` is called. `d` is a `ModularSummary` or a `Base10Summary` (told apart by `kind`),
and each other argument the part of it that it is named after (`phases`, `n` the neurons,
`fit` the logit fit, `cp` the clock-or-pizza check, `per_loop` the neurons per loop)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import plotly.graph_objects as go

from abacus_interp.core.hooks import layer_label
from analyses._axes import label_every_row

from .progress import phase_spans

PHASE_RGB = {"memorisation": (99, 110, 250), "circuit_formation": (0, 204, 150), "cleanup": (239, 85, 59)}


def phase_note(phases) -> str:
    if phases is None:
        return "phases: not detected (no checkpoint series)"
    spans = phase_spans(phases)
    if not spans:
        return "phases: " + ("; ".join(phases.notes) or "not detected")
    return "phases: " + ", ".join(f"{n.replace('_', ' ')} {a:,}-{b:,}" for n, a, b in spans)


def mark_phases(fig: go.Figure, phases, on_steps: bool) -> go.Figure:
    """Shade the phases on a step axis, or write them on a line under the title of a snapshot figure.

    The phase names go into the legend (a swatch of each shade, with its steps), not onto the
    plot: memorisation is often a sliver (0-200 of 15,000 steps), and labels at the spans'
    left edges would print on top of each other."""
    spans = phase_spans(phases) if phases is not None else []
    if on_steps and spans:
        for name, start, end in spans:
            rgb = ",".join(map(str, PHASE_RGB[name]))
            fig.add_vrect(x0=max(start, 1) if fig.layout.xaxis.type == "log" else start, x1=end,
                          fillcolor=f"rgba({rgb},0.12)", line_width=0, layer="below")
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip",
                                     name=f"{name.replace('_', ' ')} ({start:,}-{end:,})",
                                     marker={"symbol": "square", "size": 14, "color": f"rgba({rgb},0.35)"},
                                     legendgroup="phases", legendgrouptitle_text="phases (shaded)"))
        for _, _, b in spans:
            fig.add_vline(x=b, line_dash="dot", line_color="grey", line_width=1)
    else:  # a line under the title, below any line the title already has
        title = f"{fig.layout.title.text or ''}<br><sup>{phase_note(phases)}</sup>"
        # the default top margin (100 px) holds a title of two lines; make room for the rest
        fig.update_layout(title_text=title, margin_t=max(100, 78 + 22 * title.count("<br>")))
    return fig


def _key_colours(n: int, key: list[int]) -> list[str]:
    return ["crimson" if k in key else "lightslategrey" for k in range(1, n + 1)]


def embed_figure(d) -> go.Figure:
    key, shares = list(d.key_frequencies), list(d.embed_frequency_shares)
    ks = list(range(1, len(shares) + 1))
    fig = go.Figure(go.Bar(x=ks, y=shares, marker_color=_key_colours(len(ks), key), name="W_E",
                           hovertemplate="k=%{x}<br>share %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=ks, y=list(d.neuron_logit_frequency_shares), mode="lines+markers", name="W_out W_U",
                             marker={"size": 4}))
    fig.add_hline(y=d.key_threshold, line_dash="dash", annotation_text=f"key threshold {d.key_threshold:.0%}")
    fig.update_layout(title=f"Fourier energy share per frequency (key: {key})", xaxis_title="frequency k",
                      yaxis_title="share of non-constant squared norm")
    return fig


def components_figure(d) -> go.Figure:
    norms = list(d.embed_component_norms)
    p = d.p
    names = ["const"] + [f"{'cos' if i % 2 else 'sin'} {(i + 1) // 2}" for i in range(1, p)]
    fig = go.Figure(go.Bar(x=names, y=norms, marker_color="steelblue"))
    fig.update_layout(title="Norm of W_E along each Fourier basis vector", xaxis_title="basis vector",
                      yaxis_title="norm", xaxis={"tickangle": -90, "tickfont": {"size": 7}})
    return fig


def neurons_figure(n) -> go.Figure:
    fig = go.Figure(go.Scatter(
        x=list(n.dominant_frequency), y=list(n.fraction_explained), mode="markers",
        marker={"size": 5, "color": ["crimson" if s else "grey" for s in n.single_frequency], "opacity": 0.6},
        text=[f"neuron {i}" for i in range(n.n_neurons)],
        hovertemplate="%{text}<br>k=%{x}<br>fraction %{y:.2f}<extra></extra>"))
    fig.add_hline(y=n.threshold, line_dash="dash", annotation_text=f"single-frequency >= {n.threshold}")
    fig.update_layout(title=f"Neurons at '=': dominant frequency and variance explained "
                            f"({n.share_single_frequency:.0%} single-frequency)",
                      xaxis_title="dominant frequency k", yaxis_title="fraction of variance", yaxis_range=[0, 1.02])
    return fig


def clusters_figure(n) -> go.Figure:
    sizes = n.cluster_sizes
    fig = go.Figure(go.Bar(x=[str(k) for k in sizes], y=list(sizes.values()), marker_color="crimson"))
    fig.update_layout(title=f"Neuron clusters by frequency ({n.n_single_frequency} of {n.n_neurons} neurons, "
                            f"{n.n_dead} dead)", xaxis_title="frequency k", yaxis_title="neurons")
    return fig


def neuron_fourier_figure(coef, p: int) -> go.Figure:
    """Mean |2D Fourier coefficient| of the neurons over (a component, b component).

    The constant x constant term is the neurons' mean activation, several times every other
    coefficient (94 against at most 14 on checkpoints/grok-mod113): on a scale that reaches it
    the frequency structure is all white, so the scale stops at the largest other term and the
    constant cell shows saturated (its true value is in the title and on hover)."""
    names = ["const"] + [f"{'cos' if i % 2 else 'sin'} {(i + 1) // 2}" for i in range(1, p)]
    z = np.asarray(coef.tolist() if hasattr(coef, "tolist") else coef, dtype=float)
    title = "Neuron activations at '=' in the 2D Fourier basis (mean |coefficient| over neurons)"
    scale: dict[str, float] = {"zmin": 0.0}
    rest = np.delete(z.reshape(-1), 0)
    if rest.size and np.isfinite(rest).any() and z[0, 0] > np.nanmax(rest) > 0:
        scale["zmax"] = float(np.nanmax(rest))
        title += (f"<br><sup>colour scale capped at the largest non-constant coefficient ({scale['zmax']:.3g}); "
                  f"the constant term ({z[0, 0]:.3g}, top left) is off the scale</sup>")
    fig = go.Figure(go.Heatmap(z=z.tolist(), x=names, y=names, colorscale="Blues", colorbar={"title": "mean |coef|"},
                               hovertemplate="a: %{y}<br>b: %{x}<br>mean |coef| %{z:.3g}<extra></extra>", **scale))
    fig.update_layout(title=title, xaxis_title="b component", yaxis_title="a component", width=750, height=720,
                      xaxis={"showticklabels": False}, yaxis={"showticklabels": False, "autorange": "reversed"})
    return label_every_row(fig)


def logit_fit_figure(fit) -> go.Figure:
    coefs = fit.coefficients
    ks = [int(k) for k in coefs]
    fig = go.Figure(go.Bar(x=ks, y=[coefs[k] for k in coefs],
                           marker_color=_key_colours(max(ks), [int(k) for k in fit.key_frequencies])))
    fig.update_layout(title=f"Logits fitted to cos(w_k(a+b-c)): {fit.fraction_explained:.1%} of logit variance "
                            f"from the key frequencies", xaxis_title="frequency k", yaxis_title="coefficient alpha_k")
    return fig


def _curves(series: dict[str, Any], names: dict[str, str], title: str, ytitle: str, log_y: bool) -> go.Figure:
    fig = go.Figure()
    for key, label in names.items():
        if key in series:
            fig.add_trace(go.Scatter(x=series["step"], y=series[key], mode="lines+markers", name=label,
                                     marker={"size": 4}))
    fig.update_layout(title=title, xaxis_title="step", yaxis_title=ytitle, yaxis_type="log" if log_y else None)
    return fig


def progress_figures(series: dict[str, Any]) -> dict[str, go.Figure]:
    return {
        "progress_losses": _curves(series, {"train_loss": "train", "test_loss": "test",
                                            "restricted_loss": "restricted (train)",
                                            "excluded_loss": "excluded (train)"},
                                   "Answer loss: train, test, restricted, excluded", "cross-entropy", True),
        "progress_accuracy": _curves(series, {"train_accuracy": "train", "test_accuracy": "test",
                                              "restricted_accuracy": "restricted", "excluded_accuracy": "excluded"},
                                     "Accuracy", "accuracy", False),
        "progress_gini": _curves(series, {"gini_embed": "W_E", "gini_neuron_logit": "W_out W_U"},
                                 "Gini coefficient of the Fourier-component norms", "Gini", False),
        "progress_weights": _curves(series, {"sum_sq_weights": "all parameters"},
                                    "Total sum of squared weights", "sum of squares", False),
    }


def clock_pizza_figure(table, cp) -> go.Figure:
    z = table.tolist() if hasattr(table, "tolist") else table
    fig = go.Figure(go.Heatmap(z=z, colorscale="Viridis", colorbar={"title": "correct logit"}))
    fig.update_layout(title=f"Correct logit by (a+b, a-b): gradient symmetricity {cp.gradient_symmetricity:.2f}, "
                            f"distance irrelevance {cp.distance_irrelevance:.2f} ({cp.verdict})",
                      xaxis_title="(a - b) mod p", yaxis_title="(a + b) mod p", width=700, height=650)
    return label_every_row(fig)


def loops_figure(per_loop) -> go.Figure:
    labels = [layer_label(s.layer, s.loop) for s in per_loop]
    fig = go.Figure(go.Bar(x=labels, y=[s.share_single_frequency for s in per_loop], marker_color="teal"))
    fig.update_layout(title="Single-frequency neurons per loop", yaxis_title="share of neurons", yaxis_range=[0, 1])
    return fig


def base10_figures(d) -> dict[str, go.Figure]:
    b = d.base10
    fig = go.Figure(go.Bar(x=[f"{p:.3g}" for p in b.periods], y=list(b.shares),
                           marker_color=["crimson" if k in (1, 2, 5) else "grey" for k in b.frequencies]))
    fig.update_layout(title="Digit embeddings 0..9: Fourier energy by period", xaxis_title="period (digits)",
                      yaxis_title="share of non-constant energy")
    out = {"base10": fig}
    s = d.base10_series
    if s is not None and len(s["step"]) > 1:
        out["base10_series"] = _curves(s, {"10": "period 10", "5": "period 5", "2": "period 2",
                                           "share_10_5_2": "periods 10+5+2"},
                                       "Digit-embedding energy at periods 10, 5, 2 over training", "share", False)
    return out


def all_figures(d, arrays: dict[str, Any]) -> dict[str, go.Figure]:
    phases = d.phases
    if d.kind == "base10":  # a Base10Summary
        figs = base10_figures(d)
        return {k: mark_phases(f, phases, on_steps=k.endswith("series")) for k, f in figs.items()}
    figs: dict[str, go.Figure] = {"embed_fourier": embed_figure(d), "embed_components": components_figure(d)}
    n = d.neurons
    figs["neurons"] = neurons_figure(n)
    figs["neuron_clusters"] = clusters_figure(n)
    # the maps are kept out of the JSON; a result rebuilt from it has none
    coef = f"neuron_coefficients/{n.loop}/{n.layer}"
    if coef in arrays:
        figs["neuron_fourier"] = neuron_fourier_figure(arrays[coef], d.p)
    figs["logit_fit"] = logit_fit_figure(d.logit_fit)
    if "correct_logit_table" in arrays:
        figs["clock_pizza"] = clock_pizza_figure(arrays["correct_logit_table"], d.clock_pizza)
    if d.neurons_per_loop:
        figs["loops"] = loops_figure(d.neurons_per_loop)
    steps_figs = progress_figures(series_dict(d.progress)) if d.progress is not None else {}
    out = {k: mark_phases(f, phases, on_steps=False) for k, f in figs.items()}
    out.update({k: mark_phases(f, phases, on_steps=True) for k, f in steps_figs.items()})
    return out


def series_dict(series) -> dict[str, Any]:
    """The `ProgressSeries` as name -> values, for plotting curves by name."""
    return dataclasses.asdict(series)
