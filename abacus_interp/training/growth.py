"""Growing a trained model for a warm start (`train.init_from`) so that it still computes the
source's function at step 0: a wider MLP (`model.d_mlp`), more layers (`model.n_layers`) or more
heads (`model.n_heads`, with d_head kept), or a partial-product readout of more multiplier digits
(`model.partial_product_probe`).

Why: a run that has levelled off may lack room rather than steps. Growing it keeps what it
learned, where a fresh wider model would have to learn it all again.

- Wider MLP: the source's units keep their weights in the leading columns; the new units get a
  fresh input projection and a zero output projection, so they add nothing until trained (their
  output weights get a gradient at once, as their activations are not zero).
- More layers (the looped family): each added block starts with zero attention and MLP output
  projections, so the pre-norm residual block is the identity, and the looped stack computes
  what the source did. Other families' blocks hold more than attention and an MLP (retran's
  recurrence) or no residual at all (lstm): their added layers start fresh.
- More heads: each of the source's heads becomes the first head of its kind not yet taken
  (`head_placement`: a number head stays a number head when a symbol head is put before it);
  the new heads get fresh queries, keys and values and a zero output projection.
- A readout of more partial products: the source's readout of products j < k keeps its weights;
  those of the new multiplier digits start fresh. A readout writes nothing into the state, so
  the model's answers are the source's whatever the new rows hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

# the MLP tensors and the axis along which each one holds the units (d_mlp)
MLP_UNIT_AXIS = {"mlp.W_in": 1, "mlp.W_gate": 1, "mlp.b_in": 0, "mlp.b_gate": 0, "mlp.W_out": 0}
# a block's attention tensors: each holds the heads along its first axis
HEAD_TENSORS = ("attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O", "attn.b_Q", "attn.b_K", "attn.b_V",
                "attn.length_scale", "attn.sink")
# the partial-product readout's tensors and the axis along which each holds the multiplier digits
READOUT_DIGIT_AXIS = {"W_products": 1, "b_products": 0}
# an added block's writes into the residual stream: zero makes the block the identity
BLOCK_OUTPUTS = ("attn.W_O", "attn.b_O", "mlp.W_out", "mlp.b_out")
# a block's tensor: "blocks.3" and its name inside the block, "mlp.W_in"
BLOCK_KEY = re.compile(r"(blocks\.\d+)\.(.+)")


def grow_state(
    expected: dict[str, torch.Tensor],
    state: dict[str, torch.Tensor],
    identity_blocks: bool = True,
    placement: Sequence[int] | None = None,
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """`state` (a checkpoint's tensors) fitted to `expected` (the new model's freshly
    initialised state_dict) where the model is the source grown: MLP tensors with fewer units
    are embedded in the new ones; with `placement` (`head_placement`), attention tensors with
    fewer heads put source head i at head placement[i]; and (`identity_blocks`: blocks that
    are attention and an MLP on a residual stream) every tensor of an added block that writes
    to the residual stream is zeroed. Returns the state to load and the keys grown or zeroed,
    in order. Tensors of any other shape are left as they are, for the caller to refuse."""
    grown = dict(state)
    changed = []
    for key, source in state.items():
        target = expected.get(key)
        if target is None:
            continue
        if _widens_units(key, source, target) or _widens_readout(key, source, target):
            wide = target.detach().clone()
            wide[tuple(slice(0, n) for n in source.shape)] = source
            if key.endswith("mlp.W_out"):  # the new units' rows: nothing written until trained
                wide[source.shape[0]:] = 0
        elif placement is not None and _adds_heads(key, source, target, len(placement)):
            wide = target.detach().clone()
            if key.endswith("attn.W_O"):  # the new heads: nothing written until trained
                wide.zero_()
            wide[list(placement)] = source
        else:
            continue
        grown[key] = wide
        changed.append(key)
    added_blocks = ({_block_of(k) for k in expected} - {_block_of(k) for k in state} - {None}) if identity_blocks else set()
    for block in sorted(added_blocks):
        for name in BLOCK_OUTPUTS:
            key = f"{block}.{name}"
            if key in expected:
                grown[key] = torch.zeros_like(expected[key])
                changed.append(key)
    return grown, changed


def head_placement(source_kinds: Sequence[str], target_kinds: Sequence[str]) -> list[int]:
    """For each head of the source (its kind in words, `head_kinds`), the head it becomes in a
    model with more heads: the first head of the same kind not yet taken, so that each kind's
    heads keep their order and their masks. A ValueError names a kind the model has fewer of."""
    free = list(range(len(target_kinds)))
    placement = []
    for kind in source_kinds:
        head = next((h for h in free if target_kinds[h] == kind), None)
        if head is None:
            raise ValueError(f"the source has {source_kinds.count(kind)} {kind} head(s) per layer and this model "
                             f"{target_kinds.count(kind)}")
        free.remove(head)
        placement.append(head)
    return placement


def _adds_heads(key: str, source: torch.Tensor, target: torch.Tensor, source_heads: int) -> bool:
    """Whether `target` is the attention tensor `source` with more heads and nothing else changed."""
    match = BLOCK_KEY.fullmatch(key)
    if match is None or match.group(2) not in HEAD_TENSORS or source.dim() != target.dim():
        return False
    return source.shape[0] == source_heads < target.shape[0] and source.shape[1:] == target.shape[1:]


def _widens_units(key: str, source: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether `target` is `source` with more MLP units and nothing else changed."""
    match = BLOCK_KEY.fullmatch(key)
    return _longer_along(MLP_UNIT_AXIS.get(match.group(2)) if match else None, source, target)


def _widens_readout(key: str, source: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether `target` is the partial-product readout `source` over more multiplier digits."""
    return _longer_along(READOUT_DIGIT_AXIS.get(key), source, target)


def _longer_along(axis: int | None, source: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether `target` is `source` longer along `axis` (None: no axis grows) and equal along the rest."""
    if axis is None or source.dim() != target.dim():
        return False
    return all((s < t) if d == axis else (s == t) for d, (s, t) in enumerate(zip(source.shape, target.shape, strict=True)))


def _block_of(key: str) -> str | None:
    """"blocks.3" for any tensor of block 3, else None."""
    match = BLOCK_KEY.fullmatch(key)
    return match.group(1) if match else None
