"""The residual stream of a looped run, accumulated (logit lens) or decomposed into what wrote it.

Which components add up to a residual depends on `cfg.input_injection`:

    "add"       state_pre[t] = state_post[t-1] + input: the whole history is additive, so the
                final residual = n_loops * input + every attention and MLP output of every loop.
    "none"      state_pre[t] = state_post[t-1]: additive too, the input enters once (loop 0).
    "norm_add"  state_pre[t] = ln_state(state_post[t-1]) + input: a LayerNorm sits between
                loops, so only the components *since the last normalisation* add up: the
                decomposition starts at the state entering the loop ("loop {t+1} state", i.e.
                ln_state(state_post[t-1]), then "loop {t+1} input") and covers that loop's blocks.

Every decomposition takes `from_loop` (default: the earliest loop from which the sum is exact,
0 for "add"/"none", the target loop for "norm_add"); a later start folds everything before it
into one "loop {from_loop+1} state" entry. With the defaults, the stack sums to the target residual.
"""

from __future__ import annotations

from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.utilities import Slice, SliceInput

from ..hooks import hook_name, layer_label, loop_label
from .index import Stack, as_slice
from .norms import NormsAndLogits


class ResidualStream(NormsAndLogits):
    """accumulated_resid / logit_lens (the residual after every block of every loop) and
    decompose_resid (injected input, attention and MLP outputs, the carried state)."""

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

        Per loop t: "loop {t+1} pre" (the state entering the loop, after injection), then for each
        layer l "loop {t+1} L{l} post" (and "loop {t+1} L{l} mid" with incl_mid). The defaults run to the end
        of the last loop, so the last entry is ln_final's input (the last loop's state_post).
        `mlp_input` adds the resid_mid of (loop, layer). `apply_ln=True` applies ln_final to
        every entry with its statistics recomputed (the logit lens; see the module docstring),
        so `stack @ model.W_U_effective + model.b_U` is the per-loop, per-layer logit lens."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        pos_slice = as_slice(pos_slice)
        parts, labels = [], []
        for t in range(self._norm_loop(from_loop), loop + 1):
            parts.append(self.resid_pre(t, 0))
            labels.append(f"{loop_label(t)} pre")
            for li in range(layer if t == loop else self._cfg.n_layers):
                if incl_mid:
                    parts.append(self._lookup(hook_name("hook_resid_mid", loop=t, layer=li)))
                    labels.append(f"{layer_label(li, t)} mid")
                parts.append(self.resid_pre(t, li + 1))
                labels.append(f"{layer_label(li, t)} post")
        if mlp_input:
            parts.append(self._target(loop, layer, True))
            labels.append(f"{layer_label(layer, loop)} mid")
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
        return [state_pre], [f"{loop_label(start)} state"]

    def _input(self, t: int, split_input: bool) -> tuple[list[Tensor], list[str]]:
        if t > 0 and self._cfg.input_injection == "none":
            return [], []
        if not split_input:
            return [self._lookup("hook_input")], [f"{loop_label(t)} input"]
        parts, labels = [self._lookup("hook_embed")], [f"{loop_label(t)} embed"]
        if self._cfg.positional != "none":
            parts.append(self._lookup("hook_pos_embed"))
            labels.append(f"{loop_label(t)} pos_embed")
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

        Entries: "loop {from_loop+1} state" when the decomposition starts after loop 0 (always for
        "norm_add": the normalised state of the previous loop), then per loop "loop {t+1} input" (or
        "loop {t+1} embed", "loop {t+1} pos_embed" with split_input; only loop 0 with injection "none"),
        then "loop {t+1} L{l} attn_out" and "loop {t+1} L{l} mlp_out". With mode="all" and incl_embeds the
        stack sums to the residual (to float error). `mlp_input` adds the attention output of
        (loop, layer) itself, i.e. decomposes the MLP's input. `apply_ln` applies the norm that
        reads this residual (ln_final for a loop's output, else ln1/ln2) with its cached scale."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop, layer)
        pos_slice = as_slice(pos_slice)
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
            if mode != "mlp":
                add(([self._lookup(hook_name("hook_attn_out", loop=t, layer=li))], [f"{layer_label(li, t)} attn_out"]))
            if mode != "attn" and not (mlp_input and (t, li) == (loop, layer)):
                add(([self._lookup(hook_name("hook_mlp_out", loop=t, layer=li))], [f"{layer_label(li, t)} mlp_out"]))
        if incl_embeds and loop not in done_inputs:
            add(self._input(loop, split_input))
        stack = self._stack(parts, pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, loop, layer, mlp_input, pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

