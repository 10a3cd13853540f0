"""Findings: 2-4 plain sentences per section, generated from the section's numbers alone.

Every function takes the JSON-safe data of one section (what goes into report.json) and
returns a list of sentences; a number it cannot find is skipped, never invented. The
helpers are defensive because analyses leave a value None where it does not apply.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

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


def times(x: float | None) -> str:
    """A ratio for prose: 3.09x, 4,800x, 1.2e7x (never 4.8e+03x)."""
    if x is None:
        return "n/a"
    if x < 100:
        return f"{x:.3g}x"
    if x < 1e5:
        return f"{x:,.0f}x"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}x"


def finite(values: Sequence[Any] | None) -> list[float]:
    return [float(v) for v in (values or []) if isinstance(v, (int, float)) and math.isfinite(v)]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of y on x (None with fewer than two distinct x)."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx


def first_step_at(steps: Sequence[int], values: Sequence[float | None], threshold: float) -> int | None:
    for s, v in zip(steps, values, strict=False):
        if v is not None and v >= threshold:
            return int(s)
    return None


def _limit(sentences: list[str | None], most: int = MAX_FINDINGS) -> list[str]:
    return [s for s in sentences if s][:most]


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
    if not out and settings:
        out.append("No accuracy numbers were produced for this task.")
    return _limit(out)


# --------------------------------------------------------------------------- fixed point


def _loops(n: Any) -> str:
    return f"{n} loop{'s' if n != 1 else ''}"


def fixed_point(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    trained, horizon = d.get("trained_loops"), d.get("horizon")
    lock = d.get("lock_in") or {}
    rows = [r for r in lock.get("by_digit") or [] if r.get("n")]
    through = lock.get("through") or horizon
    settled = [r for r in rows if r.get("median") is not None and (r.get("locked_fraction") or 0) >= 0.5]
    slope_ = lock.get("slope_loops_per_link")
    chain = ""
    if slope_ is not None:
        chain = (f"each extra link of the carry chain {'adds' if slope_ > 0 else 'removes'} ~{abs(slope_):.1f} loops"
                 if abs(slope_) >= 0.1 else f"lock-in barely depends on the carry chain ({round(slope_, 2) + 0:+.2f} loops per link)")
    if rows and len(settled) == len(rows):
        slowest = max(settled, key=lambda r: r["median"])
        fastest = min(settled, key=lambda r: r["median"])
        which = ("all digits alike" if slowest["median"] == fastest["median"]
                 else f"median of the slowest, digit {slowest['digit']}")
        out.append(f"Answer digits lock in by loop {slowest['median']:.0f} ({which}; trained depth {trained})"
                   + (f"; {chain}" if chain else "") + ".")
    elif settled:
        slowest = max(settled, key=lambda r: r["median"])
        others = [str(r["digit"]) for r in rows if r not in settled]
        many = len(settled) > 1
        out.append(f"Digit{'s' if many else ''} {', '.join(str(r['digit']) for r in settled)} lock{'' if many else 's'} "
                   f"in by loop {slowest['median']:.0f} (median), but most predictions of "
                   f"digit{'s' if len(others) > 1 else ''} {', '.join(others)} "
                   f"do not stay correct through loop {through}" + (f"; {chain}" if chain else "") + ".")
    elif rows:
        fr = finite([r.get("locked_fraction") for r in rows])
        span = pct(min(fr)) if pct(min(fr)) == pct(max(fr)) else f"{pct(min(fr))}-{pct(max(fr))}"
        out.append(f"Few answer tokens lock in: only {span} of each answer position's predictions stay "
                   f"correct from some loop through loop {through}" + (f"; {chain}" if chain else "") + ".")
    steps = d.get("steps") or {}
    tol = (d.get("settings") or {}).get("halt_tol")
    below = ((steps.get("first_loop_below") or {}).get("all") or {}).get(str(tol)) if tol is not None else None
    behaviour = d.get("behaviour") or {}
    decay = (behaviour.get("step_decay_rate") or {}).get("median")
    if tol is not None:
        if below is not None:
            sentence = f"The state converges: its relative step falls below {tol} at loop {below} (median over positions)"
        else:
            sentence = f"The relative step of the state never falls below {tol} within {horizon} loops"
        if decay is not None:
            sentence += f"; past the trained depth it shrinks by a factor {decay:.2f} per loop"
        out.append(sentence + ".")
    if behaviour.get("overall") and behaviour.get("exact_match_at_trained") is not None:
        f = behaviour.get("fractions") or {}
        share = f.get(behaviour["overall"])
        out.append(
            f"Past the trained depth the state is {behaviour['overall']}"
            + (f" for {pct(share)} of problems" if share is not None else "")
            + f"; exact match is {pct(behaviour['exact_match_at_trained'])} at {_loops(trained)} and "
            f"{pct(behaviour.get('exact_match_at_horizon'))} at {_loops(horizon)}"
            + (f" (best {pct(behaviour['best_exact_match'])} at {_loops(behaviour['best_loops'])})"
               if behaviour.get("best_loops") not in (None, trained) else "") + "."
        )
    con = d.get("contraction") or {}
    at = (con.get("at") or {}).get(str(horizon)) or {}
    rq = at.get("radius_quantiles") or {}
    if rq.get("median") is not None:
        out.append(
            f"At loop {horizon} the loop map's Jacobian has median spectral radius {rq['median']:.2f}; "
            f"{pct(at.get('contracting_fraction'))} of sampled problems contract (radius < 1)."
        )
    out.append(_lock_in_by_chain(lock))
    path = d.get("path_independence") or {}
    if path.get("starts"):
        parts = [f"{name}: {pct(s['same_state_fraction'])} same end state, {pct(s['same_answer_fraction'])} same answer"
                 for name, s in path["starts"].items()]
        out.append(f"Started from other states (Anil et al.'s path independence, {path['n_problems']} problems, "
                   f"{_loops(path['horizon'])}, cosine >= {path['threshold']}): " + "; ".join(parts) + ".")
    return _limit(out, most=6)  # the loop is this toolkit's subject: convergence, lock-in and paths


def _lock_in_by_chain(lock: dict[str, Any]) -> str | None:
    """Median lock-in loop at carry chain 0 against the longest chains (>= 4), with
    Spearman's rho over digits: the numbers that say whether the loop carries the carry."""
    rows = [r for r in lock.get("by_chain") or [] if r.get("n") and r.get("median") is not None]
    base = next((r for r in rows if r["chain"] == 0), None)
    long = [r for r in rows if r["chain"] >= 4 and r["n"] >= 5]
    rho = lock.get("spearman")
    if base is None or not long or rho is None:
        return None
    n_long = sum(r["n"] for r in long)
    median_long = sum(r["median"] * r["n"] for r in long) / n_long
    return (f"By carry chain: digits with no incoming carry chain lock in at loop {base['median']:.0f} (median), "
            f"digits at the end of a chain of 4 or more at loop {median_long:.1f} (n-weighted median over chains "
            f"{', '.join(str(r['chain']) for r in long)}); Spearman {rho:.2f} between chain length and lock-in loop.")


# --------------------------------------------------------------------------- carry attention


def _head(h: dict[str, Any]) -> str:
    return f"loop {h['loop']} L{h['layer']}H{h['head']}"


def carry_attention(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    att = d.get("attention") or {}
    top = att.get("top_heads") or {}
    if top.get("alignment"):
        h = top["alignment"][0]
        out.append(
            f"Head {_head(h)} puts {pct(h['score'])} of its attention on the aligned operand digits a_i, b_i "
            f"when predicting answer digit i (chance {pct(h.get('chance'))})."
        )
    if top.get("carry_source"):
        h = top["carry_source"][0]
        chance = h.get("chance")
        weak = chance is not None and h["score"] <= 1.2 * chance
        out.append(
            f"The strongest carry-source head, {_head(h)}, puts {pct(h['score'])} on the previous digits "
            f"a_(i-1), b_(i-1) (chance {pct(chance)})"
            + ("; no head attends to the carry source clearly above chance." if weak else ".")
        )
    ab = d.get("ablation") or {}
    base = (ab.get("baseline") or {}).get("exact_match")
    harmful = (ab.get("most_harmful") or {})
    kind = "mean" if harmful.get("mean") else ("zero" if harmful.get("zero") else None)
    if kind and base is not None:
        h = harmful[kind][0]
        delta = h.get("delta_exact_match")
        if delta is not None:
            out.append(
                f"{kind.capitalize()}-ablating {_head(h)} moves exact match from {pct(base)} to {pct(base + delta)} "
                f"({100 * delta:+.0f} points), the largest effect of any single head."
            )
    probes = d.get("probes") or {}
    fd = probes.get("first_decodable")
    patch = (d.get("patching") or {}).get("first_loop_carry_present")
    if fd and fd.get("accuracy") is not None:
        sentence = (f"The carry-in is linearly decodable (probe accuracy >= {pct(probes.get('threshold'))}) "
                    f"from loop {fd['loop']} layer {fd['layer']} on ({pct(fd['accuracy'])}; chance {pct(probes.get('chance'))})")
        if patch:
            sentence += f"; patching finds it present from loop {patch['loop']} layer {patch['layer']}"
        out.append(sentence + ".")
    elif probes.get("accuracy"):
        best = max(finite([v for row in probes["accuracy"] for v in row]), default=None)
        out.append(f"No loop carries a linearly decodable carry-in above threshold (best probe accuracy {pct(best)}).")
    return _limit(out)


# --------------------------------------------------------------------------- checkpoint comparison


def checkpoint_compare(d: dict[str, Any]) -> list[str]:
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
    return _limit(out)


# --------------------------------------------------------------------------- embedding evolution


def _series_sentence(what: str, s: dict[str, Any], steps: list[int]) -> str | None:
    rho, circ = s.get("spearman_pc1") or [], s.get("circularity") or []
    if not rho or not steps:
        return None
    sentence = (f"{what}: PC1 orders them by value with |Spearman rho| {num(rho[0], 2)} at step {steps[0]:,} "
                f"and {num(rho[-1], 2)} at step {steps[-1]:,}")
    if circ and circ[-1] is not None:
        freq = (s.get("circularity_frequency") or [None])[-1]
        sentence += f"; circularity {num(circ[0], 2)} -> {num(circ[-1], 2)} (1 = a ring ordered by value" + (
            f", dominant frequency {freq})" if freq is not None else ")")
    return sentence + "."


def embedding_evolution(d: dict[str, Any]) -> list[str]:
    out: list[str | None] = []
    steps = d.get("steps") or []
    for key, what in (("tokens", "Number-token embeddings"), ("positions", "Position embeddings")):
        s = d.get(key)
        if s:
            out.append(_series_sentence(what, s, steps))
    t = d.get("tokens") or {}
    evr = t.get("explained_variance_ratio") or []
    if evr and evr[-1] and len(evr[-1]) >= 2:
        out.append(f"At the last checkpoint the first two principal components explain "
                   f"{pct((evr[-1][0] or 0) + (evr[-1][1] or 0))} of the number-token embeddings' variance.")
    for key, what in (("tokens", "number-token"), ("positions", "position")):
        s = d.get(key) or {}
        rho = s.get("spearman_pc1") or []
        if len(rho) >= 3 and len(steps) == len(rho):
            jumps = [(abs((rho[i + 1] or 0) - (rho[i] or 0)), i) for i in range(len(rho) - 1)]
            jump, i = max(jumps)
            if jump >= 0.2:
                out.append(f"The {what} ordering changed most between steps {steps[i]:,} and {steps[i + 1]:,} "
                           f"(|rho| {num(rho[i], 2)} -> {num(rho[i + 1], 2)}).")
                break
    return _limit(out)


# --------------------------------------------------------------------------- fourier


def _k(step: int) -> str:
    return f"{step / 1000:g}k" if step else "0"


def fourier(d: dict[str, Any]) -> list[str]:
    """Grokking phases, key frequencies, single-frequency neurons and the logit fit, and the
    restricted/excluded loss on the training pairs, each beside Nanda et al.'s value when the
    analysis carries it (`d["paper"]`, p = 113)."""
    out: list[str | None] = []
    paper = d.get("paper") or {}
    src = paper.get("source", "the paper")
    ph = d.get("phases") or {}
    if ph.get("grokked"):
        bounds = [0, ph.get("memorisation_end"), ph.get("circuit_formation_end"), ph.get("cleanup_end")]
        names = ("memorisation", "circuit formation", "cleanup")
        known = [f"{name} {a:,}-{b:,}" for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)
                 if a is not None and b is not None]
        sentence = "The model grokked; phases (steps): " + (", ".join(known) if known else "not resolved")
        if paper.get("phases"):
            sentence += f" ({src}: " + ", ".join(
                f"{name.replace('_', ' ')} {_k(a)}-{_k(b)}" for name, (a, b) in paper["phases"].items()) + ")"
        out.append(sentence + ".")
    elif ph:
        diag = (d.get("diagnosis") or {}).get("sentences") or ph.get("notes") or []
        out.append(f"The model did not grok: {diag[0][0].lower() + diag[0][1:]}" if diag else "The model did not grok.")
    keys = d.get("key_frequencies") or []
    shares = d.get("embed_frequency_shares") or []
    if keys and shares:
        held = sum(shares[k - 1] for k in keys if 0 < k <= len(shares) and shares[k - 1] is not None)
        sentence = (f"The residue embeddings concentrate on {len(keys)} key frequenc{'y' if len(keys) == 1 else 'ies'} "
                    f"{', '.join(map(str, keys))}, holding {pct(held)} of their non-constant Fourier energy")
        if paper.get("key_frequencies"):
            pk = paper["key_frequencies"]
            sentence += f" ({src}: {len(pk)}, namely {', '.join(map(str, pk))}; which ones depends on the seed)"
        out.append(sentence + ".")
    neurons = d.get("neurons") or {}
    fit = d.get("logit_fit") or {}
    parts = []
    if neurons.get("share_single_frequency") is not None and neurons.get("n_neurons"):
        part = (f"{neurons['n_single_frequency']}/{neurons['n_neurons']} = {pct(neurons['share_single_frequency'], 1)} "
                f"of the MLP neurons are single-frequency (>= {pct(neurons.get('threshold'))} of their variance "
                f"from one frequency)")
        if paper.get("n_single_frequency"):
            part += (f" against {paper['n_single_frequency']}/{paper['n_neurons']} = "
                     f"{pct(paper['share_single_frequency'], 1)} in {src}")
        parts.append(part)
    if fit.get("fraction_explained") is not None:
        parts.append(f"cos(w_k(a+b-c)) over the key frequencies explains {pct(fit['fraction_explained'])} of the logit variance")
    if parts:
        sentence = "; ".join(parts)
        out.append(sentence[0].upper() + sentence[1:] + ".")
    fl = d.get("final_losses") or {}
    if fl.get("restricted_loss") is not None and fl.get("excluded_loss") is not None:
        rv = d.get("restricted_vs_test") or {}
        yardstick = fl.get("full_loss_train", fl.get("full_loss"))
        sentence = (f"On the training pairs, keeping only the key frequencies gives loss {num(fl['restricted_loss'])} "
                    f"(unablated {num(yardstick)}) and removing them {num(fl['excluded_loss'])}")
        if rv.get("restricted_peak") is not None and rv.get("restricted_peak_over_final") is not None:
            sentence += (f"; the restricted loss ended {times(rv['restricted_peak_over_final'])} below its "
                         f"post-memorisation peak ({num(rv['restricted_peak'])} at step {rv['restricted_peak_step']:,}, "
                         f"{num(rv['restricted_final'])} at step {rv['final_step']:,}) while the excluded loss went "
                         f"from {num(rv.get('excluded_at_peak'))} to {num(rv.get('excluded_final'))}")
        if rv.get("restricted_half_fall_step") is not None and rv.get("test_half_fall_step") is not None:
            r_step, t_step = rv["restricted_half_fall_step"], rv["test_half_fall_step"]
            when = "before" if r_step < t_step else "after" if r_step > t_step else "at the same checkpoint as"
            sentence += (f"; it was halfway from peak to minimum on a log10 scale at step {r_step:,}, {when} the "
                         f"test loss (step {t_step:,})")
        out.append(sentence + ".")
    if not out:
        lines = d.get("findings")
        if isinstance(lines, list):
            out = [x for x in lines if isinstance(x, str)]
    return _limit(out)


# --------------------------------------------------------------------------- registry

FINDINGS = {
    "model_card": model_card,
    "evaluation": evaluation,
    "fixed_point": fixed_point,
    "carry_attention": carry_attention,
    "checkpoint_compare": checkpoint_compare,
    "embedding_evolution": embedding_evolution,
    "fourier": fourier,
}


def findings_for(key: str, data: dict[str, Any]) -> list[str]:
    """The findings of section `key`; a sentence generator that trips over a changed
    result layout logs the problem and yields no sentences rather than failing the section."""
    fn = FINDINGS.get(key)
    if fn is None:
        return []
    try:
        return fn(data)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as e:
        logger.warning("findings for %s could not be generated: %r", key, e)
        return []
