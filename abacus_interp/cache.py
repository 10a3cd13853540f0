"""A TransformerLens `ActivationCache` that understands loops.

`LoopedTransformer.run_with_cache` returns a `LoopActivationCache`: the plain TransformerLens
cache (`cache[name]`, `keys()`, `to(device)`, `remove_batch_dim()`, ...) plus versions of its
residual-stream methods that walk over (loop, layer) in execution order:

    accumulated_resid   the residual after every block of every loop: the per-loop logit lens
    logit_lens          accumulated_resid(apply_ln=True) projected to logits
    decompose_resid     injected input, every attention and MLP output (and the carried state)
    stack_head_results  every head's output z @ W_O, per loop and layer
    stack_neuron_results, get_full_resid_decomposition   heads, neurons, input and biases
    apply_ln_to_stack, logit_attrs                       direct logit attribution on any stack
    stack_activation    one per-loop activation stacked over loops: [loop, ...]

Points in the computation are named by (loop, layer), as everywhere in this package: `layer`
is the layer inside the looped block, and "the residual entering (loop, layer)" is
`loops.{loop}.blocks.{layer}.hook_resid_pre`; `layer = n_layers` (or None) means the state
leaving the loop, and `loop = None` the last loop that ran. Labels follow the same scheme:
`L2_pre` (the state entering loop 2, after injection), `L2.0_mid`, `L2.0_post`,
`L2_input` (what loop 2 injects), `L2.0_attn_out`, `L2.0_mlp_out`, `L2.0H3` (loop 2, layer 0,
head 3), `L2.0N17` (neuron 17).

Which components add up to a residual depends on `cfg.input_injection`:

    "add"       state_pre[t] = state_post[t-1] + input: the whole history is additive, so the
                final residual = n_loops * input + every attention and MLP output of every loop.
    "none"      state_pre[t] = state_post[t-1]: additive too, the input enters once (loop 0).
    "norm_add"  state_pre[t] = ln_state(state_post[t-1]) + input: a LayerNorm sits between
                loops, so only the components *since the last normalisation* add up: the
                decomposition starts at the state entering the loop (`L{t}_state`, i.e.
                ln_state(state_post[t-1]), then `L{t}_input`) and covers that loop's blocks.

Every decomposition takes `from_loop` (default: the earliest loop from which the sum is exact,
0 for "add"/"none", the target loop for "norm_add"); a later start folds everything before it
into one `L{from_loop}_state` entry. With the defaults, the stack sums to the target residual.

LayerNorm: this model's norms carry no `hook_scale`, so the "cached scale" of a norm is
recomputed from the cached residual it normalises (the same number the forward pass used).
`apply_ln_to_stack` (and `apply_ln=True` in decompose_resid, stack_head_results,
get_full_resid_decomposition and logit_attrs) centres each component, divides by that scale of
the *target* residual and multiplies by the norm's weight `w`; the norm's bias belongs to no
component and is left out. (TransformerLens leaves out `w` too because its models fold it into
the next weights; this model does not fold.) So for the final residual,
`decompose_resid(apply_ln=True).sum(0) == ln_final(resid) - ln_final.b`, and
`logit_attrs(...)` sums to `logits - (ln_final.b @ W_U + b_U)` for each token.
`accumulated_resid(apply_ln=True)` instead *recomputes* the norm for every entry and applies the
full ln_final (w and b), as TransformerLens does for the logit lens: `stack @ W_U + b_U` gives
the logits the model would output if it stopped there, and its last entry the model's logits.

TransformerLens-style names and `(name, layer)` keys index the *unrolled* model, in which
block `i` is layer `i % n_layers` of loop `i // n_layers`: `cache["blocks.3.hook_resid_pre"]`
and `cache["resid_pre", 3]` are `loops.{3 // K}.blocks.{3 % K}.hook_resid_pre`. A three-part
key with an integer third element is `(name, layer, loop)`, the arguments of `act_name`.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Literal

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import ActivationCache
from transformer_lens.utilities import Slice, SliceInput

if TYPE_CHECKING:
    from .model import LoopedTransformer

logger = logging.getLogger(__name__)

_LOOP_KEY = re.compile(r"^loops\.(\d+)\.")
_UNROLLED_KEY = re.compile(r"^blocks\.(\d+)\.(.+)$")
_PER_LOOP_NAMES = ("state_pre", "state_post")

Stack = Float[Tensor, "component *batch_and_pos d_model"]
StackOut = Float[Tensor, "component *batch_and_pos_out d_model"]
Attrs = Float[Tensor, "component *batch_and_pos"]
AnyTokens = Int[Tensor, "*shape"]


def _slice(pos_slice) -> Slice:
    return pos_slice if isinstance(pos_slice, Slice) else Slice(pos_slice)


class LoopActivationCache(ActivationCache):
    """TransformerLens' ActivationCache for a `LoopedTransformer` run; see the module docstring.

    `n_loops` is how many loops the run used (`run_with_cache` passes it; otherwise it is read
    off the cached names)."""

    def __init__(
        self,
        cache_dict: dict[str, Tensor],
        model: LoopedTransformer,
        has_batch_dim: bool = True,
        n_loops: int | None = None,
    ):
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)
        if n_loops is None:
            found = [int(m.group(1)) for k in cache_dict if (m := _LOOP_KEY.match(k))]
            n_loops = max(found) + 1 if found else model.cfg.n_loops
        self.n_loops = n_loops

    # ---------------------------------------------------------------- lookup
    @property
    def _cfg(self):
        return self.model.cfg

    def __contains__(self, key) -> bool:
        return key in self.cache_dict

    def __repr__(self) -> str:
        return f"LoopActivationCache({self.n_loops} loops, {len(self.cache_dict)} activations)"

    def __getitem__(self, key) -> Tensor:
        from .model import act_name

        if isinstance(key, str):
            if key in self.cache_dict:
                return self.cache_dict[key]
            match = _UNROLLED_KEY.match(key)
            if match:
                loop, layer = divmod(int(match.group(1)), self._cfg.n_layers)
                return self._lookup(f"loops.{loop}.blocks.{layer}.{match.group(2)}")
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

    def _start(self, loop: int, from_loop: int | None) -> int:
        """The first loop of an exact additive decomposition of a residual in `loop`."""
        earliest = loop if self._cfg.input_injection == "norm_add" else 0
        if from_loop is None:
            return earliest
        start = self._norm_loop(from_loop)
        if start > loop:
            raise ValueError(f"from_loop={from_loop} is after loop={loop}")
        if start < earliest:
            raise ValueError(
                f"from_loop={from_loop}: with input_injection='norm_add' the state is LayerNormed "
                f"between loops, so a residual in loop {loop} is a sum of components from loop "
                f"{loop} on only (its `L{loop}_state` entry is ln_state of the previous loop's output)"
            )
        return start

    def _blocks(self, start: int, loop: int, layer: int):
        """(t, l) of every block that ran from loop `start` up to the input of (loop, layer)."""
        for t in range(start, loop + 1):
            for li in range(layer if t == loop else self._cfg.n_layers):
                yield t, li

    # ------------------------------------------------------------- residuals
    def resid_pre(self, loop: int, layer: int) -> Float[Tensor, "*batch_and_pos d_model"]:
        """The residual entering layer `layer` of `loop` (layer n_layers: the loop's output)."""
        k = self._cfg.n_layers
        if layer == k:
            return self._first(f"loops.{loop}.hook_state_post", f"loops.{loop}.blocks.{k - 1}.hook_resid_post")
        names = [f"loops.{loop}.blocks.{layer}.hook_resid_pre"]
        names += [f"loops.{loop}.hook_state_pre"] if layer == 0 else [f"loops.{loop}.blocks.{layer - 1}.hook_resid_post"]
        return self._first(*names)

    def _target(self, loop: int, layer: int, mlp_input: bool) -> Tensor:
        if mlp_input:
            if layer == self._cfg.n_layers:
                raise ValueError("mlp_input=True needs a layer inside the block, not the loop's output")
            return self._lookup(f"loops.{loop}.blocks.{layer}.hook_resid_mid")
        return self.resid_pre(loop, layer)

    def accumulated_resid(
        self,
        loop: int | None = None,
        layer: int | None = None,
        incl_mid: bool = False,
        apply_ln: bool = False,
        pos_slice: Slice | SliceInput = None,
        return_labels: bool = False,
        *,
        mlp_input: bool = False,
        from_loop: int = 0,
    ) -> Stack | tuple[Stack, list[str]]:
        """The residual stream at every point up to the input of (loop, layer), in execution order.

        Per loop t: `L{t}_pre` (the state entering the loop, after injection), then for each
        layer l `L{t}.{l}_post` (and `L{t}.{l}_mid` with incl_mid). The defaults run to the end
        of the last loop, so the last entry is ln_final's input (the last loop's state_post).
        `mlp_input` adds the resid_mid of (loop, layer). `apply_ln=True` applies ln_final to
        every entry with its statistics recomputed (the logit lens; see the module docstring),
        so `stack @ model.W_U_effective + model.b_U` is the per-loop, per-layer logit lens."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        pos_slice = _slice(pos_slice)
        parts, labels = [], []
        for t in range(self._norm_loop(from_loop), loop + 1):
            parts.append(self.resid_pre(t, 0))
            labels.append(f"L{t}_pre")
            for li in range(layer if t == loop else self._cfg.n_layers):
                if incl_mid:
                    parts.append(self._lookup(f"loops.{t}.blocks.{li}.hook_resid_mid"))
                    labels.append(f"L{t}.{li}_mid")
                parts.append(self.resid_pre(t, li + 1))
                labels.append(f"L{t}.{li}_post")
        if mlp_input:
            parts.append(self._target(loop, layer, True))
            labels.append(f"L{loop}.{layer}_mid")
        stack = torch.stack([pos_slice.apply(p, dim=-2) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, recompute_ln=True, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def logit_lens(
        self,
        loop: int | None = None,
        layer: int | None = None,
        incl_mid: bool = False,
        pos_slice: Slice | SliceInput = None,
        return_labels: bool = False,
    ) -> Float[Tensor, "component *batch_and_pos d_vocab"] | tuple[Tensor, list[str]]:
        """Logits read off every entry of `accumulated_resid`: ln_final (recomputed), W_U, b_U."""
        stack, labels = self.accumulated_resid(loop, layer, incl_mid, True, pos_slice, True)
        logits = stack @ self.model.W_U_effective.detach().to(stack) + self.model.b_U.detach().to(stack)
        return (logits, labels) if return_labels else logits

    def _carried(self, start: int) -> tuple[list[Tensor], list[str]]:
        """The state carried into loop `start` (> 0), without the input injected there."""
        state_pre = self.resid_pre(start, 0)
        if self._cfg.input_injection != "none":
            state_pre = state_pre - self._lookup("hook_input")
        return [state_pre], [f"L{start}_state"]

    def _input(self, t: int, split_input: bool) -> tuple[list[Tensor], list[str]]:
        if t > 0 and self._cfg.input_injection == "none":
            return [], []
        if not split_input:
            return [self._lookup("hook_input")], [f"L{t}_input"]
        parts, labels = [self._lookup("hook_embed")], [f"L{t}_embed"]
        if self._cfg.positional != "none":
            parts.append(self._lookup("hook_pos_embed"))
            labels.append(f"L{t}_pos_embed")
        return parts, labels

    def decompose_resid(
        self,
        loop: int | None = None,
        layer: int | None = None,
        mlp_input: bool = False,
        mode: Literal["all", "mlp", "attn"] = "all",
        apply_ln: bool = False,
        pos_slice: Slice | SliceInput = None,
        incl_embeds: bool = True,
        return_labels: bool = False,
        *,
        from_loop: int | None = None,
        split_input: bool = False,
    ) -> Stack | tuple[Stack, list[str]]:
        """The residual entering (loop, layer) as a stack of what wrote it, in execution order.

        Entries: `L{from_loop}_state` when the decomposition starts after loop 0 (always for
        "norm_add": the normalised state of the previous loop), then per loop `L{t}_input` (or
        `L{t}_embed`, `L{t}_pos_embed` with split_input; only loop 0 with injection "none"),
        then `L{t}.{l}_attn_out` and `L{t}.{l}_mlp_out`. With mode="all" and incl_embeds the
        stack sums to the residual (to float error). `mlp_input` adds the attention output of
        (loop, layer) itself, i.e. decomposes the MLP's input. `apply_ln` applies the norm that
        reads this residual (ln_final for a loop's output, else ln1/ln2) with its cached scale."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop)
        pos_slice = _slice(pos_slice)
        parts, labels = [], []

        def add(more):
            parts.extend(more[0])
            labels.extend(more[1])

        if incl_embeds and start > 0:
            add(self._carried(start))
        done_inputs = set()
        for t, li in [*self._blocks(start, loop, layer), *([(loop, layer)] if mlp_input else [])]:
            if incl_embeds and t not in done_inputs:
                done_inputs.add(t)
                add(self._input(t, split_input))
            prefix = f"loops.{t}.blocks.{li}"
            if mode != "mlp":
                add(([self._lookup(f"{prefix}.hook_attn_out")], [f"L{t}.{li}_attn_out"]))
            if mode != "attn" and not (mlp_input and (t, li) == (loop, layer)):
                add(([self._lookup(f"{prefix}.hook_mlp_out")], [f"L{t}.{li}_mlp_out"]))
        if incl_embeds and loop not in done_inputs:
            add(self._input(loop, split_input))
        stack = self._stack(parts, pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, loop, layer, mlp_input, pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def _stack(self, parts: list[Tensor], pos_slice: Slice) -> Tensor:
        if parts:
            return torch.stack([pos_slice.apply(p, dim=-2) for p in parts])
        like = pos_slice.apply(self._lookup("hook_input"), dim=-2)
        return like.new_zeros((0, *like.shape))

    # ----------------------------------------------------------------- heads
    def head_results(self, loop: int, layer: int) -> Float[Tensor, "*batch_and_pos head d_model"]:
        """Each head's write to the residual, hook_z @ W_O (without b_O), for one loop and layer."""
        name = f"loops.{loop}.blocks.{layer}.attn.hook_result"
        if name in self.cache_dict:
            return self.cache_dict[name]
        z = self._lookup(f"loops.{loop}.blocks.{layer}.attn.hook_z")
        w_o = self.model.blocks[layer].attn.W_O.detach().to(z)
        return einops.einsum(z, w_o, "... head d_head, head d_head d_model -> ... head d_model")

    def _heads(self, t: int, li: int, pos_slice: Slice) -> Float[Tensor, "head *batch_and_pos d_model"]:
        result = pos_slice.apply(self.head_results(t, li), dim=-3)  # [... head d_model]
        return einops.rearrange(result, "... head d_model -> head ... d_model")

    def _neurons(self, t: int, li: int, pos_slice: Slice) -> Float[Tensor, "neuron *batch_and_pos d_model"]:
        post = pos_slice.apply(self._lookup(f"loops.{t}.blocks.{li}.mlp.hook_post"), dim=-2)
        w_out = self.model.blocks[li].mlp.W_out.detach().to(post)
        return einops.einsum(post, w_out, "... n, n d -> n ... d")

    def compute_head_results(self) -> None:
        """Store head_results(t, l) as `loops.{t}.blocks.{l}.attn.hook_result` for every loop."""
        for t in range(self.n_loops):
            for li in range(self._cfg.n_layers):
                self.cache_dict[f"loops.{t}.blocks.{li}.attn.hook_result"] = self.head_results(t, li)

    def stack_head_results(
        self,
        loop: int | None = None,
        layer: int | None = None,
        return_labels: bool = False,
        incl_remainder: bool = False,
        pos_slice: Slice | SliceInput = None,
        apply_ln: bool = False,
        *,
        from_loop: int | None = None,
    ) -> Stack | tuple[Stack, list[str]]:
        """Every head's output (z @ W_O, no b_O) in the blocks before (loop, layer), from
        `from_loop` on (default: as decompose_resid), labelled `L{t}.{l}H{h}`, ordered
        (loop, layer, head): a stack of one whole run reshapes to [loop, layer, head, ...].
        `incl_remainder` adds the target residual minus the heads' sum."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop)
        pos_slice = _slice(pos_slice)
        parts, labels = [], []
        for t, li in self._blocks(start, loop, layer):
            parts.append(self._heads(t, li, pos_slice))
            labels += [f"L{t}.{li}H{h}" for h in range(self._cfg.n_heads)]
        stack = torch.cat(parts) if parts else self._stack([], pos_slice)
        if incl_remainder:
            target = pos_slice.apply(self._target(loop, layer, False), dim=-2)
            stack = torch.cat([stack, (target - stack.sum(0))[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, loop, layer, False, pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def stack_neuron_results(
        self,
        loop: int | None = None,
        layer: int | None = None,
        pos_slice: Slice | SliceInput = None,
        return_labels: bool = False,
        apply_ln: bool = False,
        *,
        from_loop: int | None = None,
    ) -> Stack | tuple[Stack, list[str]]:
        """Every MLP neuron's write (post[n] * W_out[n], no b_out) in the blocks before
        (loop, layer), labelled `L{t}.{l}N{n}`. Memory: d_mlp x d_model per position and block."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop)
        pos_slice = _slice(pos_slice)
        parts, labels = [], []
        for t, li in self._blocks(start, loop, layer):
            parts.append(self._neurons(t, li, pos_slice))
            labels += [f"L{t}.{li}N{n}" for n in range(self._cfg.d_mlp)]
        stack = torch.cat(parts) if parts else self._stack([], pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, loop, layer, False, pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def get_full_resid_decomposition(
        self,
        loop: int | None = None,
        layer: int | None = None,
        mlp_input: bool = False,
        expand_neurons: bool = True,
        apply_ln: bool = False,
        pos_slice: Slice | SliceInput = None,
        return_labels: bool = False,
        *,
        from_loop: int | None = None,
        split_input: bool = False,
    ) -> Stack | tuple[Stack, list[str]]:
        """The residual entering (loop, layer) split into every head and neuron (or MLP layer
        with expand_neurons=False), in execution order: `L{from_loop}_state` (if the start is
        after loop 0), per loop `L{t}_input`, then per block `L{t}.{l}H{h}` and `L{t}.{l}N{n}`
        (or `L{t}.{l}_mlp_out`), and last `bias`: every b_O (and b_out when neurons are
        expanded) of the blocks covered. Sums to the residual."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop)
        pos_slice = _slice(pos_slice)
        parts, labels = [], []
        if start > 0:
            carried, names = self._carried(start)
            parts.append(self._stack(carried, pos_slice))
            labels += names
        bias = torch.zeros_like(self.model.blocks[0].attn.b_O)
        done_inputs = set()
        blocks = [*self._blocks(start, loop, layer), *([(loop, layer)] if mlp_input else [])]
        for t, li in blocks:
            if t not in done_inputs:
                done_inputs.add(t)
                inputs, names = self._input(t, split_input)
                parts.append(self._stack(inputs, pos_slice))
                labels += names
            parts.append(self._heads(t, li, pos_slice))
            labels += [f"L{t}.{li}H{h}" for h in range(self._cfg.n_heads)]
            bias = bias + self.model.blocks[li].attn.b_O.detach()
            if mlp_input and (t, li) == (loop, layer):
                continue
            if expand_neurons:
                parts.append(self._neurons(t, li, pos_slice))
                labels += [f"L{t}.{li}N{n}" for n in range(self._cfg.d_mlp)]
                bias = bias + self.model.blocks[li].mlp.b_out.detach()
            else:
                parts.append(self._stack([self._lookup(f"loops.{t}.blocks.{li}.hook_mlp_out")], pos_slice))
                labels.append(f"L{t}.{li}_mlp_out")
        if loop not in done_inputs:
            inputs, names = self._input(loop, split_input)
            parts.append(self._stack(inputs, pos_slice))
            labels += names
        like = self._stack([self._lookup("hook_input")], pos_slice)
        parts.append(bias.to(like).expand_as(like))
        labels.append("bias")
        stack = torch.cat(parts)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, loop, layer, mlp_input, pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    # ------------------------------------------------------- norms and logits
    def _norm_module(self, layer: int, mlp_input: bool):
        if layer == self._cfg.n_layers:
            return self.model.ln_final
        block = self.model.blocks[layer]
        return block.ln2 if mlp_input else block.ln1

    def apply_ln_to_stack(
        self,
        residual_stack: Stack,
        loop: int | None = None,
        layer: int | None = None,
        mlp_input: bool = False,
        pos_slice: Slice | SliceInput = None,
        batch_slice: Slice | SliceInput = None,
        has_batch_dim: bool = True,
        recompute_ln: bool = False,
    ) -> StackOut:
        """Apply the norm that reads the residual at (loop, layer) to every component.

        layer = n_layers (default) is ln_final applied to the state leaving `loop` (default the
        last loop: the model's own final norm); otherwise ln1 (ln2 with mlp_input) of that
        block. Cached scale (default): centre, divide by the target residual's scale, multiply
        by the norm weight, no bias. recompute_ln=True: the full norm on each entry with its own
        statistics. `pos_slice` must already be applied to the stack; batch_slice is applied
        here. A model with norm="none" gets the stack back unchanged."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        pos_slice, batch_slice = _slice(pos_slice), _slice(batch_slice)
        if has_batch_dim:
            residual_stack = batch_slice.apply(residual_stack, dim=1)
        norm = self._norm_module(layer, mlp_input)
        if not norm.enabled:
            return residual_stack
        w, b = norm.w.detach().to(residual_stack), norm.b.detach().to(residual_stack)
        if recompute_ln:
            return F.layer_norm(residual_stack, (residual_stack.shape[-1],), w, b, norm.eps)
        target = pos_slice.apply(self._target(loop, layer, mlp_input), dim=-2)
        if has_batch_dim and self.has_batch_dim:
            target = batch_slice.apply(target, dim=0)
        scale = (target.var(dim=-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
        centred = residual_stack - residual_stack.mean(dim=-1, keepdim=True)
        return centred / scale.to(centred) * w

    def tokens_to_residual_directions(
        self, tokens: str | int | AnyTokens
    ) -> Float[Tensor, "*shape d_model"]:
        """The unembedding column(s) W_U_effective[:, token]; a string is one vocabulary symbol."""
        if isinstance(tokens, str):
            ids = self._cfg.vocab.encode(tokens)
            if len(ids) != 1:
                raise ValueError(f"{tokens!r} is {len(ids)} tokens; pass one symbol or token ids")
            tokens = ids[0]
        w_u = self.model.W_U_effective.detach()
        tokens = torch.as_tensor(tokens, device=w_u.device)
        return w_u[:, tokens].movedim(0, -1)

    def logit_attrs(
        self,
        residual_stack: Stack,
        tokens: str | int | AnyTokens,
        incorrect_tokens: str | int | AnyTokens | None = None,
        pos_slice: Slice | SliceInput = None,
        batch_slice: Slice | SliceInput = None,
        has_batch_dim: bool = True,
        *,
        loop: int | None = None,
    ) -> Attrs:
        """Direct logit attribution: each component's contribution to the logit of `tokens`
        (minus `incorrect_tokens`), through ln_final with the cached scale of the state leaving
        `loop` (default the last loop, the real output; an earlier loop gives the attribution
        of that loop's logit lens). A full decomposition of that state sums to the logit
        minus (ln_final.b @ W_U + b_U)[token]. `tokens` may be one token, one per batch row or
        one per (batch, position), as in TransformerLens."""
        directions = self.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            wrong = self.tokens_to_residual_directions(incorrect_tokens)
            if wrong.shape != directions.shape:
                raise ValueError(f"tokens and incorrect_tokens differ in shape: {directions.shape} vs {wrong.shape}")
            directions = directions - wrong
        scaled = self.apply_ln_to_stack(
            residual_stack, loop, None, False, pos_slice, batch_slice, has_batch_dim=has_batch_dim
        )
        directions = directions.to(scaled)
        batch_slice = _slice(batch_slice)
        if (
            has_batch_dim
            and batch_slice.mode != "int"
            and scaled.ndim == 4
            and directions.ndim == 2
            and directions.shape[0] == scaled.shape[1]
        ):
            directions = directions.unsqueeze(-2)  # one token per example, broadcast over positions
        return (scaled * directions).sum(dim=-1)

    # ------------------------------------------------------------ stacking
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
        from .model import act_name

        loops = range(self.n_loops) if loops is None else [self._norm_loop(t) for t in loops]
        if activation_name.startswith(("blocks.", "hook_state")):
            return torch.stack([self._lookup(f"loops.{t}.{activation_name}") for t in loops])
        short = activation_name.removeprefix("hook_")
        if short in _PER_LOOP_NAMES:
            return torch.stack([self._lookup(act_name(short, loop=t)) for t in loops])
        if layer is None:
            layers = range(self._cfg.n_layers)
            return torch.stack([torch.stack([self._lookup(act_name(short, li, t)) for li in layers]) for t in loops])
        layer = self._norm_layer(layer)
        return torch.stack([self._lookup(act_name(short, layer, t)) for t in loops])

    # --------------------------------------------------------- bookkeeping
    def apply_slice_to_batch_dim(self, batch_slice: Slice | SliceInput) -> LoopActivationCache:
        sliced = super().apply_slice_to_batch_dim(batch_slice)
        return LoopActivationCache(sliced.cache_dict, self.model, sliced.has_batch_dim, self.n_loops)

    def get_neuron_results(self, *args, **kwargs):
        raise NotImplementedError("use stack_neuron_results(loop, layer, ...) on a looped model")
