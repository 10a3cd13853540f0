"""Plotly figures of a multiplication result (returned, never shown)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from analyses._axes import integer_ticks, label_every_row, log_ticks, percent_ticks
from analyses._head_group_figures import knockout
from analyses._running_sum_figures import (
    partial_products_by_loop,
    product_digits_by_loop,
    running_sum_by_loop,
)
from analyses._titles import title_with_detail

COLORS = qualitative.Plotly


def multiplication_figures(result) -> dict[str, go.Figure]:
    figures = {
        "accuracy_by_length": accuracy_by_length(result),
        "lock_in_by_reach": lock_in_by_reach(result),
        "delayed_carry": delayed_carry(result),
    }
    if result.carry_guess is not None and result.carry_guess.fitted():
        figures["carry_guess"] = carry_guess_pairs(result.carry_guess)
    if result.by_digit:
        figures["by_digit"] = by_digit(result)
        figures["by_carry_in"] = by_carry_in(result)
        if any(d.wrong is not None and d.wrong.n for d in result.by_digit + result.by_digit_far):
            figures["wrong_digit_offsets"] = wrong_digit_offsets(result)
        if any(d.by_partial_product for d in result.by_digit):
            figures["by_partial_product"] = by_partial_product(result)
    if result.by_multiplier:
        figures["by_multiplier"] = by_multiplier(result)
        if any(row.by_multiplier_digit for row in result.by_multiplier):
            figures["by_multiplier_digit"] = by_multiplier_digit(result)
    if result.running_sum:
        figures["running_sum_by_loop"] = running_sum_by_loop(result.running_sum)
        if any(r.partial_products for r in result.running_sum):
            figures["partial_products_by_loop"] = partial_products_by_loop(result.running_sum)
        if any(r.product_digits for r in result.running_sum):
            figures["product_digits_by_loop"] = product_digits_by_loop(result.running_sum)
    if result.heads_far is not None and result.knockout is not None:
        figures["head_reading"] = head_reading(result.heads_far)
        figures["knockout"] = knockout(result.knockout)
    return figures


def by_digit(result) -> go.Figure:
    fig = go.Figure()
    for i, d in enumerate(result.by_digit):
        fig.add_trace(go.Scatter(x=list(range(len(d.right))), y=list(d.right), mode="lines+markers",
                                 name=f"x {d.multiplier_digits} digits", line={"color": COLORS[i % len(COLORS)]},
                                 text=[f"column sums {p} product{'s' if p != 1 else ''}" for p in d.products],
                                 hovertemplate="digit %{x}: %{y:.0%} right<br>%{text}"))
    d0 = result.by_digit[0]
    fig.update_xaxes(title_text="answer digit (units = 0)", dtick=1)
    fig.update_yaxes(title_text="right (logit lens)", range=[0, 1.02], tickformat=".0%")
    fig.update_layout(title=f"Each answer digit of uniform products ({d0.digits}-digit "
                            f"multiplicands, n={d0.n_problems} per multiplier length, after {d0.loops} loops)")
    return fig


def by_carry_in(result) -> go.Figure:
    fig = go.Figure()
    # the far length dashed, in its multiplier length's colour
    rows = [(d, "solid") for d in result.by_digit] + [(d, "dash") for d in result.by_digit_far]
    colour = _colour_by_multiplier(result)
    largest = max((b.n for d, _ in rows for b in d.by_carry_in), default=1)
    for d, dash in rows:
        fig.add_trace(go.Scatter(x=[b.span for b in d.by_carry_in], y=[b.right for b in d.by_carry_in],
                                 mode="lines+markers", name=f"x {d.multiplier_digits}, {d.digits}-digit",
                                 line={"color": colour[d.multiplier_digits], "dash": dash},
                                 # the marker's area follows the digits behind the point
                                 marker={"size": [6 + 14 * (b.n / largest) ** 0.5 for b in d.by_carry_in]},
                                 text=[f"n={b.n} answer digits of {d.label}" for b in d.by_carry_in],
                                 hovertemplate="carry %{x}: %{y:.0%} right (%{text})"))
    d0 = result.by_digit[0]
    fig.update_xaxes(title_text="carry into the answer digit's column", type="category",
                     categoryorder="array",
                     categoryarray=[span for _, span in sorted({(b.lo, b.span) for d, _ in rows
                                                                for b in d.by_carry_in})])
    fig.update_yaxes(title_text="answer digit right (logit lens)", range=[0, 1.02], tickformat=".0%")
    far = f"; dashed: {result.by_digit_far[0].digits}-digit ones" if result.by_digit_far else ""
    fig.update_layout(title=f"Answer digits by the carry into their column ({result.trained_digits}-digit multiplicands"
                            f"{far}; n={d0.n_problems} per line, after {d0.loops} loops)")
    return fig


def wrong_digit_offsets(result) -> go.Figure:
    """Per multiplier and length, the share of the wrong answer digits at each offset from the
    right digit: a peak at +-1 is a carry misjudged by one, a flat spread a wrong column sum."""
    fig = go.Figure()
    colour = _colour_by_multiplier(result)
    for d, pattern in [(d, "") for d in result.by_digit] + [(d, "/") for d in result.by_digit_far]:
        if d.wrong is None or not d.wrong.n:
            continue
        fig.add_trace(go.Bar(x=[f"{o:+d}" for o in d.wrong.OFFSETS], y=[c / d.wrong.n for c in d.wrong.counts],
                             name=f"x {d.multiplier_digits}, {d.digits}-digit (n={d.wrong.n} wrong)",
                             marker={"color": colour[d.multiplier_digits], "pattern_shape": pattern},
                             hovertemplate="off by %{x}: %{y:.0%} of the wrong digits"))
    fig.add_hline(y=1 / 9, line_dash="dot", annotation_text="random wrong digits (1 in 9 per offset)")
    fig.update_xaxes(title_text="wrong digit minus right digit (mod 10)", type="category")
    fig.update_yaxes(title_text="share of the wrong digits", tickformat=".0%")
    d0 = result.by_digit[0]
    fig.update_layout(barmode="group", title=f"How far the wrong answer digits are off (by_carry_in's problems: "
                                             f"uniform, n={d0.n_problems} per bar group, after {d0.loops} loops; "
                                             f"hatched: the far length)")
    return fig


def by_partial_product(result) -> go.Figure:
    """Answer digits right against the size of each partial product, in the columns that add
    all of them: one panel per multiplier length, one line per product, dotted among the digits
    whose carry in is small."""
    rows = [d for d in result.by_digit if d.by_partial_product]
    small = rows[0].by_partial_product[0].SMALL_CARRY
    fig = make_subplots(rows=1, cols=len(rows), shared_yaxes=True,
                        subplot_titles=[f"{d.label}, n={d.n_problems}" for d in rows])
    for col, d in enumerate(rows, start=1):
        for split in d.by_partial_product:
            for bins, dash, which in ((split.bins, "solid", "all"), (split.small_carry_bins, "dot",
                                                                     f"carry in <= {small}")):
                fig.add_trace(go.Scatter(
                    x=[b.span for b in bins], y=[b.right for b in bins], mode="lines+markers",
                    name=f"{split.product} ({which})", legendgroup=f"b_{split.j}",
                    showlegend=col == 1, line={"color": COLORS[split.j % len(COLORS)], "dash": dash},
                    text=[f"n={b.n} answer digits" for b in bins],
                    hovertemplate="product %{x}: %{y:.0%} right<br>%{text}"), row=1, col=col)
    # bins no digit fell in are left out: keep the axis in size order whatever comes first
    spans = [span for _, span in sorted({(b.lo, b.span) for d in rows for s in d.by_partial_product for b in s.bins})]
    fig.update_xaxes(title_text="size of the partial product", categoryorder="array", categoryarray=spans)
    fig.update_yaxes(title_text="right (logit lens)", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_layout(**title_with_detail(
        "Answer digits right by the size of each partial product, in the columns that add all of them",
        f"uniform products, logit lens after {rows[0].loops} loops; dotted: carry in at most {small}"))
    return fig


def factor_pair_tables(accuracy) -> go.Figure:
    """A `DigitAccuracy`'s `by_factor_pair` as heatmaps, one per partial product a_(i-j) * b_j:
    how often the answer digits of the columns that add all k products are right, by the
    product's two digits (the hover gives each cell's digits; empty cells had none)."""
    tables = accuracy.by_factor_pair
    if not tables:
        raise ValueError(f"{accuracy.label}: no factor-pair tables (k = 1, or no multiplicand of k digits or more)")
    digits = list(tables[0].DIGITS)
    fig = make_subplots(rows=1, cols=len(tables), shared_yaxes=True,
                        subplot_titles=[f"{t.product} (rho {t.size_correlation:+.2f} with a * b)"
                                        if t.size_correlation is not None else t.product for t in tables])
    for col, table in enumerate(tables, start=1):
        fig.add_trace(go.Heatmap(
            x=digits, y=digits, z=[list(row) for row in table.right], zmin=0, zmax=1, colorscale="RdYlGn",
            customdata=[list(row) for row in table.n], showscale=col == 1, colorbar={"tickformat": ".0%"},
            hovertemplate=f"a_(i-{table.j}) = %{{y}}, b_{table.j} = %{{x}}: %{{z:.0%}} right (%{{customdata}} digits)"
                          "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text=f"b_{table.j}", tickvals=digits, row=1, col=col)
    fig.update_yaxes(title_text="the multiplicand's digit a_(i-j)", tickvals=digits, row=1, col=1)
    fig.update_layout(**title_with_detail(
        "Answer digits right by the two digits of each partial product, in the columns that add all of them",
        f"{accuracy.label}, n={accuracy.n_problems}, logit lens after {accuracy.loops} loops"))
    return fig


def _colour_by_multiplier(result) -> dict[int, str]:
    """One colour per multiplier length, shared by the trained and the far length's traces."""
    return {d.multiplier_digits: COLORS[i % len(COLORS)] for i, d in enumerate(result.by_digit)}


def by_multiplier(result) -> go.Figure:
    fig = go.Figure()
    for i, row in enumerate(result.by_multiplier):
        fig.add_trace(go.Bar(x=[b.span for b in row.bins], y=[b.exact_match for b in row.bins],
                             name=f"{row.digits} x {row.multiplier_digits} digits", marker_color=COLORS[i % len(COLORS)],
                             text=[f"n={b.n}" for b in row.bins], textposition="outside",
                             hovertemplate="digit sum %{x}: %{y:.0%} right (%{text})"))
    fig.update_xaxes(title_text="sum of the multiplier's digits (up to 9: no carry above 8, as with one digit)",
                     type="category", categoryorder="array",
                     categoryarray=[span for _, span in sorted({(b.lo, b.span) for r in result.by_multiplier
                                                                for b in r.bins})])
    fig.update_yaxes(title_text="exact match, adaptive loops", range=[0, 1.1], tickformat=".0%")
    fig.update_layout(barmode="group", **title_with_detail(
        "N x k products by their multiplier",
        f"uniform digits, the accuracy table's problems, n={result.by_multiplier[0].n_problems} per row"))
    return fig


def by_multiplier_digit(result) -> go.Figure:
    """Per row, exact match where each multiplier digit b_j is small and where it is large: a
    gap under one b_j names the partial product the model forms worst."""
    fig = go.Figure()
    rows = [row for row in result.by_multiplier if row.by_multiplier_digit]
    large = rows[0].by_multiplier_digit[0].LARGE_DIGIT
    for i, row in enumerate(rows):
        for side, dash in (("small", ""), ("large", "/")):
            shares = [getattr(d, f"{side}_exact_match") for d in row.by_multiplier_digit]
            counts = [getattr(d, f"{side}_n") for d in row.by_multiplier_digit]
            digits = f"< {large}" if side == "small" else f">= {large}"  # the leading digit is never 0
            fig.add_trace(go.Bar(x=[f"b_{d.j}" for d in row.by_multiplier_digit], y=shares, text=[f"n={n}" for n in counts],
                                 name=f"{row.digits} x {row.multiplier_digits}, b_j {digits}",
                                 marker={"color": COLORS[i % len(COLORS)], "pattern": {"shape": dash}},
                                 textposition="outside", hovertemplate="%{x} " + digits + ": %{y:.0%} right (%{text})"))
    fig.update_xaxes(title_text="multiplier digit (units = b_0)", type="category")
    fig.update_yaxes(title_text="exact match, adaptive loops", range=[0, 1.1], tickformat=".0%")
    fig.update_layout(barmode="group", **title_with_detail(
        "N x k products by each multiplier digit, small against large",
        f"uniform digits, the accuracy table's problems, n={rows[0].n_problems} per row; hatched: b_j >= {large}"))
    return fig


def accuracy_by_length(result) -> go.Figure:
    acc = result.accuracy
    fig = go.Figure()
    for i, k in enumerate(result.multiplier_digits):
        rows = [r for r in acc.rows if r.multiplier_digits == k]
        fig.add_trace(go.Scatter(x=[r.digits for r in rows], y=[r.exact_match for r in rows], mode="lines+markers",
                                 name=f"x {k}-digit multiplier", line={"color": COLORS[i % len(COLORS)]},
                                 text=[f"n={r.n}, median {r.loops_median:g} loops" for r in rows]))
    fig.add_vline(x=acc.trained_digits, line_dash="dash", line_color="gray")
    fig.update_xaxes(title_text="multiplicand digits (uniform digits; dashed: trained length)",
                     **log_ticks([r.digits for r in acc.rows], at_values=True))
    fig.update_yaxes(title_text="exact match, adaptive loops", **percent_ticks())
    fig.update_layout(title="N x k products: exact match by multiplicand length")
    return fig


def lock_in_by_reach(result) -> go.Figure:
    fig = go.Figure()
    for i, fit in enumerate(result.lock_in):
        fig.add_trace(go.Scatter(x=[r for r, _ in fit.median_by_reach], y=[m for _, m in fit.median_by_reach],
                                 mode="markers+lines", name=f"{fit.label} (n={fit.n_problems})",
                                 line={"color": COLORS[i % len(COLORS)]}))
    fig.update_xaxes(title_text="carry reach of the answer digit (columns that decide its carry)")
    fig.update_yaxes(title_text="median lock-in loop",
                     **integer_ticks([m for fit in result.lock_in for _, m in fit.median_by_reach]))
    fig.update_layout(title="When each answer digit locks in, by how far its carry is decided")
    return fig


def delayed_carry(result) -> go.Figure:
    patch = result.delayed.patch
    fig = go.Figure()
    for i, (s, row) in enumerate(zip(patch.switch_loops, patch.lock_in, strict=True)):
        name = "clean run" if s == 0 else f"switched after {s} loops"
        fig.add_trace(go.Scatter(x=list(result.delayed.digits), y=list(row), mode="markers+lines", name=name,
                                 line={"color": COLORS[i % len(COLORS)]}))
    fig.update_xaxes(title_text="answer digit (units = 0), where the two products differ")
    fig.update_yaxes(title_text="lock-in loop (from the start)")
    fig.update_layout(title=f"Delayed carry: {patch.corrupted} for s loops, then {patch.clean}")
    return fig


def carry_guess_pairs(guess) -> go.Figure:
    """One point per pair right at every digit of both runs: the lock-in slope of each product,
    with the line under which a run is read at once (CarryGuess.AT_ONCE)."""
    fitted = [pair for pair, _ in guess.fitted_pairs()]
    zeros, nines = zip(*(slopes for _, slopes in guess.fitted_pairs()), strict=True)
    fig = go.Figure(go.Scatter(x=list(nines), y=list(zeros), mode="markers",
                               text=[f"{p.multiplicand} * {p.multiplier}" for p in fitted],
                               hovertemplate="a * b = %{text}<br>9s %{x:.2f}, 0s %{y:.2f} loops per column"))
    for line in (fig.add_hline, fig.add_vline):  # below it, a run is read at once
        line(guess.AT_ONCE, line_dash="dot", line_color="gray")
    fig.update_xaxes(title_text="a * b, the run of 9s: loops per column of lock-in", rangemode="tozero")
    fig.update_yaxes(title_text="(a + 1) * b, the run of 0s", rangemode="tozero")
    fig.update_layout(**title_with_detail("Which product of a pair waits for its carry",
                                          f"{guess.label}, {len(fitted)} of {len(guess.pairs)} pairs right "
                                          f"throughout by loop {guess.horizon}"))
    return fig


def head_reading(reading) -> go.Figure:
    settled = reading.settled()  # [head group]
    labels = [reading.labelled(h) for h in reading.heads]
    fig = go.Figure(go.Heatmap(z=settled, x=list(reading.groups), y=labels, colorscale="Blues", zmin=0, zmax=1,
                               text=[[f"{v:.0%}" for v in row] for row in settled], texttemplate="%{text}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Attention of the answer positions by key group ({reading.label}, "
                            f"mean over loops {len(reading.mass) // 2 + 1}-{len(reading.mass)})",
                      height=120 + 32 * len(labels))
    return label_every_row(fig)
