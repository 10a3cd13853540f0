"""Findings: 2-4 plain sentences per section, generated from the section's numbers alone.

Every function takes the JSON-safe data of one section (what goes into report.json) and
returns a list of sentences; a number it cannot find is skipped, never invented. The
helpers are defensive because analyses leave a value None where it does not apply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MAX_FINDINGS = 4


# --------------------------------------------------------------------------- helpers


def pct(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def num(x: float | None, sig: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e6):
        return f"{int(x):,}"
    return f"{x:.{sig}g}"


def finite(values: Sequence[Any] | None) -> list[float]:
    return [float(v) for v in (values or []) if isinstance(v, (int, float)) and math.isfinite(v)]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of y on x (None with fewer than two distinct x)."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx


def first_step_at(steps: Sequence[int], values: Sequence[float | None], threshold: float) -> int | None:
    for s, v in zip(steps, values):
        if v is not None and v >= threshold:
            return int(s)
    return None


def _limit(sentences: list[str | None]) -> list[str]:
    return [s for s in sentences if s][:MAX_FINDINGS]


# --------------------------------------------------------------------------- model card


def model_card(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    p = d.get("parameters") or {}
    total, block = p.get("total_parameters"), p.get("looped_block_parameters")
    model = (d.get("config") or {}).get("model") or {}
    if total and block is not None:
        out.append(
            f"The looped block holds {block:,} of the model's {total:,} parameters "
            f"({pct(block / total)}) and runs {model.get('n_loops', '?')} times: an effective depth of "
            f"{p.get('effective_depth', '?')} layers with the compute of a "
            f"{p.get('unrolled_equivalent_parameters', 0):,}-parameter unrolled model."
        )
    curves = d.get("training_curves") or {}
    steps = curves.get("step") or []
    loss = finite(curves.get("loss"))
    if steps and loss:
        k = max(1, len(loss) // 20)
        out.append(
            f"Training ran {steps[-1]:,} steps; the training loss fell from {num(loss[0])} to "
            f"{num(sum(loss[-k:]) / k)} (mean of the last {k} logged values)."
        )
    evals = d.get("eval_curves") or {}
    for name in sorted(evals, key=lambda n: (0 if ("in_distribution" in n or "test" in n) else 1, n)):
        c = evals[name]
        values = c.get("value") or []
        fv = finite(values)
        if not fv:
            continue
        best = max(fv)
        s50, s90 = first_step_at(c["step"], values, 0.5), first_step_at(c["step"], values, 0.9)
        label = name.replace("_exact_match", "").replace("_", " ")
        reached = f"{label} exact match reached {pct(best)} (last logged: {pct(fv[-1])})"
        if s90 is not None:
            reached += f"; it first passed 90% at step {s90:,}"
        elif s50 is not None:
            reached += f"; it first passed 50% at step {s50:,}"
        out.append(reached[0].upper() + reached[1:] + ".")
        if len(out) >= 3:
            break
    grok = d.get("grokking")
    if grok and grok.get("train_step") is not None and grok.get("test_step") is not None:
        out.append(
            f"Train accuracy passed {pct(grok['threshold'])} at step {grok['train_step']:,} and test accuracy "
            f"at step {grok['test_step']:,}: generalisation came {grok['test_step'] - grok['train_step']:,} steps "
            "after memorisation."
        )
    return _limit(out)


# --------------------------------------------------------------------------- evaluation


def evaluation(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    grid, lengths, loops, carry, splits = (d.get(k) for k in ("grid", "lengths", "loops", "carry", "splits"))
    settings = d.get("settings") or {}
    if grid:
        lo, hi = grid["trained_digits"]
        ind, ood = grid.get("in_distribution_exact_match"), grid.get("out_of_distribution_exact_match")
        top = max(grid["digits_a"])
        sentence = f"Exact match is {pct(ind)} on operands of {lo}-{hi} digits (the trained range)"
        if ood is not None:
            sentence += f" and {pct(ood)} beyond it, up to {top} digits ({top / hi:.1f}x the trained length)"
        out.append(sentence + ".")
    if lengths and lengths.get("lengths"):
        ls, em = lengths["lengths"], lengths["exact_match"]
        good = [n for n, v in zip(ls, em) if v is not None and v >= 0.9]
        run_of_good = 0
        for n, v in zip(ls, em):
            if v is None or v < 0.9:
                break
            run_of_good = n
        trained = lengths.get("trained_max")
        if run_of_good:
            out.append(
                f"With equal-length operands, exact match stays at or above 90% up to {run_of_good} digits "
                f"(trained up to {trained}); at {ls[-1]} digits it is {pct(em[-1])}."
            )
        elif not good:
            out.append(f"With equal-length operands, no length reaches 90% exact match (best {pct(max(finite(em), default=None))}).")
    if splits:
        parts = [f"{name} {pct(s.get('exact_match'), 1)}" for name, s in splits.items()]
        out.append("Accuracy on the full splits: " + ", ".join(parts) + ".")
    if loops and loops.get("sets"):
        r = loops["loops"]
        trained = loops.get("trained_loops")
        name = "in_distribution" if "in_distribution" in loops["sets"] else ("test" if "test" in loops["sets"] else next(iter(loops["sets"])))
        em = loops["sets"][name]["exact_match"]
        pairs = [(x, v) for x, v in zip(r, em) if v is not None]
        if pairs:
            best_r, best = max(pairs, key=lambda p: (p[1], -p[0]))
            at_trained = dict(pairs).get(trained)
            deepest_r, deepest = pairs[-1]
            sentence = f"On the {name.replace('_', '-')} set, accuracy peaks at {best_r} loop{'s' if best_r != 1 else ''} ({pct(best)})"
            if at_trained is not None and trained != best_r:
                sentence += f"; at the trained depth of {trained} it is {pct(at_trained)}"
            elif trained == best_r:
                sentence += ", the trained depth"
            if deepest_r > (trained or 0):
                change = "holds" if abs(deepest - (at_trained if at_trained is not None else best)) < 0.05 else "changes"
                sentence += f", and running {deepest_r} loops gives {pct(deepest)} ({'accuracy ' + change})"
            out.append(sentence + ".")
    if carry and carry.get("buckets"):
        b = [r for r in carry["buckets"] if r.get("exact_match") is not None]
        xs = [5 if r["bucket"] == "5+" else int(r["bucket"]) for r in b]
        ys = [r["exact_match"] for r in b]
        s = slope(xs, ys)
        if s is not None and b:
            trend = "costs" if s < 0 else "adds"
            out.append(
                f"Each extra carry in the longest cascade {trend} about {abs(100 * s):.1f} points of exact match "
                f"({b[0]['bucket']} carries: {pct(b[0]['exact_match'])}, {b[-1]['bucket']}: {pct(b[-1]['exact_match'])})."
            )
    if not out and settings:
        out.append("No accuracy numbers were produced for this task.")
    return _limit(out)


# --------------------------------------------------------------------------- registry

FINDINGS = {
    "model_card": model_card,
    "evaluation": evaluation,
}


def findings_for(key: str, data: dict[str, Any]) -> list[str]:
    fn = FINDINGS.get(key)
    return fn(data) if fn else []
