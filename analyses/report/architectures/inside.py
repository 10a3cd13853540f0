"""What the report's sections found inside a comparison's winners, in sentences (the
`inside` rows of comparison.json).

Apart from `analyses.report.inside`, which produces those rows by building the winners'
reports: the comparison's findings, which the report's architectures section writes, read
only the rows, so they need not import the report that contains them.
"""

from __future__ import annotations

from abacus_interp.experiments.compare_inside import InsideFinding


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
