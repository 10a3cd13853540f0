"""The embedding evolution's findings: up to four sentences read from the typed result.

The result types are read, not imported: result.py imports this module when `findings()` is
called, so `r` is an `EmbeddingEvolution` and `s` one of its `EmbeddingSeries`, unannotated."""

from __future__ import annotations

import math

import numpy as np

from analyses.prose import limit, num, pct


def _values(xs) -> list:
    """Plain Python numbers with NaN as None, as `num` reads them (ints stay ints)."""
    return [None if isinstance(x, float) and not math.isfinite(x) else x for x in np.asarray(xs).tolist()]


def _series_sentence(what: str, s, steps: list[int]) -> str | None:
    rho, circ = _values(s.spearman_pc1), _values(s.circularity)
    if not rho or not steps:
        return None
    sentence = (f"{what}: PC1 orders them by value with |Spearman rho| {num(rho[0], 2)} at step {steps[0]:,} "
                f"and {num(rho[-1], 2)} at step {steps[-1]:,}")
    if circ and circ[-1] is not None:
        freq = _values(s.circularity_frequency)[-1]
        sentence += f"; circularity {num(circ[0], 2)} -> {num(circ[-1], 2)} (1 = a ring ordered by value" + (
            f", dominant frequency {freq})" if freq is not None else ")")
    return sentence + "."


def findings(r) -> list[str]:
    """Up to four sentences from the typed result, written once here; a series that was
    skipped is stated with the note that says why."""
    out: list[str | None] = []
    missing: list[str] = []  # after the measured findings, so they never crowd one out
    steps = list(r.steps)
    for s, what, key in ((r.tokens, "Number-token embeddings", "tokens"), (r.positions, "Position embeddings",
                                                                             "positions")):
        if s is not None:
            out.append(_series_sentence(what, s, steps))
        else:
            why = next((n for n in r.notes if n.startswith(f"{key} skipped")), None)
            missing.append(f"{what} were not analysed" + (f": {why.split(': ', 1)[-1]}." if why else "."))
    evr = [_values(row) for row in r.tokens.explained_variance_ratio] if r.tokens is not None else []
    if evr and evr[-1] and len(evr[-1]) >= 2:
        out.append(f"At the last checkpoint the first two principal components explain "
                   f"{pct((evr[-1][0] or 0) + (evr[-1][1] or 0))} of the number-token embeddings' variance.")
    for s, what in ((r.tokens, "number-token"), (r.positions, "position")):
        rho = _values(s.spearman_pc1) if s is not None else []
        if len(rho) >= 3 and len(steps) == len(rho):
            jumps = [(abs((rho[i + 1] or 0) - (rho[i] or 0)), i) for i in range(len(rho) - 1)]
            jump, i = max(jumps)
            if jump >= 0.2:
                out.append(f"The {what} ordering changed most between steps {steps[i]:,} and {steps[i + 1]:,} "
                           f"(|rho| {num(rho[i], 2)} -> {num(rho[i + 1], 2)}).")
                break
    return limit(out + missing)
