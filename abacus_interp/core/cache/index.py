"""Finding activations in a looped run's cache: keys, (loop, layer) points, per-loop stacks.

Points in the computation are named by (loop, layer), as everywhere in this package: `layer`
is the layer inside the looped block, and "the residual entering (loop, layer)" is
`loops.{loop}.blocks.{layer}.hook_resid_pre`; `layer = n_layers` (or None) means the state
leaving the loop, and `loop = None` the last loop that ran.

TransformerLens-style names and `(name, layer)` keys index the *unrolled* model, in which
block `i` is layer `i % n_layers` of loop `i // n_layers`: `cache["blocks.3.hook_resid_pre"]`
and `cache["resid_pre", 3]` are `loops.{3 // K}.blocks.{3 % K}.hook_resid_pre`. A three-part
key with an integer third element is `(name, layer, loop)`, the arguments of `act_name`.

The residual and component stacks (`residual.py`, `components.py`) build on the helpers here:
which blocks ran before a point (`_blocks`), from which loop a sum is exact (`_start`), and
the residual at any point (`resid_pre`, `_target`).
"""

from __future__ import annotations

import re

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import ActivationCache
from transformer_lens.utilities import Slice, SliceInput

from ..hooks import act_name, hook_name, loop_label

_LOOP_KEY = re.compile(r"^loops\.(\d+)\.")
_UNROLLED_KEY = re.compile(r"^blocks\.(\d+)\.(.+)$")
_PER_LOOP_NAMES = ("state_pre", "state_post")

Stack = Float[Tensor, "component *batch_and_pos d_model"]
StackOut = Float[Tensor, "component *batch_and_pos_out d_model"]
Attrs = Float[Tensor, "component *batch_and_pos"]
AnyTokens = Int[Tensor, "*shape"]


def as_slice(pos_slice: Slice | SliceInput) -> Slice:
    """TransformerLens' Slice from anything its methods accept (None, an int, a list, ...)."""
    return pos_slice if isinstance(pos_slice, Slice) else Slice(pos_slice)


class LoopCacheIndex(ActivationCache):
    """The lookup layer of `LoopActivationCache`: keys, loop and layer arithmetic, and the
    residual at any (loop, layer). `model` is the `LoopedTransformer` that ran (left
    unannotated: core/model.py imports this package, so this one does not import it back).
    `n_loops` is how many loops the run used (`run_with_cache` passes it; otherwise it is
    read off the cached names)."""

    def __init__(
        self,
        cache_dict: dict[str, Tensor],
        model,
        has_batch_dim: bool = True,
        n_loops: int | None = None,
    ):
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)
        if n_loops is None:
            found = [int(m.group(1)) for k in cache_dict if (m := _LOOP_KEY.match(k))]
            n_loops = max(found) + 1 if found else model.cfg.n_loops
        self.n_loops = n_loops

    @property
    def _cfg(self):
        return self.model.cfg

    def __contains__(self, key) -> bool:
        return key in self.cache_dict

    def __getitem__(self, key) -> Tensor:
        if isinstance(key, str):
            if key in self.cache_dict:
                return self.cache_dict[key]
            match = _UNROLLED_KEY.match(key)
            if match:
                loop, layer = divmod(int(match.group(1)), self._cfg.n_layers)
                return self._lookup(hook_name(match.group(2), loop=loop, layer=layer))
            try:
                return self._lookup(act_name(key))
            except ValueError as err:
                raise KeyError(f"{key!r}: {err}") from None
        name, *rest = key
        layer = rest[0] if rest else None
        if len(rest) > 1 and isinstance(rest[1], int):  # (name, layer, loop), as in act_name
            loop = rest[1] if rest[1] >= 0 else self.n_loops + rest[1]
            if layer is not None and layer < 0:
                layer += self._cfg.n_layers
            return self._lookup(act_name(name, layer, loop))
        if layer is None:  # ("embed",) or ("ln_final", None)
            return self._lookup(act_name(name))
        total = self.n_loops * self._cfg.n_layers  # (name, i[, "attn"]): unrolled block i
        loop, layer = divmod(layer if layer >= 0 else total + layer, self._cfg.n_layers)
        return self._lookup(act_name(name, layer, loop))

    def _lookup(self, name: str) -> Tensor:
        try:
            return self.cache_dict[name]
        except KeyError:
            loop = _LOOP_KEY.match(name)
            if loop and int(loop.group(1)) >= self.n_loops:
                why = f"the run used {self.n_loops} loops"
            else:
                why = "it was not cached (check run_with_cache's names_filter)"
            raise KeyError(f"{name!r} is not in this cache: {why}") from None

    def _first(self, *names: str) -> Tensor:
        """The first of several names that hold the same tensor, e.g. state_pre and resid_pre."""
        for name in names:
            if name in self.cache_dict:
                return self.cache_dict[name]
        return self._lookup(names[0])

    def _norm_loop(self, loop: int | None) -> int:
        if loop is None:
            return self.n_loops - 1
        out = loop + self.n_loops if loop < 0 else loop
        if not 0 <= out < self.n_loops:
            raise IndexError(f"loop={loop}: this run has loops 0..{self.n_loops - 1}")
        return out

    def _norm_layer(self, layer: int | None) -> int:
        k = self._cfg.n_layers
        if layer is None:
            return k
        out = layer + k if layer < 0 else layer
        if not 0 <= out <= k:
            raise IndexError(f"layer={layer}: the looped block has layers 0..{k - 1} ({k} = the loop's output)")
        return out

    def _start(self, loop: int, from_loop: int | None, layer: int = 0) -> int:
        """The first loop of an exact additive decomposition of the residual entering (loop, layer)."""
        earliest = loop if self._cfg.input_injection == "norm_add" else 0
        start = earliest if from_loop is None else self._norm_loop(from_loop)
        if start > loop:
            raise ValueError(f"from_loop={from_loop} is after loop={loop}")
        if start < earliest:
            raise ValueError(
                f"from_loop={from_loop}: with input_injection='norm_add' the state is LayerNormed "
                f"between loops, so a residual in loop={loop} is a sum of components from that loop on only "
                f"(its '{loop_label(loop)} state' entry is ln_state of the previous loop's output)"
            )
        self._check_no_hold_between(start, loop, layer)
        return start

    def _check_no_hold_between(self, start: int, loop: int, layer: int) -> None:
        """ValueError where a loop from `start` up to (loop, layer) ends in the list's hold
        (`list_items_settle_after`): its output there is not what its layers wrote."""
        settle, k = self._cfg.list_items_settle_after, self._cfg.n_layers
        held = None if settle is None else max(start, settle)  # the first held loop in the span
        if held is not None and (held < loop or (held == loop and layer == k)):
            raise ValueError(
                f"with list_items_settle_after={settle} the list's tokens leave every loop from {loop_label(settle)} "
                f"on with the state they had, not with what the layers wrote, so no stack of writes sums to a "
                f"residual past that: decompose one inside {loop_label(settle)} or before (loop <= {settle}, "
                f"layer < {k})")

    def _blocks(self, start: int, loop: int, layer: int):
        """(t, l) of every block that ran from loop `start` up to the input of (loop, layer)."""
        for t in range(start, loop + 1):
            for li in range(layer if t == loop else self._cfg.n_layers):
                yield t, li

    def resid_pre(self, loop: int, layer: int) -> Float[Tensor, "*batch_and_pos d_model"]:
        """The residual entering layer `layer` of `loop` (layer n_layers: the loop's output)."""
        k = self._cfg.n_layers
        if layer == k:
            return self._first(hook_name("hook_state_post", loop=loop),
                               hook_name("hook_resid_post", loop=loop, layer=k - 1))
        if layer == 0:
            entering = hook_name("hook_state_pre", loop=loop)
        else:
            entering = hook_name("hook_resid_post", loop=loop, layer=layer - 1)
        return self._first(hook_name("hook_resid_pre", loop=loop, layer=layer), entering)

    def _target(self, loop: int, layer: int, mlp_input: bool) -> Tensor:
        if mlp_input:
            if layer == self._cfg.n_layers:
                raise ValueError("mlp_input=True needs a layer inside the block, not the loop's output")
            return self._lookup(hook_name("hook_resid_mid", loop=loop, layer=layer))
        return self.resid_pre(loop, layer)

    def _stack(self, parts: list[Tensor], pos_slice: Slice) -> Tensor:
        if parts:
            return torch.stack([pos_slice.apply(p, dim=-2) for p in parts])
        like = pos_slice.apply(self._lookup("hook_input"), dim=-2)
        return like.new_zeros((0, *like.shape))

    def stack_activation(
        self,
        activation_name: str,
        layer: int | None = None,
        loops: range | list[int] | None = None,
    ) -> Float[Tensor, "loop ..."]:
        """One per-loop activation stacked over loops: [loop, ...].

        `activation_name` is a short name (`"pattern"`, `"resid_post"`, `"state_pre"`, as for
        act_name) or a name inside a loop (`"blocks.0.attn.hook_pattern"`, `"hook_state_post"`).
        A per-layer short name with layer=None gives [loop, layer, ...]. `loops` defaults to
        every loop of the run."""
        loops = range(self.n_loops) if loops is None else [self._norm_loop(t) for t in loops]
        if activation_name.startswith(("blocks.", "hook_state")):
            return torch.stack([self._lookup(hook_name(activation_name, loop=t)) for t in loops])
        short = activation_name.removeprefix("hook_")
        if short in _PER_LOOP_NAMES:
            return torch.stack([self._lookup(act_name(short, loop=t)) for t in loops])
        if layer is None:
            layers = range(self._cfg.n_layers)
            return torch.stack([torch.stack([self._lookup(act_name(short, li, t)) for li in layers]) for t in loops])
        layer = self._norm_layer(layer)
        return torch.stack([self._lookup(act_name(short, layer, t)) for t in loops])

    def apply_slice_to_batch_dim(self, batch_slice: Slice | SliceInput) -> LoopCacheIndex:
        # TransformerLens builds a plain ActivationCache here; keep the loop-aware class.
        sliced = super().apply_slice_to_batch_dim(batch_slice)
        return type(self)(sliced.cache_dict, self.model, sliced.has_batch_dim, self.n_loops)
