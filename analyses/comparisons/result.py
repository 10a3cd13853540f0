"""The comparisons' result, a tree of frozen dataclasses: `to_dict` is `jsonsafe.to_json` of
it, and `figures()` / `findings()` read its attributes through figures.py and findings.py."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.jsonsafe import to_json
from analyses._head_groups import GroupReading, Knockout

from .decide import DecidingDigit


@dataclass(frozen=True)
class AccuracyRow:
    label: str  # what the lists are, in words
    numbers: tuple[int, int]  # how many numbers per list (min, max)
    digits: tuple[int, int]  # how many digits per number (min, max)
    n: int
    exact_match: float | None  # None: no list of this row fits the model
    in_distribution: bool
    # teacher-forced share of lists whose k-th answer label (k = 1, 2, ...) is right, over the
    # lists that have a k-th number; () when no list fits
    label_accuracy: tuple[float, ...] = ()
    # the share whose EOS right after the last label is right (the model stops); None: no list fits
    stop_accuracy: float | None = None


@dataclass(frozen=True)
class ComparisonsResult:
    trained_numbers: tuple[int, int]
    trained_digits: tuple[int, int]
    n_loops: int
    rows: tuple[AccuracyRow, ...]
    answer_reading: GroupReading
    digit_reading: GroupReading
    knockout: Knockout
    deciding: DecidingDigit

    def row(self, label: str) -> AccuracyRow:
        return next(r for r in self.rows if r.label == label)

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self):
        from .figures import comparisons_figures

        return comparisons_figures(self)

    def findings(self) -> list[str]:
        from .findings import comparisons_findings

        return comparisons_findings(self)
