"""Numbers in prose: the formatting and small statistics that findings sentences share.

Every findings generator (the report's own sections and each analysis's `findings()`)
writes its sentences from JSON-safe numbers with these, so "42%" or "3.1x" reads the same
everywhere. A value that is None prints as "n/a", never as an invented number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

MAX_FINDINGS = 4
# a trend is called an effect only when a test of zero slope rejects it at this level
SIGNIFICANCE = 0.01


# --------------------------------------------------------------------------- helpers


def pct(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def num(x: float | None, sig: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e6):
        return f"{int(x):,}"
    return f"{x:.{sig}g}"


def times(x: float | None) -> str:
    """A ratio for prose: 3.09x, 4,800x, 1.2e7x (never 4.8e+03x)."""
    if x is None:
        return "n/a"
    if x < 100:
        return f"{x:.3g}x"
    if x < 1e5:
        return f"{x:,.0f}x"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}x"


def finite(values: Sequence[Any] | None) -> list[float]:
    return [float(v) for v in (values or []) if isinstance(v, (int, float)) and math.isfinite(v)]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of y on x (None with fewer than two distinct x)."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation, ties averaged (None with fewer than three pairs, or where
    either side takes one value only)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(stats.spearmanr(x, y).statistic)


@dataclass(frozen=True)
class LinearFit:
    """y = slope * x + intercept by least squares, with the two-sided p-value of a zero slope
    (Wald test, scipy's linregress); None where x does not vary. A slope is an effect only
    when `significant`: findings say "not distinguishable from noise" otherwise."""

    slope: float | None
    intercept: float | None
    r2: float | None
    n: int
    pvalue: float | None = None

    @classmethod
    def of(cls, xs: Sequence[float], ys: Sequence[float]) -> LinearFit:
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        if x.size < 2 or np.ptp(x) == 0:
            return cls(slope=None, intercept=None, r2=None, n=int(x.size))
        if np.ptp(y) == 0:  # a flat line: no variance to explain, and linregress would divide by zero
            return cls(slope=0.0, intercept=float(y[0]), r2=None, n=int(x.size), pvalue=1.0)
        test = stats.linregress(x, y)
        pvalue = float(test.pvalue) if x.size > 2 else None  # two points: a line, but no test
        return cls(slope=float(test.slope), intercept=float(test.intercept), r2=float(test.rvalue**2),
                   n=int(x.size), pvalue=pvalue)

    @property
    def significant(self) -> bool:
        return self.pvalue is not None and self.pvalue < SIGNIFICANCE

    def describe(self, unit: str) -> str:
        """"0.49 loops per link (R^2 0.31, p = 3e-08, n = 120)", or below significance "no
        dependence distinguishable from noise (slope -0.09 loops per link, p = 0.4, n = 40)"."""
        if self.slope is None:
            return f"no fit (n = {self.n}, one value of x only)"
        if self.significant:
            return f"{self.slope:.2f} {unit} (R^2 {self.r2:.2f}, p = {self.pvalue:.1g}, n = {self.n})"
        p = "no test with two points" if self.pvalue is None else f"p = {self.pvalue:.2g}"
        return f"no dependence distinguishable from noise (slope {self.slope + 0:+.2f} {unit}, {p}, n = {self.n})"


_METRICS = {
    "loss": "training loss",
    "full_depth_loss": "training loss at full depth",
    "train_exact_match": "exact match, training batch",
    "lr": "learning rate",
    "grad_norm": "gradient norm",
    "tokens": "tokens seen",
    "elapsed_s": "seconds of training",
}
_HELD_OUT = {"in_distribution": "held-out, in distribution", "test": "held-out test split"}


def metric_label(key: str) -> str:
    """How a column of metrics.jsonl reads in a legend: "2x_length_loss" -> "loss, held-out,
    2x the trained length"; an unknown key is returned with spaces for underscores."""
    if key in _METRICS:
        return _METRICS[key]
    for quantity in ("exact_match", "loss", "accuracy"):
        if key.endswith("_" + quantity):
            held_out = key[: -len(quantity) - 1]
            if held_out.endswith("x_length"):
                where = f"held-out, {held_out.removesuffix('_length')} the trained length"
            else:
                where = _HELD_OUT.get(held_out, held_out.replace("_", " "))
            return f"{quantity.replace('_', ' ')}, {where}"
    return key.replace("_", " ")


def first_step_at(steps: Sequence[int], values: Sequence[float | None], threshold: float) -> int | None:
    for s, v in zip(steps, values, strict=False):
        if v is not None and v >= threshold:
            return int(s)
    return None


def limit(sentences: list[str | None], most: int = MAX_FINDINGS) -> list[str]:
    return [s for s in sentences if s][:most]
