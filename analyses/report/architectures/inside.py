"""What the report's sections found inside a comparison's winners, in sentences: the `inside`
rows of comparison.json, which `abacus_lab.experiments.compare_inside` writes by building the
winners' reports.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InsideFinding:
    cell: str  # e.g. "looped-m"
    family: str  # "looped" or "gpt"
    section: str  # a report section's key
    title: str  # the section's title in the report
    status: str  # "ok", "omitted" or "failed" (the report's statuses)
    findings: tuple[str, ...]  # the section's headline findings when ok
    reason: str | None  # why it did not run (omitted) or how it failed
    checkpoint: str  # the weights it was run on (a winner retrained is inspected again)
    report: str  # the report's directory

    @classmethod
    def from_dict(cls, row: dict) -> InsideFinding:
        return cls(**{**row, "findings": tuple(row["findings"])})


def inside_sentences(rows: list[dict]) -> list[str]:
    """comparison.json's `inside` rows -> one sentence per (winner, section)."""
    out = []
    for f in map(InsideFinding.from_dict, rows):
        who = f"the best {'looped' if f.family == 'looped' else 'GPT'} cell, {f.cell}"
        if f.status == "ok":
            stated = " ".join(f.findings) if f.findings else "the section ran and stated no finding."
            out.append(f"Inside {who} ({f.title}): {stated}")
        elif f.status == "omitted":
            out.append(f"{f.title} cannot run for {who}: {f.reason.rstrip('.')}.")
        else:
            out.append(f"{f.title} failed for {who} ({f.reason}); see {f.report}.")
    return out
