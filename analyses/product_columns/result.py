"""The product columns' result, a tree of frozen dataclasses: `to_dict` is `jsonsafe.to_json`
of it, and `figures()` / `findings()` read its attributes through figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.jsonsafe import to_json
from analyses._head_groups import GroupReading, Knockout
from analyses._running_sum import RunningSumReading


@dataclass(frozen=True)
class GridCell:
    digits_a: int
    digits_b: int
    n: int
    exact_match: float


@dataclass(frozen=True)
class ProductColumnsResult:
    trained_digits: int
    n_loops: int
    grid: tuple[GridCell, ...]  # uniform N x M, 1 .. trained + beyond each
    inside: str  # why the reading and the knockouts use the cell they use
    reading: GroupReading
    knockout: Knockout
    # each column's running sum read from the state after every loop, on the reading's problems
    running_sum: tuple[RunningSumReading, ...] = ()

    def cell(self, digits_a: int, digits_b: int) -> GridCell | None:
        return next((c for c in self.grid if (c.digits_a, c.digits_b) == (digits_a, digits_b)), None)

    def largest_square(self, bar: float = 0.99) -> int | None:
        """The largest N with every cell up to N x N at >= `bar` (None when 1 x 1 misses it)."""
        best = None
        for n in range(1, max(c.digits_a for c in self.grid) + 1):
            cells = [self.cell(i, j) for i in range(1, n + 1) for j in range(1, n + 1)]
            if any(c is None or c.exact_match < bar for c in cells):
                break
            best = n
        return best

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import product_columns_figures

        return product_columns_figures(self)

    def findings(self) -> list[str]:
        from .findings import product_columns_findings

        return product_columns_findings(self)
