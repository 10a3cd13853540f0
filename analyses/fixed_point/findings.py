"""The fixed-point analysis in sentences: lock-in, convergence, behaviour past the trained
depth, contraction, lock-in by carry chain and path independence, one sentence each, written
from the typed `FixedPointSummary`. A part that was not computed gets a sentence saying so
and why, so a missing part never silently drops its finding."""

from __future__ import annotations

from analyses.prose import SIGNIFICANCE, finite, limit, pct

from .result import Behaviour, Contraction, FixedPointSummary, LockIn, PathIndependence


def _loops(n: int | None) -> str:
    return f"{n} loop{'s' if n != 1 else ''}"


def findings(s: FixedPointSummary) -> list[str]:
    # the loop is this toolkit's subject: every part gets its sentence, so the section may use all six
    return limit([
        _lock_in(s.lock_in, s.trained_loops, s.horizon),
        _convergence(s),
        _behaviour(s.behaviour, s.trained_loops, s.horizon),
        _contraction(s.contraction, s.horizon, s.behaviour.overall),
        _lock_in_by_chain(s.lock_in),
        _path(s.path_independence),
    ], most=6)


def _chain_clause(lock: LockIn) -> str:
    slope, pvalue = lock.slope_loops_per_link, lock.slope_pvalue
    if slope is None:
        return ""
    if pvalue is None or pvalue >= SIGNIFICANCE:
        test = "no test" if pvalue is None else f"p = {pvalue:.2g}"
        return (f"; lock-in shows no dependence on the carry chain distinguishable from noise "
                f"({slope + 0:+.2f} loops per link, {test}, linear regression)")
    return (f"; each extra link of the carry chain {'adds' if slope > 0 else 'removes'} ~{abs(slope):.2f} loops "
            f"(p = {pvalue:.1g}, linear regression)")


def _lock_in(lock: LockIn, trained: int, horizon: int) -> str:
    rows = [r for r in lock.by_digit if r.n]
    if not rows:
        return "No answer digit was measured, so no digit has a lock-in loop to report."
    chain = _chain_clause(lock)
    settled = [r for r in rows if r.median is not None and (r.locked_fraction or 0) >= 0.5]
    if len(settled) == len(rows):
        slowest = max(settled, key=lambda r: r.median)
        fastest = min(settled, key=lambda r: r.median)
        which = "all digits alike" if slowest.median == fastest.median else f"median of the slowest, digit {slowest.digit}"
        return f"Answer digits lock in by loop {slowest.median:.0f} ({which}; trained depth {trained}){chain}."
    if settled:
        slowest = max(settled, key=lambda r: r.median)
        others = [str(r.digit) for r in rows if r not in settled]
        many = len(settled) > 1
        return (f"Digit{'s' if many else ''} {', '.join(str(r.digit) for r in settled)} lock{'' if many else 's'} "
                f"in by loop {slowest.median:.0f} (median), but most predictions of "
                f"digit{'s' if len(others) > 1 else ''} {', '.join(others)} "
                f"do not stay correct through loop {horizon}{chain}.")
    fr = finite([r.locked_fraction for r in rows])
    span = pct(min(fr)) if pct(min(fr)) == pct(max(fr)) else f"{pct(min(fr))}-{pct(max(fr))}"
    return (f"Few answer tokens lock in: only {span} of each answer position's predictions stay "
            f"correct from some loop through loop {horizon}{chain}.")


def _convergence(s: FixedPointSummary) -> str:
    tol = s.settings.halt_tol
    # run() always measures the crossing of halt_tol (it is added to the tolerances)
    below = s.steps.first_loop_below["all"][str(tol)]
    if below is not None:
        sentence = f"The state converges: its relative step falls below {tol} at loop {below} (median over positions)"
    else:
        sentence = f"The relative step of the state never falls below {tol} within {s.horizon} loops"
    rate = s.behaviour.relative_step_decay_rate
    if rate is not None and rate.median is not None:
        sentence += (f"; past the trained depth it shrinks by a factor {rate.median:.2f} per loop" if rate.median < 1
                     else f"; past the trained depth it does not shrink (factor {rate.median:.2f} per loop)")
    return sentence + "."


def _behaviour(b: Behaviour, trained: int, horizon: int) -> str:
    exact = (f"exact match is {pct(b.exact_match_at_trained)} at {_loops(trained)} and "
             f"{pct(b.exact_match_at_horizon)} at {_loops(horizon)}"
             + (f" (best {pct(b.best_exact_match)} at {_loops(b.best_loops)})"
                if b.best_loops not in (None, trained) else ""))
    if b.overall is None:
        return f"Past the trained depth the state is not classified ({b.note or 'no labels'}); {exact}."
    share = b.fractions[b.overall] if b.fractions else None
    # "converging" is about the state's step, not the answer: say so when the answer is lost
    lost = b.exact_match_at_horizon < b.exact_match_at_trained - 0.05
    what = " (its relative step shrinks), but not to the answer" if b.overall == "converging" and lost else ""
    return (f"Past the trained depth the state is {b.overall}"
            + (f" for {pct(share)} of problems" if share is not None else "") + f"{what}; {exact}.")


def _contraction(con: Contraction | None, horizon: int, overall: str | None = None) -> str:
    if con is None:
        return "The Jacobian of the loop map was not estimated (n_jacobian=0), so contraction is not measured."
    at = con.at[str(horizon)]  # estimated at the trained depth and at the horizon
    if at.radius_quantiles.median is None:
        return f"The Jacobian's spectral radius at loop {horizon} could not be estimated (no finite value)."
    sentence = (f"At loop {horizon} the loop map's Jacobian has median spectral radius "
                f"{at.radius_quantiles.median:.2f}; {pct(at.contracting_fraction)} of sampled problems contract "
                f"(radius < 1)")
    if overall == "converging" and at.contracting_fraction is not None and at.contracting_fraction < 0.5:
        # both hold at once when the state slows down along a direction the map does not pull back
        sentence += ": the shrinking step is a slowing drift, not an attracting fixed point"
    return sentence + "."


def _lock_in_by_chain(lock: LockIn) -> str:
    """Median lock-in loop at carry chain 0 against the longest chains (>= 4), with
    Spearman's rho over digits: the numbers that say whether the loop carries the carry."""
    if lock.by_chain is None:
        return "The task's answers have no carry chains, so lock-in is not compared by chain length."
    rows = [r for r in lock.by_chain if r.n and r.median is not None]
    base = next((r for r in rows if r.chain == 0), None)
    long = [r for r in rows if r.chain >= 4 and r.n >= 5]
    rho = lock.spearman
    if base is None or not long or rho is None:
        missing = ("no digit without an incoming carry chain locks in" if base is None
                   else "fewer than 5 locked digits end a chain of 4 or more" if not long
                   else "lock-in or chain length does not vary, so Spearman's rho is undefined")
        return f"Lock-in is not compared by carry chain: {missing}."
    n_long = sum(r.n for r in long)
    median_long = sum(r.median * r.n for r in long) / n_long
    return (f"By carry chain: digits with no incoming carry chain lock in at loop {base.median:.0f} (median), "
            f"digits at the end of a chain of 4 or more at loop {median_long:.1f} (n-weighted median over chains "
            f"{', '.join(str(r.chain) for r in long)}); Spearman {rho:.2f} between chain length and lock-in loop.")


def _path(path: PathIndependence | None) -> str:
    if path is None:
        return "Path independence was not tested (n_path=0)."
    if not path.starts:
        return "Path independence was not tested: no other start states were given (path_starts is empty)."
    parts = [f"{name}: {pct(a.same_state_fraction)} same end state, {pct(a.same_answer_fraction)} same answer"
             for name, a in path.starts.items()]
    return (f"Started from other states (Anil et al.'s path independence, {path.n_problems} problems, "
            f"{_loops(path.horizon)}, cosine >= {path.threshold}): " + "; ".join(parts) + _wrong_clause(path) + ".")


def _wrong_clause(path: PathIndependence) -> str:
    """How many of the wrong answers every start reaches again: wrong fixed points of the map,
    not of the start (empty when the reference got none wrong, or the report predates it)."""
    kept = {name: a.same_wrong_answer_fraction for name, a in path.starts.items()}
    if not path.reference_wrong or None in kept.values():
        return ""
    shares = ", ".join(f"{name} {pct(share)}" for name, share in kept.items())
    # the reading follows the shares as printed: every one, or fewer than half from every start
    printed = [round(100 * share) for share in kept.values()]
    reading = ("; the loop's map, not its start, makes them" if min(printed) == 100
               else "; most depend on where the loop began" if max(printed) < 50 else "")
    return (f"; of the {path.reference_wrong} it answers wrong from its own start, the share each other start "
            f"answers the same wrong way: {shares}{reading}")
