"""Cells trained at more than one seed: each cell's mean and spread over its seeds, and
whether an ordering of two cells holds on every seed both were trained at."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any

from .common import SIGNIFICANCE, label
from .curves import gap_in_se


def runs_by_cell(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Base cell name -> its runs (first seed, then the others ascending), for the cells
    with more than one seed."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for cell in data["cells"]:
        runs[cell["cell"]].append(cell)
    for cell in data["seeds"]:
        runs[f"{cell['family']}-{cell['size'].lower()}"].append(cell)
    return {name: sorted(rs, key=lambda c: c["seed"] or 0) for name, rs in runs.items() if len(rs) > 1}


def seed_sentences(data: dict[str, Any]) -> list[str]:
    runs = runs_by_cell(data)
    out = []
    for rs in runs.values():
        ems = [c["exact_match"] for c in rs]
        mean = sum(ems) / len(ems)
        out.append(f"{label(rs[0])} over seeds {', '.join(str(c['seed'] or 0) for c in rs)}: exact match "
                   + ", ".join(f"{100 * e:.1f}%" for e in ems)
                   + f" (mean {100 * mean:.1f}%, spread {100 * (max(ems) - min(ems)):.1f} points); loss "
                   + ", ".join(f"{c['loss']:.3f}" for c in rs) + ".")
    for a, b in combinations(runs, 2):
        out.extend(_order_sentence(runs[a], runs[b]))
    return out


def _order_sentence(runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]]) -> list[str]:
    """Whether one cell is ahead of the other on every seed both were trained at, with each
    seed's gap in standard errors (the leader's numbers first); [] with fewer than 2 such seeds."""
    by_seed_a = {c["seed"] or 0: c for c in runs_a}
    by_seed_b = {c["seed"] or 0: c for c in runs_b}
    common = sorted(set(by_seed_a) & set(by_seed_b))
    if len(common) < 2:
        return []
    signs = {(by_seed_a[s]["exact_match"] > by_seed_b[s]["exact_match"])
             - (by_seed_a[s]["exact_match"] < by_seed_b[s]["exact_match"]) for s in common}
    if signs == {-1}:  # name the leader first
        by_seed_a, by_seed_b, runs_a, runs_b = by_seed_b, by_seed_a, runs_b, runs_a
    first, second = label(runs_a[0]), label(runs_b[0])
    gaps = {s: gap_in_se(by_seed_a[s]["exact_match"], by_seed_a[s]["n_test"],
                         by_seed_b[s]["exact_match"], by_seed_b[s]["n_test"]) for s in common}
    per_seed = "; ".join(f"seed {s}: {100 * by_seed_a[s]['exact_match']:.1f}% vs "
                         f"{100 * by_seed_b[s]['exact_match']:.1f}%, {gaps[s]:.1f} SE" for s in common)
    if signs not in ({1}, {-1}):
        return [f"The order of {first} and {second} does not hold across seeds ({per_seed})."]
    close = [str(s) for s in common if gaps[s] <= SIGNIFICANCE]
    if not close:
        return [f"{first} is ahead of {second} on every seed, by more than {SIGNIFICANCE:g} standard errors "
                f"on each ({per_seed})."]
    return [f"{first} is ahead of {second} on every seed, but by less than {SIGNIFICANCE:g} standard errors "
            f"on seed {', '.join(close)}: not a clear order ({per_seed})."]
