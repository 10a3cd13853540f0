"""The comparisons' result, a tree of frozen dataclasses: `to_dict` is `jsonsafe.to_json` of
it, and `figures()` / `findings()` read its attributes through figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.evaluation.lists import ListRow
from abacus_interp.jsonsafe import to_json
from analyses._head_groups import GroupReading, Knockout

from .choice import Choice
from .decide import DecidingDigit
from .pairwise import PairwiseReading
from .summary import ItemSummary


@dataclass(frozen=True)
class ComparisonsResult:
    trained_numbers: tuple[int, int]
    trained_digits: tuple[int, int]
    n_loops: int
    rows: tuple[ListRow, ...]
    answer_reading: GroupReading
    digit_reading: GroupReading
    knockout: Knockout
    deciding: DecidingDigit
    choice: Choice
    summary: ItemSummary
    pairwise: PairwiseReading | None  # None: the model answers without a pairwise comparison

    def row(self, label: str) -> ListRow:
        return next(r for r in self.rows if r.label == label)

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import comparisons_figures

        return comparisons_figures(self)

    def findings(self) -> list[str]:
        from .findings import comparisons_findings

        return comparisons_findings(self)
