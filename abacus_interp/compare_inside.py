"""Inside the winners: what the project's interpretability sections say about the best looped
and the best GPT cell of a comparison.

Each winner gets the report of `abacus-interp report` restricted to the carry-attention and
fixed-point sections (`analyses.report.build_report`, at the report's quick sizes so that it
costs seconds per cell), written to `out/inside/<cell>/` (index.html and report.json). A
section that cannot run for the cell (no carries in an expression; no loop in a GPT, so no
fixed point) is recorded with the report's own reason. `out/inside.json` keeps the result;
it is recomputed when a winner changes (a better cell was added) or its weights are newer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from . import checkpoints as ckpt

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
    from .compare import cell_dirs, read_evaluation

    best: dict[str, tuple[float, float, str, Path]] = {}
    for contender, cell_dir in cell_dirs(spec, out):
        if contender.family not in WINNER_FAMILIES or contender.seed != 0:
            continue
        evaluation = read_evaluation(cell_dir)
        key = (evaluation.exact_match, -evaluation.loss, contender.cell, cell_dir)
        if contender.family not in best or key[:2] > best[contender.family][:2]:
            best[contender.family] = key
    return [(family, best[family][2], best[family][3]) for family in WINNER_FAMILIES if family in best]


def _latest(cell_dir: Path) -> str:
    return ckpt.list_checkpoints(cell_dir)[-1][1].name


def read_inside(out: Path) -> list[InsideFinding]:
    path = Path(out) / "inside.json"
    if not path.exists():
        return []
    return [InsideFinding(**{**row, "findings": tuple(row["findings"])}) for row in json.loads(path.read_text())]


def inspect_winners(spec, out: Path, progress: bool = False) -> list[InsideFinding]:
    """Run the carry-attention and fixed-point sections on the best looped and GPT cells
    (reusing the stored result of a winner whose weights have not changed); write inside.json."""
    from analyses.report import ReportSizes, build_report, load_report_json

    stored = {(f.cell, f.section): f for f in read_inside(out)}
    result = []
    for family, cell, cell_dir in winners(spec, out):
        checkpoint = _latest(cell_dir)
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


def inside_sentences(rows: list[dict]) -> list[str]:
    """comparison.json's `inside` rows -> one sentence per (winner, section)."""
    out = []
    for f in (InsideFinding(**{**row, "findings": tuple(row["findings"])}) for row in rows):
        who = f"the best {'looped' if f.family == 'looped' else 'GPT'} cell, {f.cell}"
        if f.status == "ok":
            stated = " ".join(f.findings) if f.findings else "the section ran and stated no finding."
            out.append(f"Inside {who} ({f.title}): {stated}")
        elif f.status == "omitted":
            out.append(f"{f.title} cannot run for {who}: {f.reason.rstrip('.')}.")
        else:
            out.append(f"{f.title} failed for {who} ({f.reason}); see {f.report}.")
    return out
