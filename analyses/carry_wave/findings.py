"""The carry-wave findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from .analysis import slope_text


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
    if locked:
        out.append(f"The carry wave of {w.human} (chain of {w.chain}): the units digit is right by loop "
                   f"{w.lock_in[0]}, the last answer digit by loop {w.lock_in[-1]}"
                   + ("" if len(locked) == len(w.lock_in) else f"; {len(w.lock_in) - len(locked)} digits never right")
                   + ".")
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
