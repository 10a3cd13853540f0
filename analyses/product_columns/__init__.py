"""Multiplication in distribution, read column by column: which head, in which loop, reads
which digit of the partial products a_(i-d) * b_d that make answer digit i of an N x N
product written token by token (the `mul` preset), and what each head is needed for.

    from analyses import product_columns
    result = product_columns.run("checkpoints/mul")   # a ProductColumnsResult
    result.figures(); result.findings()
"""

from .analysis import run
from .config import ProductColumnsConfig
from .result import ProductColumnsResult

__all__ = ["ProductColumnsConfig", "ProductColumnsResult", "run"]
