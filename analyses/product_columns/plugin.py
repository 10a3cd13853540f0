"""The product-columns analysis as the report runs it (see `analyses.contract`)."""

from __future__ import annotations

from collections.abc import Mapping

from analyses.contract import Result, RunContext

from .analysis import run as run_product_columns
from .analysis import skip_reason
from .config import ProductColumnsConfig
from .result import ProductColumnsResult


class ProductColumnsAnalysis:
    key = "product_columns"
    title = "Multiplication in distribution: the heads that read a column's partial products"
    Config = ProductColumnsConfig
    requires: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()

    def skip_reason(self, run: RunContext) -> str | None:
        return skip_reason(run.model, run.task)

    def run(self, run: RunContext, config: ProductColumnsConfig, needs: Mapping[str, Result]) -> ProductColumnsResult:
        return run_product_columns(run.model, run.task, config=config, seed=run.seed)


ANALYSIS = ProductColumnsAnalysis()
