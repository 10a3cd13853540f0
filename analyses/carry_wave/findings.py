"""The carry-wave findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from analyses.prose import LinearFit


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
    halting = (f"Loops spent by adaptive halting against a problem's longest chain ({h.label}): {slope_text(h.fit)}; "
               f"{sum(h.converged)}/{len(h.converged)} problems converged before the cap.")
    if result.lock_in:
        out[-1] += " " + halting
    else:
        out.append(halting)
    w = result.wave
    locked = [lo for lo in w.lock_in if lo is not None]
    wave = ""
    if locked:  # the wave and the patch that moves it: one finding
        wave = (f"The carry wave of {w.human} (chain of {w.chain}): the units digit is right by loop "
                f"{w.lock_in[0]}, the last answer digit by loop {w.lock_in[-1]}"
                + ("" if len(locked) == len(w.lock_in) else f"; {len(w.lock_in) - len(locked)} digits never right")
                + ". ")
    out.append(wave + delayed_carry_finding(result.delayed))
    heads = heads_finding(result)
    if heads:
        out.append(heads)
    c = result.convergence
    if c.exact_match_not_converged is None:
        out.append(f"At a cap of {c.cap} loops every one of {c.n} problems ({c.label}) converged "
                   f"(exact match {c.exact_match_converged:.0%}): nothing to compare.")
    elif c.exact_match_converged is None:
        out.append(f"At a cap of {c.cap} loops none of {c.n} problems ({c.label}) converged; exact match "
                   f"{c.exact_match_not_converged:.0%}.")
    else:
        predicts = c.exact_match_not_converged < c.exact_match_converged - BREAK_MARGIN
        out.append(f"Does non-convergence predict a wrong answer (Anil et al. 2022)? "
                   f"{'Yes' if predicts else 'Not here'}: at a cap of {c.cap} loops, "
                   f"{c.label}, exact match is {c.exact_match_converged:.0%} among the {c.converged:.0%} that "
                   f"converged and {c.exact_match_not_converged:.0%} among the rest (n={c.n}).")
    out[-1] += " " + path_finding(result.path_independence)
    return out


# a head "reads" a key group when it puts at least this share of its attention there
READ_FLOOR = 0.05
# a knockout "breaks" the model when exact match falls by more than this
BREAK_MARGIN = 0.1


def heads_finding(result) -> str | None:
    """Which head reads the carry channel (attention), and whose reads are needed (knockout)."""
    reading, k = result.heads_far, result.knockout
    if reading is None or k is None:
        return None
    last = len(reading.mass) - 1
    aligned = [row[reading.groups.index("aligned a_i, b_i")] for row in reading.mass[last]]
    text = (f"In loop {last + 1} ({reading.label}, n={reading.n_problems}) the heads put {min(aligned):.0%}-"
            f"{max(aligned):.0%} of an answer position's attention on the aligned digits a_i, b_i")
    readers = []
    for group in ("answer slot below", "carry source a_(i-1), b_(i-1)"):
        head, share = reading.top_head(group, last)
        readers.append(f"{head} reads the {group} ({share:.0%})" if share >= READ_FLOOR
                       else f"no head puts {READ_FLOOR:.0%} on the {group}")
    text += "; " + " and ".join(readers) + "."
    if k.baseline < 0.5:
        return text + (f" Knockouts say nothing here: the intact model is at {k.baseline:.0%} on {k.label} "
                       f"(n={k.n_problems}).")
    broken = []
    for group, row in zip(k.groups, k.exact_match, strict=True):
        drops = [(head, em) for head, em in zip(k.heads, row, strict=True) if em < k.baseline - BREAK_MARGIN]
        kept = [em for em in row if em >= k.baseline - BREAK_MARGIN]
        if drops:
            broken.append(f"denying {', '.join(h for h, _ in drops)} the {group} gives "
                          + ", ".join(f"{em:.0%}" for _, em in drops)
                          + (f" (the other heads: {_share_range(kept)})" if kept else ""))
    if broken:
        text += (f" Exact match when one head may not attend to one key group in any loop ({k.label}, "
                 f"n={k.n_problems}, intact {k.baseline:.0%}): " + "; ".join(broken) + ".")
    else:
        text += (f" No single head is needed for {', '.join(k.groups)} ({k.label}, n={k.n_problems}, "
                 f"intact {k.baseline:.0%}).")
    return text


def path_finding(rows) -> str:
    if not rows:
        return ""
    worst = min(r.worst_same_answer() for r in rows)
    lengths = ", ".join(str(r.digits) for r in rows)
    starts = ", ".join(s.start for s in rows[0].starts)
    share = "every answer equals" if worst == 1 else f"at least {worst:.0%} of answers equal"
    return (f"Path independence (uniform problems of {lengths} digits, n={rows[0].n_problems} each, {rows[0].horizon} loops, "
            f"starts {starts}): {share} the zero start's at every length.")


def _share_range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.0%}" if low == high else f"{low:.0%}-{high:.0%}"


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


def slope_text(fit: LinearFit) -> str:
    return fit.describe("loops per link")
