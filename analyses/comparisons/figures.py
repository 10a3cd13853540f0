"""Plotly figures of a comparisons result (returned, never shown)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from abacus_interp.core.hooks import loop_label
from analyses._axes import label_every_row
from analyses._head_group_figures import group_reading, knockout

from .choice import BLINDS


def comparisons_figures(result) -> dict[str, go.Figure]:
    return {"accuracy_rows": accuracy_rows(result), "answer_places": answer_places(result), "answer_reading": group_reading(result.answer_reading),
            "digit_reading": group_reading(result.digit_reading), "knockout": knockout(result.knockout),
            "lock_in": lock_in(result.deciding), "patching": patching(result.deciding),
            "choice_margin": choice_margin(result.choice), "blinds": blinds(result.choice),
            "summary_digits": summary_digits(result.summary), "summary_order": summary_order(result.summary),
            **({"pairwise": pairwise(result.pairwise)} if result.pairwise is not None else {})}


def accuracy_rows(result) -> go.Figure:
    rows = [r for r in result.rows if r.exact_match is not None]
    fig = go.Figure(go.Bar(
        x=[r.exact_match for r in rows], y=[f"{r.label} (n={r.n})" for r in rows], orientation="h",
        marker_color=["#1f77b4" if r.in_distribution else "#ff7f0e" for r in rows],
        text=[f"{r.exact_match:.0%}" for r in rows], textposition="auto"))
    fig.update_xaxes(title_text="exact match (every label right)", range=[0, 1], tickformat=".0%")
    fig.update_yaxes(autorange="reversed")
    lo, hi = result.trained_numbers
    d0, d1 = result.trained_digits
    fig.update_layout(title=f"Held-out lists ({result.n_loops} loops; trained on {lo}-{hi} numbers of {d0}-{d1} "
                            "digits; blue: uniform, in distribution)", height=120 + 40 * len(rows))
    return label_every_row(fig)


def answer_places(result) -> go.Figure:
    """Each row's teacher-forced accuracy at each answer place: label 1, 2, ... and the stop."""
    rows = [r for r in result.rows if r.stop_accuracy is not None]
    places = max(len(r.label_accuracy) for r in rows)
    z = np.array([[*r.label_accuracy, *[np.nan] * (places - len(r.label_accuracy)), r.stop_accuracy] for r in rows])
    fig = go.Figure(go.Heatmap(z=z, x=[f"label {k}" for k in range(1, places + 1)] + ["stop (EOS)"],
                               y=[f"{r.label} (n={r.n})" for r in rows], colorscale="Blues", zmin=0, zmax=1,
                               text=[["" if np.isnan(v) else f"{v:.0%}" for v in row] for row in z],
                               texttemplate="%{text}", colorbar={"title": "right"}))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="Where each list fails: each answer token right, given the right ones before it<br>"
                            "<sup>label k over the lists with a k-th number; the stop right after the last label</sup>",
                      height=160 + 40 * len(rows))
    return label_every_row(fig)


def lock_in(d) -> go.Figure:
    rows = [r for r in d.rows if r.lock_in is not None]
    fig = go.Figure(go.Scatter(x=[r.depth for r in rows], y=[r.lock_in for r in rows], mode="lines+markers",
                               text=[f"index {r.index}: {r.exact_match:.0%} right (n={r.n})" for r in rows],
                               hovertemplate="%{text}<br>locks in at loop %{y:.2f}"))
    fig.update_xaxes(title_text="depth of the deciding digit from the top (1 = the leading digit)", dtick=1)
    fig.update_yaxes(title_text="loop the first label locks in at (mean)", range=[0.5, d.n_loops + 0.5])
    fig.update_layout(title=f"Lock-in against the deciding digit<br><sup>{d.label}; {d.fit.describe('loops per place')}</sup>")
    return fig


def patching(d) -> go.Figure:
    z = np.array([[np.nan if v is None else v for v in row] for row in d.flipped])
    fig = go.Figure(go.Heatmap(z=z, x=[loop_label(t) for t in range(d.n_loops)], y=list(d.patch_groups),
                               colorscale="Reds", zmin=0, zmax=1,
                               text=[["" if np.isnan(v) else f"{v:.0%}" for v in row] for row in z],
                               texttemplate="%{text}", colorbar={"title": "flipped"}))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Patching the clean state entering a loop into the swapped pair: share of answers that "
                            f"follow the clean pair<br><sup>{d.label}; the {d.n_told_apart} pairs the model tells "
                            "apart</sup>")
    return label_every_row(fig)


def choice_margin(c) -> go.Figure:
    """The median margin of the right label over the best other label, by numbers left, one line per count."""
    fig = go.Figure()
    for count in c.counts:
        cells = [x for x in c.cells if x.count == count]
        fig.add_trace(go.Scatter(x=[x.left for x in cells], y=[x.median_margin for x in cells], mode="lines+markers",
                                 name=f"lists of {count}", text=[f"{x.accuracy:.0%} right (n={x.n})" for x in cells],
                                 hovertemplate="%{x} left: margin %{y:.1f}<br>%{text}"))
    fig.add_hline(y=0, line_dash="dot")
    fig.update_xaxes(title_text="numbers still to write", autorange="reversed", dtick=1)
    fig.update_yaxes(title_text="median logit margin of the right label")
    fig.update_layout(title=f"How sure each label is, by the numbers left<br><sup>{c.label}; n={c.n_lists} lists per "
                            "count; margin: the right label's logit minus the best other label of the list</sup>")
    return fig


def blinds(c) -> go.Figure:
    """Step accuracy with keys hidden from every head at the answer queries, per count; the hover
    says how many wrong labels name a number already written."""
    fig = go.Figure()
    for count in c.counts:
        rows = [c.blind(hidden, count) for hidden in BLINDS]
        fig.add_trace(go.Bar(x=[f"hidden: {r.hidden}" for r in rows], y=[r.accuracy for r in rows],
                             name=f"lists of {count}", text=[f"{r.accuracy:.0%}" for r in rows], textposition="auto",
                             hovertext=[f"{r.picks.written} of {r.picks.wrong} wrong labels already written" for r in rows]))
    fig.update_yaxes(title_text="answer labels right (teacher-forced)", range=[0, 1], tickformat=".0%")
    fig.update_layout(barmode="group", title=f"What the answer query must see to choose<br><sup>{c.label}; every head, "
                                             f"every loop, at each answer query; n={c.n_lists} lists per count</sup>")
    return fig


def summary_digits(s) -> go.Figure:
    """The digit probes at each item's closing separator: [place, site]."""
    z = np.array(s.digit_accuracy).T  # [place site]
    fig = go.Figure(go.Heatmap(z=z, x=list(s.sites), y=[f"{p} below the leading digit" if p else "the leading digit"
                                                       for p in range(s.digits)],
                               zmin=0, zmax=1, colorscale="Viridis", colorbar={"title": "probe accuracy"},
                               text=[[f"{v:.0%}" for v in row] for row in z], texttemplate="%{text}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Which digit each item's closing separator holds ({s.n_lists} lists, held-out items; "
                            "chance 10%)", height=160 + 40 * s.digits)
    return fig


def summary_order(s) -> go.Figure:
    """The order readout's held-out pairs put right, per site, by the leading digits they share."""
    fig = go.Figure()
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c")
    for k, name in enumerate(("differ in the leading digit", "share the leading digit", "share two")):
        fig.add_trace(go.Scatter(x=list(s.sites), y=[row[k] for row in s.ordered], mode="lines+markers",
                                 line={"color": colors[k]}, name=f"{name} (n={s.n_pairs[k]}): the value readout"))
        fig.add_trace(go.Scatter(x=list(s.sites), y=[row[k] for row in s.pair_probe], mode="lines+markers",
                                 line={"color": colors[k], "dash": "dash"}, name=f"{name}: a comparator of its own"))
    fig.update_yaxes(title_text="held-out pairs ordered right", range=[0.4, 1.02], tickformat=".0%")
    fig.update_layout(title="Pairs of one list ordered by linear readouts of the separator's state (chance 50%)",
                      height=400)
    return fig


def pairwise(p) -> go.Figure:
    """The pairwise answer's pairs ordered right after the trained loops: [length, deciding place];
    the hover gives every loop's share."""
    lengths, places = p.lengths, p.places
    cells = [[p.cell(d, k) for k in places] for d in lengths]
    z = [[None if c is None else c.right[-1] for c in row] for row in cells]
    hover = [["" if c is None else " / ".join(f"{v:.0%}" for v in c.right) for c in row] for row in cells]
    fig = go.Figure(go.Heatmap(z=z, x=[f"{k} below the leading digit" if k else "the leading digit" for k in places],
                               y=[f"{d} digits" for d in lengths], zmin=0.5, zmax=1, colorscale="Viridis",
                               colorbar={"title": "ordered right"}, customdata=hover,
                               text=[["" if v is None else f"{v:.0%}" for v in row] for row in z],
                               texttemplate="%{text}", hovertemplate="%{y}, deciding: %{x}<br>loops 1..: %{customdata}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Pairs the pairwise answer orders right, by the digit that decides (chance 50%)<br><sup>"
                            f"{p.label}; after {p.n_loops} loops</sup>", height=170 + 30 * len(lengths))
    return label_every_row(fig)
