"""Per-head and per-neuron writes to the residual stream of a looped run.

Heads are labelled "loop 1 L0H3" and neurons "loop 1 L0N7" (`core.hooks.head_label`: loops
counted from 1 in labels, from 0 in the `loop=` arguments), ordered
(loop, layer, head): a stack of one whole run reshapes to [loop, layer, head, ...].
`get_full_resid_decomposition` adds the injected input, the carried state and the biases, so
its stack sums to the residual, as `decompose_resid`'s does.
"""

from __future__ import annotations

import einops
import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.utilities import Slice, SliceInput

from ..hooks import head_label, hook_name, layer_label, neuron_label
from .index import Stack, as_slice
from .residual import ResidualStream


class HeadsAndNeurons(ResidualStream):
    """head_results, stack_head_results, stack_neuron_results, get_full_resid_decomposition."""

    def head_results(self, loop: int, layer: int) -> Float[Tensor, "*batch_and_pos head d_model"]:
        """Each head's write to the residual, hook_z @ W_O (without b_O), for one loop and layer."""
        name = hook_name("attn.hook_result", loop=loop, layer=layer)
        if name in self.cache_dict:
            return self.cache_dict[name]
        z = self._lookup(hook_name("attn.hook_z", loop=loop, layer=layer))
        w_o = self.model.blocks[layer].attn.W_O.detach().to(z)
        return einops.einsum(z, w_o, "... head d_head, head d_head d_model -> ... head d_model")

    def _heads(self, t: int, li: int, pos_slice: Slice) -> Float[Tensor, "head *batch_and_pos d_model"]:
        result = pos_slice.apply(self.head_results(t, li), dim=-3)  # [... head d_model]
        return einops.rearrange(result, "... head d_model -> head ... d_model")

    def _neurons(self, t: int, li: int, pos_slice: Slice) -> Float[Tensor, "neuron *batch_and_pos d_model"]:
        post = pos_slice.apply(self._lookup(hook_name("mlp.hook_post", loop=t, layer=li)), dim=-2)
        w_out = self.model.blocks[li].mlp.W_out.detach().to(post)
        return einops.einsum(post, w_out, "... n, n d -> n ... d")

    def compute_head_results(self) -> None:
        """Store head_results(t, l) as `loops.{t}.blocks.{l}.attn.hook_result` for every loop."""
        for t in range(self.n_loops):
            for li in range(self._cfg.n_layers):
                self.cache_dict[hook_name("attn.hook_result", loop=t, layer=li)] = self.head_results(t, li)

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
        `from_loop` on (default: as decompose_resid), labelled `head_label(l, h, t)`, ordered
        (loop, layer, head): a stack of one whole run reshapes to [loop, layer, head, ...].
        `incl_remainder` adds the target residual minus the heads' sum."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop, layer)
        pos_slice = as_slice(pos_slice)
        parts, labels = [], []
        for t, li in self._blocks(start, loop, layer):
            parts.append(self._heads(t, li, pos_slice))
            labels += [head_label(li, h, t) for h in range(self._cfg.n_heads)]
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
        (loop, layer), labelled `neuron_label(l, n, t)`. Memory: d_mlp x d_model per position and block."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop, layer)
        pos_slice = as_slice(pos_slice)
        parts, labels = [], []
        for t, li in self._blocks(start, loop, layer):
            parts.append(self._neurons(t, li, pos_slice))
            labels += [neuron_label(li, n, t) for n in range(self._cfg.d_mlp)]
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
        with expand_neurons=False), in execution order: "loop {from_loop+1} state" (if the start is
        after loop 0), per loop "loop {t+1} input", then per block "loop {t+1} L{l}H{h}" and "loop {t+1} L{l}N{n}"
        (or "loop {t+1} L{l} mlp_out"), and last `bias`: every b_O (and b_out when neurons are
        expanded) of the blocks covered. Sums to the residual."""
        loop, layer = self._norm_loop(loop), self._norm_layer(layer)
        start = self._start(loop, from_loop, layer)
        pos_slice = as_slice(pos_slice)
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
            labels += [head_label(li, h, t) for h in range(self._cfg.n_heads)]
            bias = bias + self.model.blocks[li].attn.b_O.detach()
            if mlp_input and (t, li) == (loop, layer):
                continue
            if expand_neurons:
                parts.append(self._neurons(t, li, pos_slice))
                labels += [neuron_label(li, n, t) for n in range(self._cfg.d_mlp)]
                bias = bias + self.model.blocks[li].mlp.b_out.detach()
            else:
                parts.append(self._stack([self._lookup(hook_name("hook_mlp_out", loop=t, layer=li))], pos_slice))
                labels.append(f"{layer_label(li, t)} mlp_out")
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

    def get_neuron_results(self, *args, **kwargs):
        raise NotImplementedError("use stack_neuron_results(loop, layer, ...) on a looped model")
