"""Attribution patching checked against real activation patching, node by node: every
(loop, layer, residual | head output | MLP output, position) of `core.attribution`'s
sweeps, on the same pairs and metric, with the time each side took."""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from abacus_interp.core.attribution import (
    HEAD_SITES,
    activation_patch,
    attribution_patch,
    node_sites,
)

from .pairs import Pairs
from .result import NodeCheck


def pearson(x, y) -> float | None:
    """Pearson's r of two equal-length sequences; None when either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return None
    r = float(np.corrcoef(x, y)[0, 1])
    return r if math.isfinite(r) else None


def node_labels(model, values: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    """(site, label) of every value of `values`, in `NodeEffects.flat` order."""
    sites, labels = [], []
    for site, tensor in values.items():
        for index in np.ndindex(*tensor.shape):
            t, layer, *rest = index
            where = f"@{t}" if model.is_looped else ""
            if site in HEAD_SITES:
                head, pos = rest
                name = f"L{layer}H{head}{where}"
            else:
                (pos,) = rest
                name = f"{site} L{layer}{where}"
            sites.append(site)
            labels.append(f"{name} pos {pos}")
    return sites, labels


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def node_check(model, pairs: Pairs, n_loops: int, steps: int) -> NodeCheck:
    """Attribution (one gradient, and `steps` integrated steps) against activation patching
    over `node_sites(model)` at every loop, layer and position of the pairs."""
    sites = node_sites(model)
    args = (model, pairs.clean, pairs.corrupted, pairs.metric, sites)
    one, one_s = _timed(lambda: attribution_patch(*args, n_loops=n_loops, steps=1))
    integrated, integrated_s = (one, one_s) if steps == 1 else _timed(
        lambda: attribution_patch(*args, n_loops=n_loops, steps=steps))
    real, patching_s = _timed(lambda: activation_patch(*args, n_loops=n_loops))
    kinds, labels = node_labels(model, real.values)
    x, y, y1 = real.flat(sites).numpy(), integrated.flat(sites).numpy(), one.flat(sites).numpy()
    by_site = tuple((s, pearson(real.values[s].reshape(-1), integrated.values[s].reshape(-1))) for s in sites)
    return NodeCheck(sample=pairs.label, sites=tuple(kinds), labels=tuple(labels), patching=_rounded(x), attribution=_rounded(y),
                     one_gradient=_rounded(y1), steps=steps, pearson=pearson(x, y), one_gradient_pearson=pearson(x, y1),
                     pearson_by_site=by_site, attribution_s=integrated_s, one_gradient_s=one_s, patching_s=patching_s,
                     speedup=patching_s / integrated_s if integrated_s > 0 else None)


def _rounded(values) -> tuple[float, ...]:
    return tuple(round(float(v), 5) for v in values)
