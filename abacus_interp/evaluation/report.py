"""The `EvalReport` dataclass: the container every section of the evaluation suite fills in.

This module owns the report's shape and serialisation: one field per section (None when a
task does not support it, with the reason in `skipped`), the in/out-of-distribution
shortcuts, the JSON-safe `to_dict` and the hook to the
Plotly figures in `figures.py`. It computes nothing itself; `suite.evaluate` builds it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from abacus_interp.jsonsafe import json_safe


@dataclass
class EvalReport:
    """Every number of one evaluation. Sections a task does not support are None, with the
    reason in `skipped[section]`.

    grid:       digits_a, digits_b (axis values), exact_match and loss ([a][b], None for a
                cell that does not fit max_seq_len), skipped_cells ([[i, j], ...]),
                trained_digits [min, max], n_per_cell, n_loops (the loss's teacher-forced depth),
                decoding (how exact match was read, e.g. "6 loops"),
                in_distribution_exact_match, out_of_distribution_exact_match
    loops:      loops [R...], trained_loops, sets {name: {exact_match: [...], loss: [...], n}},
                adaptive ({label, cap, sets {name: {exact_match, median_loops, max_loops_used, n}}},
                or None for a run without adaptive halting)
    lengths:    lengths [...], exact_match, loss, n_per_length, trained_max,
                from_grid {max_operand_digits: [...], exact_match: [...]}
    edge_cases: cases [{group, name, kind, in_distribution, passed, expected, answers,
                correct, loops_used}], by_group {group: {passed, total}}, pass_rate,
                in_distribution_pass_rate, out_of_distribution_pass_rate, decoding
    carry:      buckets [{bucket, n, exact_match, loss, natural_fraction}], n_per_bucket
    perplexity: {set: {perplexity, loss, mean_answer_logprob, exact_match, token_accuracy, n}}
    splits:     (modular tasks) {split: {exact_match, loss, token_accuracy, n}}
    generate_agreement: fraction of re-checked problems where model.generate + task.check
                gives the same verdict as teacher-forced scoring (1.0 expected)
    """

    task: dict[str, Any]
    model: dict[str, Any]
    settings: dict[str, Any]
    grid: dict[str, Any] | None = None
    loops: dict[str, Any] | None = None
    lengths: dict[str, Any] | None = None
    edge_cases: dict[str, Any] | None = None
    carry: dict[str, Any] | None = None
    perplexity: dict[str, Any] | None = None
    splits: dict[str, Any] | None = None
    generate_agreement: float | None = None
    agreement: dict[str, Any] | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def in_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid["in_distribution_exact_match"]

    @property
    def out_of_distribution_exact_match(self) -> float | None:
        return None if self.grid is None else self.grid["out_of_distribution_exact_match"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe deep copy: plain dicts/lists/str/bool/int/float, non-finite floats as None."""
        out = {
            name: copy.deepcopy(getattr(self, name))
            for name in (
                "task",
                "model",
                "settings",
                "grid",
                "loops",
                "lengths",
                "edge_cases",
                "carry",
                "perplexity",
                "splits",
                "generate_agreement",
                "agreement",
                "skipped",
                "notes",
            )
        }
        return json_safe(out)

    def figures(self) -> dict[str, Any]:
        """Plotly figures keyed by section (never shown): grid, loops, lengths, edge_cases,
        carry, perplexity, splits, whichever the report has."""
        from abacus_interp.evaluation.figures import report_figures

        return report_figures(self)

