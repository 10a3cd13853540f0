"""Evaluation: exact-match grids, accuracy vs loops, edge cases, carry complexity."""

from abacus_interp.evaluation.cascades import sample_with_cascade
from abacus_interp.evaluation.suite import EvalReport, evaluate, format_report

__all__ = ["EvalReport", "evaluate", "format_report", "sample_with_cascade"]
