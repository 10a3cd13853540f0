"""The carry-wave findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from .analysis import LinearFit, slope_text


def carry_wave_findings(result) -> list[str]:
    acc, n = result.accuracy, result.trained_digits
    out = []
    uniform = [r for r in acc.rows if r.chain is None]
    if uniform:
        parts = ", ".join(f"{r.exact_match:.0%} at {r.digits} digits ({r.digits / n:g}x, median {r.loops_median:g} loops)"
                          for r in uniform)
        out.append(f"Uniform problems (both operands of exactly D digits, n={uniform[0].n} each), trained on up to "
                   f"{n} digits, adaptive loops: {parts}.")
    chains = [r for r in acc.rows if r.chain is not None]
    if chains:
        parts = ", ".join(f"{r.exact_match:.0%} for a chain of {r.chain} in {r.digits} digits "
                          f"(median {r.loops_median:g} loops, at most {r.loops_max})" for r in chains)
        out.append(f"Planted carry chains (n={chains[0].n} each): {parts}.")
    if result.lock_in:  # one sentence for every sample, so the section stays short
        parts = []
        for fit in result.lock_in:
            never = f", {fit.never_locked} digits still wrong at loop {result.horizon}" if fit.never_locked else ""
            parts.append(f"{fit.label} (n={fit.n_problems}): {slope_text(fit.fit)}{never}")
        out.append("Lock-in loop against carry distance: " + "; ".join(parts) + ".")
    h = result.halting
    out.append(f"Adaptive halting spends {slope_text(h.fit)} of a problem's longest chain ({h.label}); "
               f"{sum(h.converged)}/{len(h.converged)} problems converged before the cap.")
    w = result.wave
    locked = [lo for lo in w.lock_in if lo is not None]
    wave = ""
    if locked:  # the wave and the patch that moves it: one finding
        wave = (f"The carry wave of {w.human} (chain of {w.chain}): the units digit is right by loop "
                f"{w.lock_in[0]}, the last answer digit by loop {w.lock_in[-1]}"
                + ("" if len(locked) == len(w.lock_in) else f"; {len(w.lock_in) - len(locked)} digits never right")
                + ". ")
    out.append(wave + delayed_carry_finding(result.delayed))
    c = result.convergence
    if c.exact_match_not_converged is None:
        out.append(f"At a cap of {c.cap} loops every one of {c.n} problems ({c.label}) converged "
                   f"(exact match {c.exact_match_converged:.0%}): nothing to compare.")
    elif c.exact_match_converged is None:
        out.append(f"At a cap of {c.cap} loops none of {c.n} problems ({c.label}) converged; exact match "
                   f"{c.exact_match_not_converged:.0%}.")
    else:
        out.append(f"Non-convergence predicts a wrong answer (Anil et al. 2022): at a cap of {c.cap} loops, "
                   f"{c.label}, exact match is {c.exact_match_converged:.0%} among the {c.converged:.0%} that "
                   f"converged and {c.exact_match_not_converged:.0%} among the rest (n={c.n}).")
    return out


def delayed_carry_finding(d) -> str:
    """Where the delayed-carry patch puts each chain digit's lock-in, as one sentence."""
    start = [lo for lo in d.lock_in[0]] if d.switch_loops[0] == 0 else []
    text = f"Patching the carry in late on {d.clean} (a chain of {d.chain}, horizon {d.horizon}): "
    if start:
        known = [lo for lo in start if lo is not None]
        text += (f"from the start state {len(known)}/{len(start)} chain digits read the carried answer by loop "
                 f"{max(known)}, " if known else "from the start state no chain digit reads the carried answer, ")
    delayed = [(s, row) for s, row in zip(d.switch_loops, d.lock_in, strict=True) if s > 0]
    if not delayed:
        return text + "and no later switch was measured."
    s_last, last = delayed[-1]
    digits = [k for k, lo in enumerate(last, start=1) if lo is not None]
    fit = LinearFit.of(digits, [last[k - 1] - s_last for k in digits])
    offsets = [[row[k] - s for s, row in delayed if row[k] is not None] for k in range(d.chain)]
    spread = max((max(o) - min(o) for o in offsets if o), default=0)
    switches = ", ".join(str(s) for s, _ in delayed)
    return text + (f"switching the units column from killing to generating the carry after s loops (s = {switches}) "
                   f"makes digit k lock in at {_line(fit)} loops after the switch (at s = {s_last}), each digit's "
                   f"lock-in minus s varying by at most {spread} loop{'' if spread == 1 else 's'} over the switches: the carry climbs from "
                   "where it is generated, when it is.")


def _line(fit: LinearFit) -> str:
    if fit.slope is None:
        return "a constant number of"
    r2 = "" if fit.r2 is None else f", R^2 {fit.r2:.2f}"
    return f"{fit.intercept:.1f} + {fit.slope:.2f} k (n={fit.n}{r2})"
