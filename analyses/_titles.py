"""Figure titles with a detail line under them: plotly never wraps a title, so a long sample
description drawn on one line runs past the figure and is cut off (the browser check,
tests/browser_check.py, measures it). The detail is wrapped into lines that fit and the top
margin grows with them."""

from __future__ import annotations

import textwrap
from typing import Any

DETAIL_CHARS = 130  # of the small sub-title font in a ~1,000 px wide figure
LINE_PX = 16


def title_with_detail(main: str, detail: str, chars: int = DETAIL_CHARS) -> dict[str, Any]:
    """`fig.update_layout(**title_with_detail(...))`: the title, its detail wrapped under it in
    small print, and a top margin that holds every line."""
    lines = textwrap.wrap(detail, chars) or [""]
    return {"title": f"{main}<br><sup>{'<br>'.join(lines)}</sup>", "margin": {"t": 70 + LINE_PX * len(lines)}}
