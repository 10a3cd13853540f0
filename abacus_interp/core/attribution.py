"""Attribution patching: every activation patch estimated at once, to first order, from one
forward and backward pass on the clean input and one forward pass on the corrupted one
(Nanda 2023, "Attribution patching"; TransformerLens' node attribution). For a site a
(an activation at one position, or one head's output there):

    attribution(a) = grad_a metric(clean run) . (a_corrupted - a_clean)

is the linear estimate of metric(clean run with a replaced by its corrupted value) -
metric(clean run): the *noising* patch, which `activation_patch` performs exhaustively over
the same sites (one forward pass per site, through `core.patching`). Swap the two inputs
for the denoising estimate. The sweeps mirror `core.patching`'s, with the loop first (a
single-pass family has one "loop"):

    attribute_resid(model, clean, corrupted, metric)            [loop layer pos]   resid_pre
    attribute_resid(..., site="resid_mid" | "resid_post" | "attn_out" | "mlp_out" | "lstm_out")
    attribute_head(..., by_pos=True)                            [loop layer head pos]   hook_z
    attribute_head(..., by_pos=False)                           [loop layer head]
    attribution_patch(model, clean, corrupted, metric, sites)   all of them from one pass
    activation_patch(model, clean, corrupted, metric, sites)    the real patches, same layout

`steps=m > 1` integrates the gradient instead (Sundararajan et al. 2017, over activations
as in Marks et al. 2024 and Hanna et al. 2024): the gradient is averaged over m runs in
which every node activation (the input, and each of `node_sites` and `sites` at every loop
and layer) is set to clean + alpha (corrupted - clean), alpha = (j + 1/2) / m, the gradient
passing through each set value as if it had been computed (a straight-through estimator).
The m runs go as one batch of m times the rows: one more clean forward, then one forward
and backward pass. A looped model that settles into a basin has a flat metric around the
clean run, where one gradient sees almost nothing of a patch that moves it to the other
basin (on checkpoints/extrap-add's carry: r = 0.60 against the real patches); the averaged
gradient sees the whole segment (r = 0.92 with 5 steps; benchmarks/bench_attribution.py).

`metric` maps logits of the batch to a differentiable 0-dim tensor (with steps > 1 it is
called on each block of rows, one alpha each). Every family works: the looped one
names its sites per loop (`act_name`), the single-pass ones by layer
(`blocks.{l}.hook_resid_pre`, the retran's `hook_lstm_out`, the LSTM's `hook_in` /
`hook_out` as its residual before / after a layer; `site_name` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .hooks import act_name, hook_name
from .patching import _sweep

Metric = Callable[[Tensor], Tensor]

# a single-pass family's hook, per site: the first of these that the model has (layer l)
_SINGLE_PASS_SITES: dict[str, tuple[str, ...]] = {
    "resid_pre": ("hook_resid_pre", "hook_in"),
    "resid_mid": ("hook_resid_mid",),
    "resid_post": ("hook_resid_post", "hook_out"),
    "attn_out": ("hook_attn_out",),
    "mlp_out": ("hook_mlp_out",),
    "lstm_out": ("hook_lstm_out", "hook_out"),
    "z": ("attn.hook_z",),
    "q": ("attn.hook_q",),
    "k": ("attn.hook_k",),
    "v": ("attn.hook_v",),
}
HEAD_SITES = ("z", "q", "k", "v")
INPUT = act_name("input")


def site_name(model, site: str, layer: int, loop: int = 0) -> str:
    """The hook name of `site` (a TransformerLens short name: resid_pre, z, mlp_out, ...) in
    `layer` and `loop` of any family; ValueError naming the sites the family has."""
    if model.is_looped:
        return act_name(site, layer, loop)
    if loop != 0:
        raise ValueError(f"family {model.cfg.family!r} runs its layers once: loop must be 0, got {loop}")
    for component in _SINGLE_PASS_SITES.get(site, ()):
        name = hook_name(f"blocks.{layer}.{component}")
        if name in model.hook_dict:
            return name
    raise ValueError(f"site {site!r} does not exist in family {model.cfg.family!r}; it has "
                     f"{', '.join(family_sites(model))}")


def family_sites(model) -> tuple[str, ...]:
    """The sites `site_name` resolves for this model's family."""
    if model.is_looped:
        return ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", *HEAD_SITES)
    return tuple(s for s, parts in _SINGLE_PASS_SITES.items()
                 if any(hook_name(f"blocks.0.{p}") in model.hook_dict for p in parts))


def node_sites(model) -> tuple[str, ...]:
    """The default nodes of a sweep: the residual entering each layer, each head's output
    (hook_z) and the layer's second sublayer (the MLP, or the retran's LSTM); the LSTM
    family has its layer input and output only."""
    have = family_sites(model)
    second = "mlp_out" if "mlp_out" in have else "lstm_out"
    return tuple(s for s in ("resid_pre", "z", second) if s in have)


@dataclass(frozen=True)
class NodeEffects:
    """Per site, one value for every (loop, layer[, head], position): `values[site]` is
    [loop layer pos], or [loop layer head pos] for a head site. `method`: "attribution"
    (one gradient), "attribution, m steps" (integrated) or "patching" (the real noising
    patch: metric(patched clean run) - metric(clean run)). `metric_clean`: the clean run's."""

    values: dict[str, Tensor]
    metric_clean: float
    method: str

    def flat(self, sites: Sequence[str] | None = None) -> Tensor:
        """Every value of `sites` (default all, in `values`' order) in one vector."""
        return torch.cat([self.values[s].reshape(-1) for s in (sites or list(self.values))])


def _layout(model, sites, n_loops, loops):
    sites = tuple(node_sites(model) if sites is None else sites)
    n = model.cfg.n_loops if n_loops is None else n_loops
    loops = list(range(n)) if loops is None else [t + n if t < 0 else t for t in loops]
    names = {(s, t, layer): site_name(model, s, layer, t)
             for s in sites for t in loops for layer in range(model.cfg.n_layers)}
    return sites, n, loops, names


def _check_pair(clean_tokens: Tensor, corrupted_tokens: Tensor) -> None:
    if clean_tokens.shape != corrupted_tokens.shape:
        raise ValueError(f"clean {tuple(clean_tokens.shape)} and corrupted {tuple(corrupted_tokens.shape)} "
                         "tokens must have the same shape (the same positions are patched)")


def attribution_patch(
    model,
    clean_tokens: Int[Tensor, "batch pos"],
    corrupted_tokens: Int[Tensor, "batch pos"],
    metric: Metric,
    sites: Sequence[str] | None = None,
    *,
    n_loops: int | None = None,
    loops: Sequence[int] | None = None,
    steps: int = 1,
) -> NodeEffects:
    """Attribution of every `sites` activation (default `node_sites(model)`) at every loop in
    `loops` (default all `n_loops`, the trained depth), layer and position (and head): one
    corrupted forward, then one clean forward and backward (`steps` of them, integrated,
    with steps > 1; see the module docstring). The batch shares one layout: position p of
    every row is patched together, as `core.patching` does, so a value sums the rows'."""
    _check_pair(clean_tokens, corrupted_tokens)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    sites, n, loops, names = _layout(model, sites, n_loops, loops)
    wanted = set(names.values())
    moved = set(wanted)
    if steps > 1:  # every node moves along the segment, whatever is attributed
        moved |= set(_layout(model, None, n, None)[3].values()) | {INPUT}
    corrupted, clean, metric_clean = _end_caches(model, clean_tokens, corrupted_tokens, metric, n, moved, steps)
    grads, value = _metric_gradients(model, clean_tokens, metric, n, moved, sorted(wanted), clean, corrupted, steps)
    if metric_clean is None:
        metric_clean = float(value.detach())
    values = {s: torch.stack([torch.stack([_attribution(grads, clean, corrupted, names[(s, t, layer)], s in HEAD_SITES)
                                           for layer in range(model.cfg.n_layers)])
                              for t in loops]).cpu() for s in sites}
    method = "attribution" if steps == 1 else f"attribution, {steps} steps"
    return NodeEffects(values=values, metric_clean=metric_clean, method=method)


def _end_caches(model, clean_tokens: Tensor, corrupted_tokens: Tensor, metric: Metric, n: int, moved: set[str],
                steps: int) -> tuple[dict[str, Tensor], dict[str, Tensor], float | None]:
    """The corrupted run's activations at every `moved` node and, with steps > 1, the clean
    run's and its metric (with one step the gradient pass records the clean ones itself:
    the clean dict is empty and the metric None)."""
    with torch.no_grad():
        _, corrupted = model.run_with_cache(corrupted_tokens, n_loops=n, names_filter=lambda x: x in moved,
                                            return_cache_object=False)
        clean: dict[str, Tensor] = {}
        metric_clean = None
        if steps > 1:
            clean_logits, clean = model.run_with_cache(clean_tokens, n_loops=n, names_filter=lambda x: x in moved,
                                                       return_cache_object=False)
            metric_clean = float(metric(clean_logits))
    return corrupted, clean, metric_clean


def _metric_gradients(model, clean_tokens: Tensor, metric: Metric, n: int, moved: set[str], order: list[str],
                      clean: dict[str, Tensor], corrupted: dict[str, Tensor],
                      steps: int) -> tuple[dict[str, Tensor | float], Tensor]:
    """The metric's gradient at each node of `order` ([batch ...], summed over the `steps`
    points of the segment; 0.0 where the metric does not depend on it) and the metric, the
    mean over those points. With one step the clean activations are recorded into `clean`."""
    # the `steps` points of the segment run as one batch, each row block one alpha
    alphas = torch.tensor([(j + 0.5) / steps for j in range(steps)]) if steps > 1 else None
    batch = clean_tokens.shape[0]
    seen: dict[str, Tensor] = {}
    hook = _segment_hook(clean, corrupted, alphas, seen)
    tokens = clean_tokens if alphas is None else clean_tokens.repeat(steps, 1)
    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, n_loops=n, fwd_hooks=[(name, hook) for name in moved])
        values = [metric(chunk) for chunk in logits.split(batch)]
        if any(v.numel() != 1 for v in values):
            raise ValueError(f"the metric must return a scalar, got shape {tuple(values[0].shape)}")
        value = sum(values) / len(values)
        found = torch.autograd.grad(value, [seen[name] for name in order], allow_unused=True)
    grads = {name: 0.0 if g is None else g.detach().unflatten(0, (-1, batch)).sum(0)
             for name, g in zip(order, found, strict=True)}
    return grads, value


def _segment_hook(clean: dict[str, Tensor], corrupted: dict[str, Tensor], alphas: Tensor | None,
                  seen: dict[str, Tensor]):
    """The hook of every moved node: with `alphas`, its value set to each point of the segment
    from clean to corrupted (the gradient passing straight through); without, the clean
    activation recorded. Either way the value is kept in `seen`, for the gradient."""

    def hook(act, hook):
        if alphas is not None:  # the value on the segment, the gradient straight through
            c, r = clean[hook.name], corrupted[hook.name].to(clean[hook.name])
            a = alphas.to(c).view(-1, *[1] * c.dim())
            target = (c + a * (r - c)).flatten(0, 1)  # [steps*batch ...]
            act = act + (target.to(act) - act).detach()
            if hook.name == INPUT:
                act = act.detach().requires_grad_()  # what follows depends on alpha only
        elif hook.name not in clean:
            clean[hook.name] = act.detach()
        seen[hook.name] = act
        return act

    return hook


def _attribution(grads: dict[str, Tensor | float], clean: dict[str, Tensor], corrupted: dict[str, Tensor],
                 name: str, head: bool) -> Tensor:
    """gradient . (corrupted - clean) at node `name`, summed over the batch and the model
    dimension: [pos], or [head pos] for a head site."""
    delta = corrupted[name].to(clean[name]) - clean[name]
    a = (torch.as_tensor(grads[name]).to(delta) * delta).sum(dim=(0, -1)).float()  # [pos] or [pos head]
    return a.T if head else a


def activation_patch(
    model,
    clean_tokens: Int[Tensor, "batch pos"],
    corrupted_tokens: Int[Tensor, "batch pos"],
    metric: Metric,
    sites: Sequence[str] | None = None,
    *,
    n_loops: int | None = None,
    loops: Sequence[int] | None = None,
) -> NodeEffects:
    """The real noising patches `attribution_patch` estimates, in its layout: for every site,
    loop, layer, position (and head), metric(clean run with that activation taken from the
    corrupted run) - metric(clean run). One forward pass per value (`core.patching`'s sweep)."""
    _check_pair(clean_tokens, corrupted_tokens)
    sites, n, loops, names = _layout(model, sites, n_loops, loops)
    with torch.no_grad():
        clean_logits = model(clean_tokens, n_loops=n)
        metric_clean = float(metric(clean_logits))
        _, corrupted = model.run_with_cache(corrupted_tokens, n_loops=n, names_filter=lambda x: x in set(names.values()),
                                            return_cache_object=False)
    k, n_pos, n_heads = model.cfg.n_layers, clean_tokens.shape[-1], model.cfg.n_heads

    def setter(pos: int, head: int | None):
        def put(act: Tensor, source: Tensor) -> None:
            where = (..., pos, slice(None)) if head is None else (..., pos, head, slice(None))
            act[where] = source[where]
        return put

    values = {}
    for s in sites:
        heads = [None] if s not in HEAD_SITES else list(range(n_heads))
        cells = [((i, layer, *([] if h is None else [h]), p), names[(s, t, layer)], setter(p, h))
                 for i, t in enumerate(loops) for layer in range(k) for h in heads for p in range(n_pos)]
        shape = (len(loops), k, *([] if heads == [None] else [n_heads]), n_pos)
        values[s] = _sweep(model, clean_tokens, corrupted, metric, cells, shape, n) - metric_clean
    return NodeEffects(values=values, metric_clean=metric_clean, method="patching")


def attribute_resid(
    model, clean_tokens, corrupted_tokens, metric: Metric, *, site: str = "resid_pre", **kwargs
) -> Float[Tensor, "loop layer pos"]:
    """Attribution at a residual-stream-shaped site (resid_pre, resid_mid, resid_post,
    attn_out, mlp_out, lstm_out) of every (loop, layer, position)."""
    if site in HEAD_SITES:
        raise ValueError(f"site {site!r} is per head: use attribute_head")
    return attribution_patch(model, clean_tokens, corrupted_tokens, metric, (site,), **kwargs).values[site]


def attribute_attn_out(model, clean_tokens, corrupted_tokens, metric: Metric, **kwargs) -> Float[Tensor, "loop layer pos"]:
    return attribute_resid(model, clean_tokens, corrupted_tokens, metric, site="attn_out", **kwargs)


def attribute_mlp_out(model, clean_tokens, corrupted_tokens, metric: Metric, **kwargs) -> Float[Tensor, "loop layer pos"]:
    return attribute_resid(model, clean_tokens, corrupted_tokens, metric, site="mlp_out", **kwargs)


def attribute_head(
    model, clean_tokens, corrupted_tokens, metric: Metric, *, by_pos: bool = False, activation: str = "z", **kwargs
) -> Float[Tensor, "loop layer head pos"] | Float[Tensor, "loop layer head"]:
    """Attribution of each head's `activation` (z, q, k or v) at every (loop, layer, head),
    per position with by_pos=True, else summed over positions: the first-order estimate
    is linear, so patching a head at every position is the sum of its per-position estimates."""
    if activation not in HEAD_SITES:
        raise ValueError(f"activation={activation!r}: attribute_head attributes z, q, k or v")
    values = attribution_patch(model, clean_tokens, corrupted_tokens, metric, (activation,), **kwargs).values[activation]
    return values if by_pos else values.sum(-1)
