"""Position indices: Abacus (per-digit index inside its number) and learned (absolute).

Abacus (McLeish et al. 2024): digit j (1-based) of every number gets index offset + j and
every other token 0, so the i-th digits of both operands and of the answer share an
embedding. For `321+654=975`: 1,2,3,0,1,2,3,0,1,2,3. A random offset while training makes
the embeddings of high indices trained too, so the model extrapolates to longer numbers.

Rotary positions on the Abacus index (`Rotary`): attention rotates queries and keys by each
token's index instead of adding a table, so a score depends on the index difference only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor


def digit_table(digit_ids: Sequence[int] | Tensor, device=None) -> Bool[Tensor, " table"]:
    """A lookup table indexed by token id, True at the digit ids; one False entry past the
    largest digit id, onto which `digit_mask` clamps every larger id. Built once from host
    integers (the model keeps one as a buffer), so reading it never syncs with the device."""
    ids = digit_ids.tolist() if isinstance(digit_ids, Tensor) else list(digit_ids)
    table = torch.zeros(max(ids, default=-1) + 2, dtype=torch.bool, device=device)
    table[ids] = True
    return table


def digit_mask(tokens: Int[Tensor, "batch pos"], digit_ids: Tensor) -> Bool[Tensor, "batch pos"]:
    """True where a token is a digit. `digit_ids`: the digit token ids, or (bool) the lookup
    table `digit_table` builds from them."""
    if digit_ids.dtype != torch.bool:
        if torch.compiler.is_compiling():
            # sizing a table would read the ids on the host, a graph break; compare instead
            return (tokens[..., None] == digit_ids.to(tokens.device)).any(-1)
        # a lookup table is about 2x faster than torch.isin on CPU, 5x faster than comparing
        digit_ids = digit_table(digit_ids, tokens.device)
    table = digit_ids.to(tokens.device)
    return table[tokens.clamp(max=table.shape[0] - 1)]


def abacus_indices(
    tokens: Int[Tensor, "batch pos"],
    digit_ids: Tensor,
    offset: Int[Tensor, " batch"] | int = 0,
) -> Int[Tensor, "batch pos"]:
    """Index of each digit inside its run of consecutive digits (1-based) plus `offset`;
    0 for every non-digit token, padding included. Vectorised: no loop over examples, and no
    read of tensor values on the host when `digit_ids` is a `digit_table`, so it compiles
    into one graph with the model."""
    is_digit = digit_mask(tokens, digit_ids)  # [batch pos]
    pos = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
    # a run starts at a digit whose left neighbour is not a digit
    left_is_digit = torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)
    run_start = is_digit & ~left_is_digit
    # carry the index of the latest run start forward along the sequence
    start_index = torch.where(run_start, pos, torch.zeros_like(pos)).cummax(dim=1).values
    index_in_run = pos - start_index + 1  # [batch pos]
    if isinstance(offset, Tensor):  # a copy from the host that does not wait for the device
        offset = offset.to(tokens.device, non_blocking=True).view(-1, 1)
    return torch.where(is_digit, index_in_run + offset, torch.zeros_like(pos))


def closer_indices(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """The Abacus `index` with each number's closing token (the non-digit right after its
    last digit: a separator, "=") given the index one past that digit, so the closer of an
    L-digit number sits at offset + L + 1 and its leading digits at distances 1, 2, ...
    whatever L is. Any non-digit right after a digit counts, EOS and padding included. Every
    other token keeps its index. Read off the index alone (a digit is an index > 0), so cached
    decoding rebuilds it from the index of all positions."""
    left = torch.nn.functional.pad(index[:, :-1], (1, 0), value=0)  # [batch pos]
    closes = (index == 0) & (left > 0)
    return torch.where(closes, left + 1, index)


def abacus_indices_reference(tokens: list[list[int]], digit_ids: set[int], offset: int = 0) -> list[list[int]]:
    """Per-example Python loop with the same result as `abacus_indices` (tests, benchmarks)."""
    out = []
    for row in tokens:
        run, idx = 0, []
        for t in row:
            run = run + 1 if t in digit_ids else 0
            idx.append(run + offset if run else 0)
        out.append(idx)
    return out


def sample_offsets(
    batch: int, max_offset: int, mode: str, generator: torch.Generator | None, device=None
) -> Int[Tensor, " batch"]:
    """Training offsets from U{0..max_offset}: one for the whole batch or one per example."""
    n = 1 if mode == "batch" else batch
    draws = torch.randint(0, max_offset + 1, (n,), generator=generator)
    return draws.expand(batch).contiguous().to(device) if mode == "batch" else draws.to(device)


def learned_indices(valid: Bool[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """Absolute positions counted over real tokens only, so a left-padded prompt gets the
    same positions as the unpadded one."""
    return (valid.long().cumsum(dim=1) - 1).clamp(min=0)


@dataclass(frozen=True)
class Rotary:
    """RoPE angles of the query positions: position p's pairs of channels (i, i + d_head/2)
    are rotated by index[p] * base^(-2i/d_head). Keys are rotated when computed (the same
    positions as the queries) and cached rotated, so a cached key never needs its index again."""

    cos: Float[Tensor, "batch query_pos 1 half"]
    sin: Float[Tensor, "batch query_pos 1 half"]

    @classmethod
    def of(cls, index: Int[Tensor, "batch pos"], d_head: int, base: float, dtype=torch.float32) -> Rotary:
        half = d_head // 2
        inv_freq = base ** (-torch.arange(half, device=index.device, dtype=torch.float64) / half)  # [half]
        angles = (index[..., None].double() * inv_freq)[:, :, None, :]  # [batch pos 1 half]
        return cls(cos=angles.cos().to(dtype), sin=angles.sin().to(dtype))

    def apply(
        self, x: Float[Tensor, "batch pos head d_head"], skip_last_heads: int = 0
    ) -> Float[Tensor, "batch pos head d_head"]:
        """`x` rotated by its positions' indices; the last `skip_last_heads` heads unrotated
        (the queries of multiplier heads, whose scores must not depend on the query's index)."""
        first, second = x.chunk(2, dim=-1)
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        rotated = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
        if skip_last_heads:
            rotated = torch.cat([rotated[:, :, :-skip_last_heads], x[:, :, -skip_last_heads:]], dim=2)
        return rotated
