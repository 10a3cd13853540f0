"""LayerNorm on component stacks and direct logit attribution, for `LoopActivationCache`.

This model's norms carry no `hook_scale`, so the "cached scale" of a norm is recomputed from
the cached residual it normalises (the same number the forward pass used). `apply_ln_to_stack`
(and `apply_ln=True` in decompose_resid, stack_head_results, get_full_resid_decomposition and
logit_attrs) centres each component, divides by that scale of the *target* residual and
multiplies by the norm's weight `w`; the norm's bias belongs to no component and is left out.
(TransformerLens leaves out `w` too because its models fold it into the next weights; this
model does not fold.) So for the final residual,
`decompose_resid(apply_ln=True).sum(0) == ln_final(resid) - ln_final.b`, and
`logit_attrs(...)` sums to `logits - (ln_final.b @ W_U + b_U)` for each token.
`accumulated_resid(apply_ln=True)` instead *recomputes* the norm for every entry and applies the
full ln_final (w and b), as TransformerLens does for the logit lens: `stack @ W_U + b_U` gives
the logits the model would output if it stopped there, and its last entry the model's logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from transformer_lens.utilities import Slice, SliceInput

from .index import AnyTokens, Attrs, LoopCacheIndex, Stack, StackOut, as_slice


class NormsAndLogits(LoopCacheIndex):
    """The norm that reads a residual, applied to a stack of its components, and each
    component's direct effect on a token's logit."""

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
        pos_slice, batch_slice = as_slice(pos_slice), as_slice(batch_slice)
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
        batch_slice = as_slice(batch_slice)
        if (
            has_batch_dim
            and batch_slice.mode != "int"
            and scaled.ndim == 4
            and directions.ndim == 2
            and directions.shape[0] == scaled.shape[1]
        ):
            directions = directions.unsqueeze(-2)  # one token per example, broadcast over positions
        return (scaled * directions).sum(dim=-1)

