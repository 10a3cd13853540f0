"""The findings of a checkpoint comparison, from the numbers of its `to_dict()`."""

from __future__ import annotations

from typing import Any

from abacus_interp.prose import finite, first_step_at, limit, num, pct


def findings(d: dict[str, Any]) -> list[str]:
    """Up to four sentences from the numbers of `to_dict()`, written once here."""
    out: list[str | None] = []
    a = d.get("a") or {}
    steps = a.get("steps") or []
    signal = d.get("signal", "representation")
    cps = (d.get("change_points") or {}).get(signal) or []
    if cps:
        first = cps[0]
        others = ", ".join(f"{c['from_step']:,}-{c['step']:,}" for c in cps[1:3])
        out.append(
            f"The {signal} changed fastest between steps {first['from_step']:,} and {first['step']:,}"
            + (f" (next: {others})" if others else "") + "."
        )
    vs_final = a.get("cka_vs_final") or []
    if vs_final and steps:
        last_loop = vs_final[-1]
        s90 = first_step_at(steps, last_loop, 0.9)
        out.append(
            f"The last loop's state at step {steps[0]:,} has linear CKA {num(last_loop[0], 2)} with the final checkpoint's"
            + (f"; it passes 0.9 at step {s90:,}" if s90 is not None and s90 != steps[-1] else "") + "."
        )
    em = finite(a.get("problem_exact_match"))
    if em and steps:
        s50 = first_step_at(steps, a.get("problem_exact_match"), 0.5)
        out.append(
            f"On the fixed problem set exact match goes from {pct(em[0])} to {pct(em[-1])} over {len(steps)} checkpoints"
            + (f", first reaching 50% at step {s50:,}" if s50 is not None else "") + "."
        )
    moved = d.get("moved") or {}
    groups = moved.get("groups") or []
    if groups and moved.get("steps"):
        g = groups[0]
        rel = g.get("relative_change")
        out.append(
            f"Between steps {moved['steps'][0]:,} and {moved['steps'][1]:,} the {g['group']} weights moved most"
            + (f" (relative change {num(rel, 2)})" if rel is not None else "") + "."
        )
    matched = d.get("matched_cka")
    b = d.get("b") or {}
    if matched and b:
        final = matched[-1][-1] if matched[-1] else None
        out.insert(1, f"Against the comparison run {b.get('run_dir')}, the last loop's states at the final checkpoints have CKA {num(final, 2)}.")
    return limit(out)
