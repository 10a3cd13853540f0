"""Every setting of the product-columns analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError


@dataclass(frozen=True)
class ProductColumnsConfig:
    """The settings `product_columns.run` uses: the defaults are what the report runs;
    `quick()` the tests'."""

    # uniform problems per cell of the N x M accuracy grid (the bar: >= 50 per cell)
    n_per_cell: int = 50
    # the grid reaches this many digits past the trained length, to show where it stops
    beyond: int = 2
    # uniform N x N problems (N the trained length) the head reading and knockouts average over
    n_problems: int = 128
    seed: int = 0

    def __post_init__(self):
        if self.n_per_cell < 1 or self.n_problems < 2 or self.beyond < 0:
            raise UserError("ProductColumnsConfig: n_per_cell >= 1, n_problems >= 2 and beyond >= 0")

    @classmethod
    def quick(cls) -> ProductColumnsConfig:
        return cls(n_per_cell=4, beyond=1, n_problems=8)
