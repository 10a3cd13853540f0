"""The smallest circuit that keeps the behaviour, found by real ablation in the order the
edge scores give.

1. Rank the edges by |score|.
2. Keep the top k (with the edges that lie on no input-to-logits path dropped, see
   `LoopGraph.on_paths`) for k on a grid, and run the model with every other edge cut:
   the recovery curve. The smallest top-k circuit whose recovery reaches `target` is the
   start.
3. Try to drop each of its edges, weakest first, keeping a drop whenever the recovery
   stays at or above `target`; repeat for up to `passes` passes while drops are found.
   With `rescore`, "weakest" is re-estimated at the start of each pass on the circuit as
   it stands (`edges.circuit_attribution`: what cutting each remaining edge would change
   there), else it is the order of the scores.

Recovery is (metric with the circuit alone - metric with every edge cut) / (metric of the
full model - metric with every edge cut): the share of the behaviour the circuit keeps,
1 for the whole graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .edges import Ablation
from .graph import LoopGraph

Keep = list[bool]


@dataclass(frozen=True)
class Search:
    keep: tuple[bool, ...]  # the circuit
    recovered: float  # its recovery on the pairs it was chosen on
    start_k: int  # the top-k circuit refinement started from
    curve: tuple[tuple[int, int, float], ...]  # (k, edges kept after pruning, recovery)
    evaluations: int  # ablated forward passes spent


def recovery_of(ablation: Ablation, folds: int = 1) -> Callable[[Keep], float]:
    """keep -> recovery on the ablation's pairs (see the module docstring); with `folds` > 1
    the least recovery over that many consecutive blocks of the pairs, so that a circuit
    must keep the behaviour on each block, not on their average alone."""
    n = len(ablation.graph.edges)
    full, none = ablation.per_pair_with([True] * n), ablation.per_pair_with([False] * n)
    blocks = [b for b in torch.arange(len(full)).tensor_split(folds) if len(b)]
    spans = [float(full[b].sum() - none[b].sum()) for b in blocks]
    if min(abs(s) for s in spans) < 1e-6:
        raise ValueError("the full model and the fully ablated one give the same metric: nothing to recover")

    def recovery(keep: Keep) -> float:
        circuit = ablation.per_pair_with(keep)
        return min(float(circuit[b].sum() - none[b].sum()) / span for b, span in zip(blocks, spans, strict=True))

    return recovery


def k_grid(n_edges: int, dense: int = 64, points: int = 24) -> list[int]:
    """Every k up to `dense`, then about `points` more, evenly spaced on a log scale."""
    ks = set(range(1, min(dense, n_edges) + 1))
    if n_edges > dense:
        ks |= {round(dense * (n_edges / dense) ** (i / points)) for i in range(points + 1)}
    return sorted(k for k in ks if k <= n_edges)


def find_circuit(graph: LoopGraph, scores: torch.Tensor, recovery: Callable[[Keep], float], target: float,
                 from_input: bool = True, passes: int = 3,
                 rescore: Callable[[Keep], torch.Tensor] | None = None) -> Search:
    """The circuit of the module docstring. `from_input`: prune edges unreachable from the
    input (exact under resample ablation only)."""
    n = len(graph.edges)
    order = sorted(range(n), key=lambda e: -abs(float(scores[e])))
    seen: dict[tuple[bool, ...], float] = {}

    def measure(keep: Keep) -> float:
        key = tuple(keep)
        if key not in seen:
            seen[key] = recovery(keep)
        return seen[key]

    def pruned(edges) -> Keep:
        keep = [False] * n
        for e in edges:
            keep[e] = True
        return graph.on_paths(keep, from_input)

    curve, start, start_k = [], None, n
    for k in k_grid(n):
        keep = pruned(order[:k])
        r = measure(keep)
        curve.append((k, sum(keep), r))
        if start is None and r >= target:
            start, start_k = keep, k
    if start is None:  # only the whole graph (recovery 1 by definition) keeps the behaviour
        start = pruned(order)
    keep = list(start)
    best = measure(keep)
    for _ in range(passes):
        before = sum(keep)
        if rescore is not None:  # the weakest edge as the circuit now stands
            now = rescore(keep)
            order = sorted(range(n), key=lambda e: -abs(float(now[e])))
        for e in reversed(order):  # weakest first
            if not keep[e]:
                continue
            trial = list(keep)
            trial[e] = False
            trial = graph.on_paths(trial, from_input)
            r = measure(trial)
            if r >= target:
                keep, best = trial, r
        if sum(keep) == before:
            break
    return Search(keep=tuple(keep), recovered=best, start_k=start_k, curve=tuple(curve), evaluations=len(seen))
