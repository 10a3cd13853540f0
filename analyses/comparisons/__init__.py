"""Sorting, read from the inside: how far a sorter's accuracy reaches (longer numbers, more
numbers, lists that differ only in a low digit), which head in which loop reads which part of
the list, and the loop at which the answer locks in against the digit that decides it.

    from analyses import comparisons
    result = comparisons.run("checkpoints/extrap-sort")   # a ComparisonsResult
    result.figures(); result.findings()
"""

from .analysis import run
from .config import ComparisonsConfig
from .result import ComparisonsResult

__all__ = ["ComparisonsConfig", "ComparisonsResult", "run"]
