"""Tick settings for the analyses' figures: counts on whole numbers, fractions in percent.

Set on a second y axis (`secondary_y=True`) they matter most: plotly.js lays the ticks of an
overlaying axis where the first axis has its ticks (tickmode "sync") unless told otherwise,
which prints a fraction axis as 0.067, 0.295, ... and a loop axis as 10.78, 11.455, ...
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def _finite(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def integer_ticks(values: Iterable[Any], floor: float = 0.0, max_ticks: int = 8, grid: bool = True) -> dict[str, Any]:
    """Axis settings for a count (loops, digits): a range from `floor` to just past the largest
    value, ticks on whole numbers only, 1, 2 or 5 x 10^k apart so there are at most about
    `max_ticks` of them. grid=False for a second axis: one set of grid lines is enough."""
    finite = _finite(values)
    top = max([floor + 1.0, *finite])
    step = 1
    while (top - floor) / step > max_ticks:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2  # 1, 2, 5, 10, 20, 50, ...
    pad = 0.05 * (top - floor) + 0.25
    # room below `floor` only for a marker drawn on it; else the axis starts there, level
    # with a second axis that starts at 0
    bottom = floor - pad if finite and min(finite) <= floor else floor
    return {"range": [bottom, top + pad], "tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": "d",
            "showgrid": grid}


def percent_ticks(top: float = 1.0, grid: bool = True) -> dict[str, Any]:
    """Axis settings for a fraction in [0, top]: ticks 0%, 25%, ... of top, placed by this axis
    itself (not synced to the other one)."""
    return {"range": [0, 1.05 * top], "tickmode": "linear", "tick0": 0, "dtick": 0.25 * top, "tickformat": ".0%",
            "showgrid": grid}


def log_ticks(values: Iterable[Any], at_values: bool = False) -> dict[str, Any]:
    """Axis settings for a log axis whose every tick reads as a whole number: at the values
    themselves (`at_values`: operand lengths 5, 10, 20, 50, 100) or at 1, 2 and 5 x 10^k over
    their range (a loss). Plotly's own log ticks print the 2 and 5 of each decade as bare
    digits ("10, 2, 5, 100"), which read as values."""
    finite = sorted({v for v in _finite(values) if v > 0})
    if not finite:
        return {"type": "log"}
    if at_values:
        ticks = finite
    else:
        lo, hi = math.floor(math.log10(finite[0])), math.ceil(math.log10(finite[-1]))
        ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in (1, 2, 5)
                 if finite[0] / 2 <= m * 10.0**e <= finite[-1] * 2]
    return {"type": "log", "tickmode": "array", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def label_every_row(fig, most: int = 64):
    """Put a tick label on every row and column of each heatmap of `fig` with at most `most` of
    them (explicit tickvals: plotly thins a tight axis to every other label, so the darkest row
    of the sub-task head-ablation map, L0H1, read as L0H2). Longer axes (a residue mod 113)
    keep plotly's spacing. Returns `fig`."""
    for trace in fig.data:
        if trace.type != "heatmap" or trace.z is None or len(trace.z) == 0:
            continue
        for letter, values, count in (("x", trace.x, len(trace.z[0])), ("y", trace.y, len(trace.z))):
            values = list(values) if values is not None else list(range(count))
            if len(values) > most:
                continue
            anchor = (trace.xaxis if letter == "x" else trace.yaxis) or letter  # "x", "x2", ...
            axis = fig.layout[f"{letter}axis{anchor[1:]}"]
            if axis.showticklabels is False:
                continue
            axis.update(tickmode="array", tickvals=values, ticktext=[str(v) for v in values])
    return fig
