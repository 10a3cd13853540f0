"""What the comparison's sentences and figures share: each family's label and colour, a
cell's label, and how many standard errors a gap must exceed to rank two cells.

Apart from `summary.py` because `curves.py` and `seeds.py` read them too, and the summary's
`findings` reads their sentences: all three import this module, and the summary imports the
other two.
"""

from __future__ import annotations

from typing import Any

from plotly.colors import qualitative

from abacus_interp.core.families import family_class, registered_families

# A comparison's "gpt" cells are the looped family run once (abacus_lab.experiments.compare);
# every other cell family is a model family, named by its registry entry.
COMPARISON_ONLY_LABELS = {"gpt": "GPT"}
SIGNIFICANCE = 2.0  # standard errors an exact-match gap must exceed to rank two cells


def cell_families() -> tuple[str, ...]:
    """Every family a comparison cell may have, in the order figures list them."""
    others = tuple(f for f in registered_families() if f != "looped")
    return ("looped", *COMPARISON_ONLY_LABELS, *others)


def family_label(family: str) -> str:
    return COMPARISON_ONLY_LABELS.get(family) or family_class(family).label


def family_color(family: str) -> str:
    palette = qualitative.Plotly
    return palette[cell_families().index(family) % len(palette)]


def label(cell: dict[str, Any]) -> str:
    return f"{family_label(cell['family'])}-{cell['size']}"
