"""Edge attribution patching over a `LoopGraph`, and the real ablations that check it.

For an edge u -> v (Syed et al. 2023; Hanna et al. 2024 for the integrated version):

    score(u -> v) = (out_u(ablated) - out_u(clean)) . grad_{in_v} metric

the first-order estimate of metric(clean run with that one edge cut) - metric(clean run),
where a cut edge carries u's output on the paired corrupted problem (resample ablation:
the classic EAP score) or its mean (mean ablation). With `steps` = 1 the gradient is taken
on the clean run (one forward and backward, plus the forward that gave the ablated
values); with steps = m it is averaged over m runs whose node outputs are set to
clean + alpha (ablated - clean) (see `abacus_interp.core.attribution`).

Ablation is real: `Ablation` holds, for every node, the value its edges carry when cut,
the node's output on the paired corrupted problem ("resample") or its mean over clean and
corrupted problems ("mean"), and `metric_with(keep)` runs the model with every edge outside
`keep` cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .forward import run_graph
from .graph import LoopGraph
from .pairs import Pairs

ABLATIONS = ("resample", "mean")


@torch.no_grad()
def node_outputs(model, tokens: Tensor, graph: LoopGraph) -> list[Tensor | None]:
    return run_graph(model, tokens, graph).outputs


def edge_attribution(model, ablation: Ablation, steps: int = 1) -> Tensor:
    """[n_edges] scores (see the module docstring) on the ablation's pairs, summed over
    pairs and positions as their metric is (a mean over pairs)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    graph, pairs = ablation.graph, ablation.pairs
    clean = node_outputs(model, pairs.clean, graph)
    delta = [None if c is None else a - c for c, a in zip(clean, ablation.values, strict=True)]
    readers = graph.readers()
    batch = pairs.clean.shape[0]
    tokens, forced = pairs.clean, None
    if steps > 1:  # the steps points of the segment as one batch, each row block one alpha
        alphas = torch.tensor([(j + 0.5) / steps for j in range(steps)])
        tokens = pairs.clean.repeat(steps, 1)
        forced = [None if c is None else (c + alphas.to(c).view(-1, 1, 1, 1) * d).flatten(0, 1)
                  for c, d in zip(clean, delta, strict=True)]
    with torch.enable_grad():
        run = run_graph(model, tokens, graph, forced=forced)
        value = sum(pairs.metric(chunk) for chunk in run.logits.split(batch)) / steps
        found = torch.autograd.grad(value, [run.inputs[r] for r in readers])
    grads = {r: g.detach().unflatten(0, (-1, batch)).sum(0) for r, g in zip(readers, found, strict=True)}
    return torch.stack([(delta[s] * grads[(t, c)]).sum() for s, t, c in graph.edges]).float().cpu()


@dataclass
class Ablation:
    """What every cut edge carries, on one set of pairs, and the metric of the runs."""

    model: object
    graph: LoopGraph
    pairs: Pairs
    kind: str  # "resample" or "mean"
    values: list[Tensor | None]

    @classmethod
    def of(cls, model, graph: LoopGraph, pairs: Pairs, kind: str) -> Ablation:
        if kind not in ABLATIONS:
            raise ValueError(f"ablation {kind!r}: choose from {ABLATIONS}")
        corrupted = node_outputs(model, pairs.corrupted, graph)
        if kind == "resample":
            values = corrupted
        else:
            clean = node_outputs(model, pairs.clean, graph)
            values = [None if c is None else torch.cat([c, r]).mean(0, keepdim=True)
                      for c, r in zip(clean, corrupted, strict=True)]
        return cls(model=model, graph=graph, pairs=pairs, kind=kind, values=values)

    def metric_with(self, keep: list[bool] | Tensor) -> float:
        """The metric of the clean problems with every edge outside `keep` cut."""
        return float(self.per_pair_with(keep).mean())

    @torch.no_grad()
    def per_pair_with(self, keep: list[bool] | Tensor) -> Tensor:
        """[pair] each pair's part of `metric_with(keep)` (its summed logit difference)."""
        run = run_graph(self.model, self.pairs.clean, self.graph, keep=keep, ablated=self.values)
        return self.pairs.per_pair(run.logits).cpu()

    def single_edge_effects(self) -> Tensor:
        """[n_edges] metric(only that edge cut) - metric(nothing cut): the real counterpart of
        the edge scores (under resample ablation, exactly what a score estimates)."""
        full = self.metric_with([True] * len(self.graph.edges))
        out = []
        for e in range(len(self.graph.edges)):
            keep = [True] * len(self.graph.edges)
            keep[e] = False
            out.append(self.metric_with(keep) - full)
        return torch.tensor(out)


def circuit_attribution(model, ablation: Ablation, keep: list[bool]) -> Tensor:
    """[n_edges] first-order estimates, on the run with only `keep` left, of what cutting
    each edge as well would change: (ablated_u - out_u) . grad_{in_v} metric there (0 for
    an edge already cut). It orders the pruning of a circuit as its edges go."""
    graph, pairs = ablation.graph, ablation.pairs
    with torch.enable_grad():
        run = run_graph(model, pairs.clean, graph, keep=keep, ablated=ablation.values)
        value = pairs.metric(run.logits)
        # a reader whose every edge is cut reads constants: nothing to differentiate there
        readers = [r for r in graph.readers() if run.inputs[r].requires_grad] if value.requires_grad else []
        found = torch.autograd.grad(value, [run.inputs[r] for r in readers], allow_unused=True) if readers else ()
    grads = {r: g for r, g in zip(readers, found, strict=True) if g is not None}
    return torch.tensor([float(((ablation.values[s] - run.outputs[s].detach()) * grads[(t, c)]).sum())
                         if k and (t, c) in grads else 0.0
                         for (s, t, c), k in zip(graph.edges, keep, strict=True)])
