"""The product-columns findings: sentences that state the measured numbers and their samples."""

from __future__ import annotations

from abacus_interp.core.hooks import loop_label
from analyses._running_sum import running_sum_sentence
from analyses.prose import limit, pct


def product_columns_findings(result) -> list[str]:
    n, grid = result.trained_digits, result.grid
    inside = [c for c in grid if c.digits_a <= n and c.digits_b <= n]
    passing = [c for c in inside if c.exact_match >= 0.99]
    worst = min(inside, key=lambda c: c.exact_match)
    square = result.largest_square()
    beyond = [c for c in grid if c.digits_a == c.digits_b and c.digits_a > n]
    out = [(f"Uniform N x M products (n={grid[0].n} per cell, {result.n_loops} loops): {len(passing)} of "
            f"{len(inside)} cells up to {n} x {n} at >= 99%, the weakest {worst.digits_a} x {worst.digits_b} at "
            f"{pct(worst.exact_match)}; the largest N with every cell up to N x N at >= 99% is "
            f"{square if square is not None else 'none (1 x 1 misses it)'}"
            + ("; past the trained length " + ", ".join(f"{c.digits_a} x {c.digits_b}: {pct(c.exact_match)}"
                                                       for c in beyond) if beyond else "") + ".")]
    reading = result.reading
    per_loop = []
    for t in range(1, len(reading.mass) + 1):
        reads = []
        for head in reading.heads:
            group, mass = reading.main_group(t, head)
            reads.append(f"{head} {group} ({mass:.0%})")
        per_loop.append(f"{loop_label(t - 1)}: " + ", ".join(reads))
    if result.running_sum:
        out.append(running_sum_sentence(result.running_sum))
    out.append(f"Where each head reads most ({reading.label}, n={reading.n_problems}: {result.inside}): "
               + "; ".join(per_loop) + ".")
    k = result.knockout
    if k.baseline < 0.5:  # a knockout cannot show what a head is needed for when little is right
        out.append(f"Knockouts not read: only {pct(k.baseline)} of {k.label} are right with every head intact.")
        return limit(out)
    worst_cases = []
    for group in k.groups:
        head, left = k.worst(group)
        worst_cases.append(f"{group} from {head}: {pct(left)}")
    out.append(f"Forbidding one head one key group in every loop ({k.label}, n={k.n_problems}, none forbidden "
               f"{pct(k.baseline)}), the head whose loss hurts most: " + "; ".join(worst_cases) + ".")
    return limit(out)
