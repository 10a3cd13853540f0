"""Numbers in prose: the formatting and small statistics that findings sentences share.

Every findings generator (the report's own sections and each analysis's `findings()`)
writes its sentences from JSON-safe numbers with these, so "42%" or "3.1x" reads the same
everywhere. A value that is None prints as "n/a", never as an invented number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MAX_FINDINGS = 4


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


def first_step_at(steps: Sequence[int], values: Sequence[float | None], threshold: float) -> int | None:
    for s, v in zip(steps, values, strict=False):
        if v is not None and v >= threshold:
            return int(s)
    return None


def limit(sentences: list[str | None], most: int = MAX_FINDINGS) -> list[str]:
    return [s for s in sentences if s][:most]
