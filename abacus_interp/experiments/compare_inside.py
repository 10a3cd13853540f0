"""Inside the winners: what the project's interpretability sections say about the best looped
and the best GPT cell of a comparison.

This module holds what the comparison reads: which cells are the winners and the stored
findings (`out/inside.json`). Producing them runs the report's sections, which the library
may not import, so that half lives in `analyses.report.inside` (and the sentences the
comparison's findings make of them in `analyses.report.architectures.inside`) and the CLI
hands it to `run_comparison`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from .. import checkpoints as ckpt
from .compare_cells import cell_dirs, read_evaluation

logger = logging.getLogger(__name__)

SECTIONS = ("carry_attention", "fixed_point")
WINNER_FAMILIES = ("looped", "gpt")
FINDINGS_PER_SECTION = 2  # the headline sentences of a section that go into the comparison


@dataclass(frozen=True)
class InsideFinding:
    cell: str  # e.g. "looped-m"
    family: str  # "looped" or "gpt"
    section: str  # a key of SECTIONS
    title: str  # the section's title in the report
    status: str  # "ok", "omitted" or "failed" (the report's statuses)
    findings: tuple[str, ...]  # the section's first FINDINGS_PER_SECTION findings when ok
    reason: str | None  # why it did not run (omitted) or how it failed
    checkpoint: str  # the weights it was run on (a winner retrained is inspected again)
    report: str  # the report's directory


def winners(spec, out: Path) -> list[tuple[str, str, Path]]:
    """(family, cell, directory) of the most accurate evaluated cell (first seed) of each
    family in WINNER_FAMILIES; ties go to the lower held-out loss."""
    best: dict[str, tuple[float, float, str, Path]] = {}
    for contender, cell_dir in cell_dirs(spec, out):
        if contender.family not in WINNER_FAMILIES or contender.seed != 0:
            continue
        evaluation = read_evaluation(cell_dir)
        key = (evaluation.exact_match, -evaluation.loss, contender.cell, cell_dir)
        if contender.family not in best or key[:2] > best[contender.family][:2]:
            best[contender.family] = key
    return [(family, best[family][2], best[family][3]) for family in WINNER_FAMILIES if family in best]


def latest_checkpoint_name(cell_dir: Path) -> str:
    return ckpt.list_checkpoints(cell_dir)[-1][1].name


def read_inside(out: Path) -> list[InsideFinding]:
    path = Path(out) / "inside.json"
    if not path.exists():
        return []
    return [InsideFinding(**{**row, "findings": tuple(row["findings"])}) for row in json.loads(path.read_text())]
