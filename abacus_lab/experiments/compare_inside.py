"""Inside the winners of an architecture comparison: the report of `abacus-interp report`
restricted to the carry-attention and fixed-point sections, run on the best looped and the
best GPT cell.

Each winner's report (`build_report` at the report's quick sizes, so that it costs seconds
per cell) is written to `out/inside/<cell>/` (index.html and report.json). A section that
cannot run for the cell (no carries in an expression; no loop in a GPT, so no fixed point)
is recorded with the report's own reason. `out/inside.json` keeps the result; it is
recomputed when a winner changes (a better cell was added) or its weights are newer. The
comparison's findings put it in sentences (`analyses.report.architectures.inside`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

from abacus_interp import checkpoints as ckpt
from analyses.report import ReportSizes, build_report, load_report_json
from analyses.report.architectures.inside import InsideFinding

from .compare_cells import cell_dirs, read_evaluation

logger = logging.getLogger(__name__)

SECTIONS = ("carry_attention", "fixed_point")
WINNER_FAMILIES = ("looped", "gpt")
FINDINGS_PER_SECTION = 2  # the headline sentences of a section that go into the comparison


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
    return [InsideFinding.from_dict(row) for row in json.loads(path.read_text())]


def inspect_winners(spec, out: Path, progress: bool = False) -> list[InsideFinding]:
    """Run the carry-attention and fixed-point sections on the best looped and GPT cells
    (reusing the stored result of a winner whose weights have not changed); write inside.json."""
    stored = {(f.cell, f.section): f for f in read_inside(out)}
    result = []
    for family, cell, cell_dir in winners(spec, out):
        checkpoint = latest_checkpoint_name(cell_dir)
        if all((cell, s) in stored and stored[(cell, s)].checkpoint == checkpoint for s in SECTIONS):
            result.extend(stored[(cell, s)] for s in SECTIONS)
            continue
        report_dir = out / "inside" / cell
        logger.info("inside the winners: %s sections of %s", ", ".join(SECTIONS), cell)
        build_report(cell_dir, report_dir, sizes=ReportSizes.quick(), sections=list(SECTIONS), progress=progress)
        sections = load_report_json(report_dir)["sections"]
        for key in SECTIONS:
            section = sections[key]
            reason = section["reason"] if section["status"] == "omitted" else section["error"]
            result.append(InsideFinding(
                cell=cell, family=family, section=key, title=section["title"], status=section["status"],
                findings=tuple(section["findings"][:FINDINGS_PER_SECTION]) if section["status"] == "ok" else (),
                reason=reason, checkpoint=checkpoint, report=str(report_dir)))
    ckpt.write_json(Path(out) / "inside.json", [asdict(f) for f in result])
    return result
