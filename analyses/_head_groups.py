"""Attention split by key group, head by head and loop by loop, and knockouts of one head's
access to one group: the computation the carry-wave, multiplication, product-columns and
comparisons analyses share (their heatmaps: `_head_group_figures`).

Each analysis says what its key groups are: a batch builder yields (tokens, queries, masks),
`queries` [row 2] the (batch row, position) of every answer query and `masks` [row group key]
which keys belong to which group (the last group is "other", what no named group holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from abacus_interp.core.model import act_name

Batches = Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def head_names(cfg) -> tuple[str, ...]:
    """"L0H5" for layer 0, head 5, in (layer, head) order."""
    return tuple(f"L{layer}H{h}" for layer in range(cfg.n_layers) for h in range(cfg.n_heads))


@torch.no_grad()
def group_attention_mass(model, batches: Batches, n_loops: int, n_groups: int) -> tuple[np.ndarray, int]:
    """Mean attention mass of the answer queries on each key group: [loop layer*head group],
    and the number of (problem, answer digit) rows averaged over."""
    cfg = model.cfg
    totals = np.zeros((n_loops, cfg.n_layers, cfg.n_heads, n_groups))
    n_rows = 0
    for tokens, queries, masks in batches:
        n_rows += len(queries)

        def make_hook(t: int, layer: int, queries=queries, masks=masks):
            def hook(pattern, hook):  # pattern: [batch head query_pos key_pos]
                rows = pattern.detach()[queries[:, 0], :, queries[:, 1], :].float().cpu()  # [row head key]
                totals[t, layer] += torch.einsum("rhk,rgk->hg", rows, masks).numpy()
                return pattern
            return hook

        hooks = [(act_name("pattern", layer, loop=t), make_hook(t, layer))
                 for t in range(n_loops) for layer in range(cfg.n_layers)]
        model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=hooks)
    mean = totals / max(n_rows, 1)
    return mean.reshape(n_loops, cfg.n_layers * cfg.n_heads, n_groups), n_rows


@dataclass(frozen=True)
class GroupReading:
    """Mean attention mass of one kind of query on each key group, per loop and head."""

    label: str  # the sample
    n_problems: int
    n_rows: int  # (problem, query) pairs averaged over
    heads: tuple[str, ...]
    groups: tuple[str, ...]  # the last is "other", what no named group holds
    mass: tuple[tuple[tuple[float, ...], ...], ...]  # [loop][head][group]
    queries: str = "answer queries"  # which positions read

    def main_group(self, loop: int, head: str) -> tuple[str, float]:
        """The group `head` reads most in `loop` (1-based), and its mass ("other" left out)."""
        row = np.asarray(self.mass[loop - 1][self.heads.index(head)])
        best = int(np.argmax(row[:-1]))
        return self.groups[best], float(row[best])

    def top_reader(self, group: str) -> tuple[int, str, float]:
        """The (loop, head) that puts the most mass on `group` (loop 1-based), and that mass."""
        mass = np.asarray(self.mass)[:, :, self.groups.index(group)]  # [loop head]
        t, h = np.unravel_index(int(np.argmax(mass)), mass.shape)
        return int(t) + 1, self.heads[int(h)], float(mass[t, h])


@dataclass(frozen=True)
class Knockout:
    """Exact match when one head may not attend to one key group (in every loop)."""

    label: str
    n_problems: int
    n_loops: int
    baseline: float  # no knockout
    groups: tuple[str, ...]  # the key groups knocked out, one at a time
    heads: tuple[str, ...]
    exact_match: tuple[tuple[float, ...], ...]  # [group][head]

    def worst(self, group: str) -> tuple[str, float]:
        """The head whose knockout on `group` hurts most, and the exact match left."""
        row = self.exact_match[self.groups.index(group)]
        h = int(np.argmin(row))
        return self.heads[h], row[h]


@torch.no_grad()
def knockout(model, batches: Batches, n_problems: int, n_loops: int, label: str, groups: Sequence[str],
             group_names: Sequence[str]) -> Knockout:
    """Exact match (greedy readout of every answer query after `n_loops`) when head h's scores
    on key group g are set to -inf at every answer query and loop, for each (g, h): the head's
    access to those keys removed, its attention renormalised over the rest."""
    cfg = model.cfg
    heads = [(layer, h) for layer in range(cfg.n_layers) for h in range(cfg.n_heads)]
    cases = [None, *((g, lh) for g in groups for lh in heads)]
    right = dict.fromkeys(cases, 0)
    for tokens, queries, masks in batches:
        target = tokens[:, 1:]
        answer_rows = torch.zeros_like(target, dtype=torch.bool)
        answer_rows[queries[:, 0], queries[:, 1]] = True
        for case in cases:
            hooks = []
            if case is not None:
                group, (layer, head) = case
                blocked = torch.zeros(tokens.shape[0], tokens.shape[1], tokens.shape[1], dtype=torch.bool)
                blocked[queries[:, 0], queries[:, 1]] = masks[:, list(group_names).index(group)].bool()
                blocked = blocked.to(tokens.device)

                def hook(scores, hook, blocked=blocked, head=head):  # [batch head q k]
                    scores[:, head] = scores[:, head].masked_fill(blocked, float("-inf"))
                    return scores

                hooks = [(act_name("attn_scores", layer, loop=t), hook) for t in range(n_loops)]
            logits = model.run_with_hooks(tokens, n_loops=n_loops, fwd_hooks=hooks)
            ok = ((logits[:, :-1].argmax(-1) == target) | ~answer_rows).all(-1)
            right[case] += int(ok.sum())
    n = n_problems
    return Knockout(label=label, n_problems=n, n_loops=n_loops, baseline=right[None] / n, groups=tuple(groups),
                    heads=head_names(cfg), exact_match=tuple(tuple(right[(g, lh)] / n for lh in heads) for g in groups))
