"""The findings of a checkpoint comparison, read from its typed result. A part that could not
be measured gets a sentence saying so, so a missing part never silently drops its finding.

`c` is a `CheckpointComparison`, read and not imported: result.py imports this module when
`findings()` is called."""

from __future__ import annotations

import math
from collections.abc import Iterable

from analyses.prose import first_step_at, limit, num, pct


def _values(xs: Iterable[float]) -> list[float | None]:
    """Floats with NaN as None, as `first_step_at` and `num` read them."""
    return [float(x) if math.isfinite(x) else None for x in xs]


def findings(c) -> list[str]:
    """Up to four sentences: where the chosen signal changed fastest, the last loop's state
    against the final checkpoint, exact match over training, what moved most; with a second
    run, how alike the two runs' final states are (second)."""
    a, steps = c.a, list(c.a.steps)
    out: list[str | None] = []
    cps = a.change_points[c.signal]
    if cps:
        first = cps[0]
        others = ", ".join(f"{p.from_step:,}-{p.step:,}" for p in cps[1:3])
        out.append(f"The {c.signal} changed fastest between steps {first.from_step:,} and {first.step:,}"
                   + (f" (next: {others})" if others else "") + ".")
    else:
        out.append(f"No change point of the {c.signal}: with {len(steps)} checkpoint(s) there is no interval "
                   "between two to compare.")
    last_loop = _values(a.cka_vs_final[-1])
    s90 = first_step_at(steps, last_loop, 0.9)
    out.append(f"The last loop's state at step {steps[0]:,} has linear CKA {num(last_loop[0], 2)} with the final "
               "checkpoint's" + (f"; it passes 0.9 at step {s90:,}" if s90 is not None and s90 != steps[-1] else "")
               + ".")
    em = _values(a.problem_exact_match)
    known = [v for v in em if v is not None]
    if known:
        s50 = first_step_at(steps, em, 0.5)
        out.append(f"On the fixed problem set exact match goes from {pct(known[0])} to {pct(known[-1])} over "
                   f"{len(steps)} checkpoints" + (f", first reaching 50% at step {s50:,}" if s50 is not None else "")
                   + ".")
    else:
        out.append("Exact match on the fixed problem set could not be measured at any checkpoint (no finite value).")
    if c.moved.groups:
        out.append(_moved_sentence(c.moved))
    else:
        out.append(f"No parameter group was compared between steps {c.moved.steps[0]:,} and {c.moved.steps[1]:,}.")
    if c.b is not None and c.matched_cka is not None:
        final = _values(c.matched_cka[-1])[-1] if c.matched_cka.shape[1] else None
        out.insert(1, f"Against the comparison run {c.b.run_dir}, the last loop's states at the final checkpoints "
                      f"have CKA {num(final, 2)}.")
    return limit(out)


def _moved_sentence(moved) -> str:
    """The parameter ranked first by the chart's own measure (`rank_by`), then the group that
    moved most relative to its size: two rankings, each named, so the sentence and the chart
    beside it cannot disagree about which comes first."""
    a, b = moved.steps
    sentence = f"Between steps {a:,} and {b:,}"
    if moved.parameters:
        top = moved.parameters[0]
        sentence += f" the parameter that moved most by {moved.rank_by.replace('_', ' ')} is {top.name} ({num(getattr(top, moved.rank_by), 2)})"
    g = moved.groups[0]
    rel = g.relative_change if math.isfinite(g.relative_change) else None
    sentence += ("; by group, relative to its size, " if moved.parameters else " ") + f"the {g.group} weights moved most"
    return sentence + (f" (relative change {num(rel, 2)})" if rel is not None else "") + "."

