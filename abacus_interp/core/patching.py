"""Activation patching on a looped model: loop-aware sweeps and a TransformerLens adapter.

Loop-aware sweeps patch one activation of the clean run into the corrupted run at a time, at
(loop, layer, position) or (loop, layer, head[, position]), and return the metric of every
patched run in a tensor whose first axis is the loop:

    patch_resid(model, corrupted, clean_cache, metric)       [loop layer pos]  resid_pre
    patch_resid(..., site="resid_mid" | "resid_post")
    patch_attn_out / patch_mlp_out(...)                      [loop layer pos]
    patch_head(..., by_pos=False)                            [loop layer head] (hook_z, all positions)
    patch_head(..., by_pos=True)                             [loop layer head pos]
    patch_state(..., site="state_pre" | "state_post")        [loop pos]

`metric` maps the patched run's logits to a scalar (a 0-dim tensor or a float); `loops` and
`positions` restrict a sweep (the first axis then follows `loops`). The corrupted run uses as
many loops as the clean run (`clean_cache.n_loops`) unless `n_loops` says otherwise.

TransformerLens' own helpers (`transformer_lens.patching.get_act_patch_resid_pre` and the
rest) iterate `layer` over `model.cfg.n_layers` and name hooks `blocks.{layer}.hook_...`,
which a looped model does not have (its hooks carry the loop). Pass them `unrolled(model)`:
a thin view of the model as the unrolled stack of n_loops * n_layers blocks, where block i is
layer i % n_layers of loop i // n_layers. The clean cache from `model.run_with_cache` already
resolves those names, so

    tl_patching.get_act_patch_resid_pre(unrolled(model), corrupted, clean_cache, metric)

returns [n_loops * n_layers, pos]; `.reshape(n_loops, n_layers, -1)` indexes it by loop.
Calling them with the bare model fails (`KeyError: 'blocks.0.hook_resid_pre'`), by design:
quietly patching loop 0 only would look like an answer about the whole model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .cache import LoopActivationCache
from .hooks import act_name, hook_name
from .model import LoopedTransformer

Metric = Callable[[Tensor], Tensor | float]

_UNROLLED = re.compile(r"^blocks\.(\d+)\.(.+)$")


# ------------------------------------------------------------------ sweeps
def _scalar(value) -> float:
    value = torch.as_tensor(value).detach()
    if value.numel() != 1:
        raise ValueError(f"the patching metric must return a scalar, got shape {tuple(value.shape)}")
    return float(value)


def _sweep(
    model: LoopedTransformer,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: LoopActivationCache,
    metric: Metric,
    cells: Iterable[tuple[tuple[int, ...], str, Callable[[Tensor, Tensor], None]]],
    shape: tuple[int, ...],
    n_loops: int | None,
) -> Tensor:
    """Run one patched forward per cell (index in the output, hook name, setter)."""
    n_loops = clean_cache.n_loops if n_loops is None else n_loops
    out = torch.full(shape, float("nan"))
    with torch.no_grad():
        for index, name, setter in cells:
            clean = clean_cache[name]

            def hook(act, hook, clean=clean, setter=setter):
                act = act.clone()
                setter(act, clean.to(act))
                return act

            logits = model.run_with_hooks(corrupted_tokens, n_loops=n_loops, fwd_hooks=[(name, hook)])
            out[index] = _scalar(metric(logits))
    return out


def _loops(loops: Sequence[int] | None, clean_cache: LoopActivationCache, n_loops: int | None) -> list[int]:
    n = clean_cache.n_loops if n_loops is None else n_loops
    return list(range(n)) if loops is None else [t + n if t < 0 else t for t in loops]


def _positions(positions: Sequence[int] | None, tokens: Tensor) -> list[int]:
    n = tokens.shape[-1]
    return list(range(n)) if positions is None else [p + n if p < 0 else p for p in positions]


def _set_pos(pos: int) -> Callable[[Tensor, Tensor], None]:
    def setter(act: Tensor, clean: Tensor) -> None:  # [batch pos d]
        act[..., pos, :] = clean[..., pos, :]

    return setter


def patch_resid(
    model: LoopedTransformer,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: LoopActivationCache,
    metric: Metric,
    *,
    site: str = "resid_pre",
    loops: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    n_loops: int | None = None,
) -> Float[Tensor, "loop layer patched_pos"]:
    """Patch a residual-stream-shaped activation (`site`: resid_pre, resid_mid, resid_post,
    attn_out or mlp_out) at every (loop, layer, position); the metric of each patched run."""
    loops, positions = _loops(loops, clean_cache, n_loops), _positions(positions, corrupted_tokens)
    k = model.cfg.n_layers
    cells = [
        ((i, li, j), act_name(site, li, t), _set_pos(p))
        for i, t in enumerate(loops)
        for li in range(k)
        for j, p in enumerate(positions)
    ]
    return _sweep(model, corrupted_tokens, clean_cache, metric, cells, (len(loops), k, len(positions)), n_loops)


def patch_attn_out(model, corrupted_tokens, clean_cache, metric, **kwargs) -> Float[Tensor, "loop layer patched_pos"]:
    """patch_resid at each block's attention output."""
    return patch_resid(model, corrupted_tokens, clean_cache, metric, site="attn_out", **kwargs)


def patch_mlp_out(model, corrupted_tokens, clean_cache, metric, **kwargs) -> Float[Tensor, "loop layer patched_pos"]:
    """patch_resid at each block's MLP output."""
    return patch_resid(model, corrupted_tokens, clean_cache, metric, site="mlp_out", **kwargs)


def patch_state(
    model: LoopedTransformer,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: LoopActivationCache,
    metric: Metric,
    *,
    site: str = "state_pre",
    loops: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    n_loops: int | None = None,
) -> Float[Tensor, "loop patched_pos"]:
    """Patch the state entering (`state_pre`, after injection) or leaving (`state_post`)
    each loop, at every position."""
    loops, positions = _loops(loops, clean_cache, n_loops), _positions(positions, corrupted_tokens)
    cells = [
        ((i, j), act_name(site, loop=t), _set_pos(p)) for i, t in enumerate(loops) for j, p in enumerate(positions)
    ]
    return _sweep(model, corrupted_tokens, clean_cache, metric, cells, (len(loops), len(positions)), n_loops)


def patch_head(
    model: LoopedTransformer,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: LoopActivationCache,
    metric: Metric,
    *,
    by_pos: bool = False,
    activation: str = "z",
    loops: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    n_loops: int | None = None,
) -> Float[Tensor, "loop layer head"] | Float[Tensor, "loop layer head patched_pos"]:
    """Patch one head's `activation` (z, q, k or v: [batch pos head d_head]) at every
    (loop, layer, head), over all positions, or per position with by_pos=True."""
    if activation not in ("z", "q", "k", "v"):
        raise ValueError(f"activation={activation!r}: patch_head patches z, q, k or v")
    loops = _loops(loops, clean_cache, n_loops)
    k, h = model.cfg.n_layers, model.cfg.n_heads

    def set_head(head: int, pos: int | None):
        def setter(act: Tensor, clean: Tensor) -> None:  # [batch pos head d_head]
            where = (..., slice(None) if pos is None else pos, head, slice(None))
            act[where] = clean[where]

        return setter

    if by_pos:
        positions = _positions(positions, corrupted_tokens)
        cells = [
            ((i, li, hd, j), act_name(activation, li, t), set_head(hd, p))
            for i, t in enumerate(loops)
            for li in range(k)
            for hd in range(h)
            for j, p in enumerate(positions)
        ]
        shape = (len(loops), k, h, len(positions))
    else:
        cells = [
            ((i, li, hd), act_name(activation, li, t), set_head(hd, None))
            for i, t in enumerate(loops)
            for li in range(k)
            for hd in range(h)
        ]
        shape = (len(loops), k, h)
    return _sweep(model, corrupted_tokens, clean_cache, metric, cells, shape, n_loops)


# ----------------------------------------------------- TransformerLens adapter
class UnrolledView:
    """The looped model seen as n_loops * n_layers blocks, for code written against
    TransformerLens names (`blocks.{i}.hook_resid_pre`, ...): block i is layer
    i % n_layers of loop i // n_layers. It forwards everything else to the model, always
    running `n_loops` loops. Build it with `unrolled(model)`."""

    def __init__(self, model: LoopedTransformer, n_loops: int | None = None):
        self.original_model = model  # TransformerLens checks this one for eval mode
        self.n_loops = model.cfg.n_loops if n_loops is None else n_loops
        cfg = model.cfg
        self.cfg = SimpleNamespace(
            n_layers=self.n_loops * cfg.n_layers,
            n_heads=cfg.n_heads,
            n_key_value_heads=None,
            d_model=cfg.d_model,
            d_head=cfg.d_head,
            d_mlp=cfg.d_mlp,
            d_vocab=cfg.d_vocab,
            n_ctx=cfg.max_seq_len,
            attn_only=False,
            normalization_type="LN" if cfg.norm != "none" else None,
            device=model.device,
            looped=cfg,
        )

    def hook_name(self, name: str) -> str:
        """`blocks.{i}.rest` -> `loops.{i // K}.blocks.{i % K}.rest`; other names unchanged."""
        match = _UNROLLED.match(name)
        if not match:
            return name
        loop, layer = divmod(int(match.group(1)), self.original_model.cfg.n_layers)
        if loop >= self.n_loops:
            raise KeyError(f"{name!r}: the unrolled view has {self.cfg.n_layers} blocks ({self.n_loops} loops)")
        return hook_name(match.group(2), loop=loop, layer=layer)

    def _translate(self, hooks):
        return [(self.hook_name(n) if isinstance(n, str) else n, fn) for n, fn in hooks]

    def run_with_hooks(self, *args, fwd_hooks=(), bwd_hooks=(), **kwargs):
        kwargs.setdefault("n_loops", self.n_loops)
        return self.original_model.run_with_hooks(
            *args, fwd_hooks=self._translate(fwd_hooks), bwd_hooks=self._translate(bwd_hooks), **kwargs
        )

    def run_with_cache(self, *args, **kwargs):
        kwargs.setdefault("n_loops", self.n_loops)
        return self.original_model.run_with_cache(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        kwargs.setdefault("n_loops", self.n_loops)
        return self.original_model(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.original_model, name)


def unrolled(model: LoopedTransformer, n_loops: int | None = None) -> UnrolledView:
    """A view of `model` that TransformerLens' patching helpers accept (see the module docstring)."""
    return UnrolledView(model, n_loops)
