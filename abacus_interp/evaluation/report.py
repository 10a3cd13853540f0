"""The `EvalReport` dataclass: the typed tree of one evaluation, its JSON and its figures.

This module owns the report's shape at the top (one field per section, the section types
are in `result.py`; None when a task does not support it, with the reason in `skipped`),
the in/out-of-distribution shortcuts, the JSON-safe `to_dict`, `from_dict` (its way back)
and the hook to the Plotly figures in `figures.py`. It computes nothing itself;
`suite.evaluate` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from abacus_interp.evaluation.result import (
    Agreement,
    Carry,
    EdgeCases,
    Grid,
    Lengths,
    Loops,
    ModelInfo,
    SetScores,
    Settings,
    plain,
)
from abacus_interp.jsonsafe import from_json, json_safe


@dataclass(frozen=True, kw_only=True)
class EvalReport:
    """Every number of one evaluation. Sections a task does not support are None, with the
    reason in `skipped[section]`.

    grid:       exact match and loss per (digits of a, digits of b) cell, with the in- and
                out-of-distribution means
    loops:      exact match and loss per set against the loop count (and under adaptive loops)
    lengths:    exact match with equal-length operands, and the grid's by the longer operand
    edge_cases: hand-picked problems, greedily decoded, with pass counts by group
    carry:      exact match by longest carry cascade (addition)
    perplexity: per set, teacher-forced
    splits:     (modular tasks) per split, teacher-forced
    agreement:  the greedy re-check of the teacher-forced verdicts
    """

    task: dict[str, Any]  # the task's name and config (each task's own keys)
    model: ModelInfo
    settings: Settings
    grid: Grid | None = None
    loops: Loops | None = None
    lengths: Lengths | None = None
    edge_cases: EdgeCases | None = None
    carry: Carry | None = None
    perplexity: dict[str, SetScores] | None = None
    splits: dict[str, SetScores] | None = None
    agreement: Agreement | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # section -> why it does not apply
    notes: tuple[str, ...] = ()

    @property
    def generate_agreement(self) -> float | None:
        """The share of re-checked problems where model.generate + task.check gives the
        teacher-forced verdict (1.0 expected); None without a re-check."""
        return None if self.agreement is None else self.agreement.agreement

    @property
    def in_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid.in_distribution_exact_match

    @property
    def out_of_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid.out_of_distribution_exact_match

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe plain dicts/lists/str/bool/int/float, non-finite floats as None, with
        `generate_agreement` written before `agreement`, where it has always been."""
        fields = plain(self)
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "agreement":
                out["generate_agreement"] = self.generate_agreement
            out[name] = value
        return json_safe(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, partial: bool = False) -> EvalReport:
        """The report `to_dict` wrote (`generate_agreement` is read from `agreement`). A key
        that is no field is a TypeError, and so is a missing one unless `partial` (hand-written
        fragments: tests, a figure drawn from part of a report)."""
        return from_json(cls, {k: v for k, v in data.items() if k != "generate_agreement"}, partial=partial)

    def figures(self) -> dict[str, Any]:
        """Plotly figures keyed by section (never shown): grid, loops, lengths, edge_cases,
        carry, perplexity, splits, whichever the report has."""
        from abacus_interp.evaluation.figures import report_figures

        return report_figures(self)
