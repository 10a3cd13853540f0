"""What the comparison's sentences and figures share: each family's label and colour, a
cell's label, and how many standard errors a gap must exceed to rank two cells.

Apart from `summary.py` because `curves.py` and `seeds.py` read them too, and the summary's
`findings` reads their sentences: all three import this module, and the summary imports the
other two.
"""

from __future__ import annotations

from typing import Any

from plotly.colors import qualitative

FAMILY_LABELS = {"looped": "Looped", "gpt": "GPT", "lstm": "LSTM", "retran": "ReTran"}  # compare.FAMILIES
FAMILY_COLORS = {family: qualitative.Plotly[i] for i, family in enumerate(FAMILY_LABELS)}
SIGNIFICANCE = 2.0  # standard errors an exact-match gap must exceed to rank two cells


def label(cell: dict[str, Any]) -> str:
    return f"{FAMILY_LABELS[cell['family']]}-{cell['size']}"
