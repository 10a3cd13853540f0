"""Findings of the report's own sections (model card, evaluation): 2-4 plain sentences each,
generated from the section's numbers alone. Each analysis writes its own sentences in its
result's `findings()`, beside its numbers.
"""

from __future__ import annotations

from typing import Any

from abacus_interp.prose import finite, first_step_at, limit, num, pct, slope

# --------------------------------------------------------------------------- model card


def model_card(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    p = d.get("parameters") or {}
    total, block = p.get("total_parameters"), p.get("looped_block_parameters")
    model = (d.get("config") or {}).get("model") or {}
    if total and block is not None:
        n_loops = model.get("n_loops")
        if n_loops == 1:
            out.append(f"The block of {model.get('n_layers', '?')} layer(s) runs once (no looping) and holds "
                       f"{block:,} of the model's {total:,} parameters ({pct(block / total)}).")
        else:
            out.append(
                f"The looped block holds {block:,} of the model's {total:,} parameters "
                f"({pct(block / total)}) and runs {n_loops} times: an effective depth of "
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
            f"{num(sum(loss[-k:]) / k)} ({f'mean of the last {k} logged values' if k > 1 else 'last logged value'})."
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
        label = name.replace("_exact_match", "").replace("in_distribution", "in-distribution").replace("_", " ")
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
    return limit(out)


# --------------------------------------------------------------------------- evaluation


def _edge_case_failures(edge: dict[str, Any] | None) -> str | None:
    """The hand-picked in-distribution problems greedy decoding gets wrong, named: a mean
    exact match near 100% can hide a whole family of them (small-add's 99999999+99999999)."""
    cases = (edge or {}).get("cases") or []
    inside = [c for c in cases if c["in_distribution"]]
    failed = [c for c in inside if not c["passed"]]
    if not failed:
        return None
    named = "; ".join(f"{c['name']} gives {' / '.join(c['answers'])}, not {' / '.join(c['expected'])}"
                      for c in failed[:3])
    return f"{len(failed)} of {len(inside)} in-distribution edge cases fail under greedy decoding: {named}."


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
    edge_failures = _edge_case_failures(d.get("edge_cases"))
    if edge_failures:
        out.append(edge_failures)
    if lengths and lengths.get("lengths"):
        ls, em = lengths["lengths"], lengths["exact_match"]
        trained = lengths.get("trained_max")
        below = next((n for n, v in zip(ls, em, strict=False) if v is not None and v < 0.5), None)
        if below is None:
            out.append(f"With equal-length operands, exact match stays at or above 50% up to {ls[-1]} digits "
                       f"(trained up to {trained}; {pct(em[-1])} at {ls[-1]}).")
        elif trained and below > trained:
            out.append(f"With equal-length operands, exact match first drops below 50% at {below} digits: the model "
                       f"extrapolates to {below - 1} digits, {(below - 1) / trained:.1f}x the trained {trained}.")
        else:
            out.append(f"With equal-length operands, exact match already drops below 50% at {below} digit"
                       f"{'s' if below != 1 else ''}, inside the trained range (up to {trained}).")
    if splits:
        parts = [f"{name} {pct(s.get('exact_match'), 1)}" for name, s in splits.items()]
        out.append("Accuracy on the full splits: " + ", ".join(parts) + ".")
        losses = [(name, s.get("loss")) for name, s in splits.items() if s.get("loss") is not None]
        if len(losses) >= 2:
            (n1, l1), (n2, l2) = losses[0], losses[1]
            ratio = f", {l2 / l1:.3g}x the {n1} loss" if l1 and l1 > 0 else ""
            out.append(f"The answer's cross-entropy is {num(l1)} on the {n1} split and {num(l2)} on the {n2} split{ratio}.")
    if loops and loops.get("sets") and len(loops.get("loops") or []) > 1:
        r = loops["loops"]
        trained = loops.get("trained_loops")
        name = "in_distribution" if "in_distribution" in loops["sets"] else ("test" if "test" in loops["sets"] else next(iter(loops["sets"])))
        em = loops["sets"][name]["exact_match"]
        pairs = [(x, v) for x, v in zip(r, em, strict=False) if v is not None]
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
                ref = at_trained if at_trained is not None else best
                change = ("holds" if abs(deepest - ref) < max(0.02, 0.1 * ref)
                          else ("falls" if deepest < ref else "rises"))
                sentence += f"; running {deepest_r} loops gives {pct(deepest)} (accuracy {change} past training)"
            out.append(sentence + ".")
    if carry and carry.get("buckets"):
        b = [r for r in carry["buckets"] if r.get("exact_match") is not None]
        xs = [5 if r["bucket"] == "5+" else int(r["bucket"]) for r in b]
        ys = [r["exact_match"] for r in b]
        s = slope(xs, ys)
        if s is not None and b:
            ends = f"{b[0]['bucket']} carries: {pct(b[0]['exact_match'])}, {b[-1]['bucket']}: {pct(b[-1]['exact_match'])}"
            if abs(100 * s) < 1:
                out.append(f"Exact match barely depends on the longest carry cascade ({ends}).")
            else:
                out.append(f"Each extra carry in the longest cascade {'costs' if s < 0 else 'adds'} about "
                           f"{abs(100 * s):.1f} points of exact match ({ends}).")
    if not out and d.get("perplexity"):
        # a task with no digit grid or fixed split, run by a model with one depth: the plain
        # held-out scores are all there is
        for name, p in d["perplexity"].items():
            out.append(f"On {p['n']} held-out {name.replace('_', '-')} problems, exact match is "
                       f"{pct(p['exact_match'])} and the answer's cross-entropy {num(p['loss'])} per token.")
    if not out and settings:
        out.append("No accuracy numbers were produced for this task.")
    return limit(out)
