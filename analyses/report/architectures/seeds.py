"""Cells trained at more than one seed: each cell's mean and spread over its seeds, and
whether an ordering of two cells holds on every seed both were trained at."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any

from .summary import label


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
        by_seed_a = {c["seed"] or 0: c for c in runs[a]}
        by_seed_b = {c["seed"] or 0: c for c in runs[b]}
        common = sorted(set(by_seed_a) & set(by_seed_b))
        if len(common) < 2:
            continue
        signs = {(by_seed_a[s]["exact_match"] > by_seed_b[s]["exact_match"]) - (by_seed_a[s]["exact_match"]
                                                                               < by_seed_b[s]["exact_match"])
                 for s in common}
        per_seed = "; ".join(f"seed {s}: {100 * by_seed_a[s]['exact_match']:.1f}% vs "
                             f"{100 * by_seed_b[s]['exact_match']:.1f}%" for s in common)
        first, second = label(runs[a][0]), label(runs[b][0])
        if signs == {1}:
            out.append(f"{first} is ahead of {second} on every seed ({per_seed}).")
        elif signs == {-1}:
            out.append(f"{second} is ahead of {first} on every seed ({per_seed}).")
        else:
            out.append(f"The order of {first} and {second} does not hold across seeds ({per_seed}).")
    return out
