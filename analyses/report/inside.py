"""Inside the winners of an architecture comparison: the report of `abacus-interp report`
restricted to the carry-attention and fixed-point sections, run on the best looped and the
best GPT cell.

Each winner's report (`build_report` at the report's quick sizes, so that it costs seconds
per cell) is written to `out/inside/<cell>/` (index.html and report.json). A section that
cannot run for the cell (no carries in an expression; no loop in a GPT, so no fixed point)
is recorded with the report's own reason. `out/inside.json` keeps the result; it is
recomputed when a winner changes (a better cell was added) or its weights are newer.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

from abacus_interp import checkpoints as ckpt
from abacus_interp.experiments.compare_inside import (
    FINDINGS_PER_SECTION,
    SECTIONS,
    InsideFinding,
    latest_checkpoint_name,
    read_inside,
    winners,
)

logger = logging.getLogger(__name__)


def inspect_winners(spec, out: Path, progress: bool = False) -> list[InsideFinding]:
    """Run the carry-attention and fixed-point sections on the best looped and GPT cells
    (reusing the stored result of a winner whose weights have not changed); write inside.json."""
    from . import ReportSizes, build_report, load_report_json

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

