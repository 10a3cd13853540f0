"""What an architecture comparison found (comparison.json -> sentences) and its figures.

The reference's two questions: which family is most accurate for its parameters, and how
each degrades as problems get longer, up to and past the longest trained problem.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from .common import SIGNIFICANCE, cell_families, family_color, family_label, label
from .curves import equal_compute_sentences, gap_in_se, reach_sentences, rising_sentences
from .inside import inside_sentences
from .seeds import seed_sentences

SIZE_DASH = {"S": "solid", "M": "dash", "L": "dot"}
COMPARABLE_PARAMS = 1.5  # two cells within this ratio of parameters count as equal-sized


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _params(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else str(n)


def band_mean(cell: dict[str, Any], lo: int, hi: int) -> float | None:
    """Mean exact match over the lengths lo..hi that were evaluated (None if none was)."""
    values = [em for n, em in zip(cell["lengths"], cell["exact_match_by_length"], strict=True)
              if lo <= n <= hi and em is not None]
    return sum(values) / len(values) if values else None


def length_bands(cell: dict[str, Any], band: int) -> list[tuple[str, float | None]]:
    """(name, mean exact match) for the `band` shortest and longest trained lengths and for
    every evaluated length past the trained range."""
    lo, hi = cell["trained_lengths"]
    def name(first: int, last: int) -> str:
        return f"{first}-{last}" if last > first else str(first)

    bands = [(name(lo, lo + band - 1), band_mean(cell, lo, lo + band - 1)),
             (name(hi - band + 1, hi), band_mean(cell, hi - band + 1, hi))]
    beyond = [n for n, em in zip(cell["lengths"], cell["exact_match_by_length"], strict=True) if n > hi and em is not None]
    if beyond:
        first, last = min(beyond), max(beyond)
        bands.append((name(first, last), band_mean(cell, first, last)))
    return bands


def clearly_more_accurate(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """a's exact match exceeds b's by more than SIGNIFICANCE standard errors of the difference
    of two proportions over their n_test problems each; smaller gaps are sampling noise."""
    pa, pb, n = a["exact_match"], b["exact_match"], a["n_test"]
    return pa - pb > SIGNIFICANCE * math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / n)


def gap_se(a: dict[str, Any], b: dict[str, Any]) -> float:
    """a's exact match minus b's in standard errors of the difference (curves.gap_in_se)."""
    return gap_in_se(a["exact_match"], a["n_test"], b["exact_match"], b["n_test"])


def equal_parameter_sentences(cells: list[dict[str, Any]]) -> list[str]:
    """Comparisons a reader can take as "at equal parameters": a cell clearly more accurate
    (or of lower held-out loss) than another family's cell with no more parameters, so it
    wins even giving away size; then the other pairs of families within COMPARABLE_PARAMS of
    each other in size."""
    out, settled = [], set()

    def dominance(wins, what: str, show, gap=None) -> None:
        for a in cells:
            beaten = [b for b in cells if b["family"] != a["family"] and b["params"] >= a["params"] and wins(a, b)]
            settled.update((a["cell"], b["cell"]) for b in beaten)
            if beaten:
                out.append(f"{label(a)} ({_params(a['params'])} parameters, {show(a)}) {what} "
                           + ", ".join(f"{label(b)} ({_params(b['params'])}, {show(b)}"
                                       + (f"; {gap(a, b):.1f} SE behind" if gap else "") + ")" for b in beaten)
                           + " with no more parameters.")

    dominance(clearly_more_accurate, "is more accurate than", lambda c: _pct(c["exact_match"]), gap_se)
    if not out:
        out.append(f"No family's exact match is more than {SIGNIFICANCE:g} standard errors above another's "
                   f"({cells[0]['n_test']} problems each), so exact match does not rank them at these sizes.")
    dominance(lambda a, b: a["loss"] < b["loss"], "has a lower held-out loss than", lambda c: f"loss {c['loss']:.2f}")
    for i, a in enumerate(cells):
        for b in cells[i + 1:]:
            close = max(a["params"], b["params"]) <= COMPARABLE_PARAMS * min(a["params"], b["params"])
            if close and a["family"] != b["family"] and not {(a["cell"], b["cell"]), (b["cell"], a["cell"])} & settled:
                out.append(f"At comparable size ({_params(a['params'])} vs {_params(b['params'])} parameters), "
                           f"{label(a)} scores {_pct(a['exact_match'])} (loss {a['loss']:.2f}) and {label(b)} "
                           f"{_pct(b['exact_match'])} (loss {b['loss']:.2f}), {abs(gap_se(a, b)):.1f} standard "
                           f"errors apart.")
    return out


def findings(data: dict[str, Any]) -> list[str]:
    """Every sentence of a comparison: accuracy and loss, at equal parameters, at equal compute
    (curves), by length, over seeds (seeds) and inside the winners
    (inside.py, from the rows abacus_lab.experiments.compare_inside stores). `data` is comparison.json's
    content."""
    cells = data["cells"]
    if not cells:
        return []
    unit, band = data["spec"]["length_unit"], data["spec"]["band"]
    lo, hi = cells[0]["trained_lengths"]
    ranked = sorted(cells, key=lambda c: -c["exact_match"])
    sample = f" ({cells[0]['sample']}: the task's own sampler)" if cells[0]["sample"] else ""
    out = [f"Exact match on {cells[0]['n_test']} held-out problems of {lo}-{hi} {unit}{sample}: "
           + ", ".join(f"{label(c)} {_pct(c['exact_match'])} ({_params(c['params'])} parameters)" for c in ranked)
           + "."]
    balanced = [c for c in ranked if c["exact_match_carry_balanced"] is not None]
    if balanced:
        out.append(f"On {balanced[0]['n_carry_balanced']} carry-balanced problems (longest carry chain uniform in "
                   f"0..digits, which uniform digits almost never give): "
                   + ", ".join(f"{label(c)} {_pct(c['exact_match_carry_balanced'])}" for c in
                               sorted(balanced, key=lambda c: -c["exact_match_carry_balanced"])) + ".")
    by_loss = sorted(cells, key=lambda c: c["loss"])
    out.append("Held-out loss per answer token (lower is better; it separates cells whose exact match is "
               "near zero): " + ", ".join(f"{label(c)} {c['loss']:.2f}" for c in by_loss) + ".")
    out.extend(equal_parameter_sentences(cells))
    out.extend(equal_compute_sentences(cells))
    out.extend(reach_sentences(cells))
    out.extend(rising_sentences(cells))
    for cell in ranked:
        bands = length_bands(cell, band)
        text = ", ".join(f"{_pct(em)} at {name}" for name, em in bands)
        out.append(f"{label(cell)} by problem length ({unit}): {text}"
                   + (f" (past the trained {hi})." if len(bands) > 2 else "."))
    out.extend(seed_sentences(data))
    out.extend(inside_sentences(data["inside"]))
    return out


def accuracy_vs_params_figure(data: dict[str, Any]) -> go.Figure:
    """Held-out exact match against parameter count (log scale), one line per family."""
    fig = go.Figure()
    for family in cell_families():
        cells = sorted((c for c in data["cells"] if c["family"] == family), key=lambda c: c["params"])
        if cells:
            fig.add_trace(go.Scatter(
                x=[c["params"] for c in cells], y=[c["exact_match"] for c in cells], mode="lines+markers+text",
                text=[c["size"] for c in cells], textposition="top center", name=family_label(family),
                line={"color": family_color(family)}, marker={"size": 10}))
    fig.update_xaxes(type="log", title_text="parameters")
    fig.update_yaxes(title_text="exact match (held-out, trained lengths)", range=[-0.02, 1.05])
    fig.update_layout(title="Accuracy against parameters", height=420)
    return fig


def accuracy_vs_length_figure(data: dict[str, Any]) -> go.Figure:
    """Exact match against problem length, one line per cell; the shaded band is past the
    longest trained problem."""
    fig = go.Figure()
    for cell in data["cells"]:
        fig.add_trace(go.Scatter(
            x=cell["lengths"], y=cell["exact_match_by_length"], mode="lines+markers", name=label(cell),
            line={"color": family_color(cell["family"]), "dash": SIZE_DASH.get(cell["size"], "solid")}))
    lengths = [n for c in data["cells"] for n in c["lengths"]]
    hi = data["cells"][0]["trained_lengths"][1] if data["cells"] else None
    if hi is not None and lengths and max(lengths) > hi:
        fig.add_vrect(x0=hi + 0.5, x1=max(lengths) + 0.5, fillcolor="gray", opacity=0.15, line_width=0,
                      annotation_text="out of distribution", annotation_position="top left")
    fig.update_xaxes(title_text=f"problem length ({data['spec']['length_unit']})")
    fig.update_yaxes(title_text="exact match", range=[-0.02, 1.05])
    fig.update_layout(title="Accuracy against problem length", height=420)
    return fig
