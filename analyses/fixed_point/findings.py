"""The fixed-point analysis in sentences: convergence, lock-in by carry chain, contraction,
path independence, each written from the numbers of `FixedPointResult.to_dict()`."""

from __future__ import annotations

from typing import Any

from abacus_interp.prose import finite, limit, pct


def _loops(n: Any) -> str:
    return f"{n} loop{'s' if n != 1 else ''}"


def findings(d: dict[str, Any]) -> list[str]:
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
    return limit(out, most=6)  # the loop is this toolkit's subject: convergence, lock-in and paths


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
