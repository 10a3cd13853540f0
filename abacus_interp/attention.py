"""Causal multi-head attention with a fast path and an explicit, fully hooked path.

The weights live in `Attention` (shared by every loop); the HookPoints live in
`AttentionHooks`, one instance per loop, so "the pattern in loop 3" has its own name.

Fast path: torch SDPA, or flash-attn's kernel on CUDA in fp16/bf16 when it is installed.
Explicit path: scores and pattern are materialised and pass through `hook_attn_scores`
and `hook_pattern`. `attention_backend="auto"` takes the explicit path only when a hook
is attached to one of those two points, so caching patterns never silently misses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from .config import ModelConfig

try:  # optional CUDA kernel
    from flash_attn import flash_attn_func
except ImportError:  # pragma: no cover - depends on the machine
    flash_attn_func = None


class AttentionHooks(nn.Module):
    """Per-loop hook points of one attention layer."""

    def __init__(self):
        super().__init__()
        self.hook_q = HookPoint()  # [batch pos head d_head]
        self.hook_k = HookPoint()  # [batch pos head d_head]
        self.hook_v = HookPoint()  # [batch pos head d_head]
        self.hook_attn_scores = HookPoint()  # [batch head query_pos key_pos]
        self.hook_pattern = HookPoint()  # [batch head query_pos key_pos]
        self.hook_z = HookPoint()  # [batch pos head d_head]

    def needs_explicit(self) -> bool:
        return self.hook_attn_scores.has_hooks() or self.hook_pattern.has_hooks()


@dataclass
class KVEntry:
    """Keys and values of every position processed so far, for one loop and layer."""

    k: Float[Tensor, "batch pos head d_head"]
    v: Float[Tensor, "batch pos head d_head"]


def attention_mask(
    key_valid: Bool[Tensor, "batch key_pos"] | None, n_query: int, n_key: int, device
) -> Bool[Tensor, "batch 1 query_pos key_pos"] | None:
    """Causal mask for queries that are the last `n_query` of `n_key` positions, also hiding
    padding keys. A padding query may see itself, so no softmax row is empty (no NaN).
    None means "plain causal with no padding", which SDPA handles without a mask."""
    if key_valid is None and n_query == n_key:
        return None
    key_pos = torch.arange(n_key, device=device)
    query_pos = torch.arange(n_key - n_query, n_key, device=device)
    causal = key_pos[None, :] <= query_pos[:, None]  # [query key]
    if key_valid is None:
        return causal[None, None]
    visible = key_valid[:, None, :] | (key_pos[None, None, :] == query_pos[None, :, None])
    return (causal[None] & visible)[:, None]  # [batch 1 query key]


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, d, e))
        self.W_K = nn.Parameter(torch.empty(h, d, e))
        self.W_V = nn.Parameter(torch.empty(h, d, e))
        self.W_O = nn.Parameter(torch.empty(h, e, d))
        self.b_Q = nn.Parameter(torch.zeros(h, e))
        self.b_K = nn.Parameter(torch.zeros(h, e))
        self.b_V = nn.Parameter(torch.zeros(h, e))
        self.b_O = nn.Parameter(torch.zeros(d))
        for w in (self.W_Q, self.W_K, self.W_V, self.W_O):
            nn.init.normal_(w, std=cfg.init_std)

    def forward(
        self,
        x: Float[Tensor, "batch pos d_model"],
        hooks: AttentionHooks,
        key_valid: Bool[Tensor, "batch key_pos"] | None = None,
        cache: KVEntry | None = None,
    ) -> tuple[Float[Tensor, "batch pos d_model"], KVEntry]:
        q = hooks.hook_q(einops.einsum(x, self.W_Q, "b p d, h d e -> b p h e") + self.b_Q)
        k = hooks.hook_k(einops.einsum(x, self.W_K, "b p d, h d e -> b p h e") + self.b_K)
        v = hooks.hook_v(einops.einsum(x, self.W_V, "b p d, h d e -> b p h e") + self.b_V)
        if cache is not None:  # decoding: attend over everything seen so far
            k = torch.cat([cache.k, k], dim=1)
            v = torch.cat([cache.v, v], dim=1)
        n_query, n_key = q.shape[1], k.shape[1]
        mask = attention_mask(key_valid, n_query, n_key, x.device)

        backend = self.cfg.attention_backend
        if backend == "explicit" or (backend == "auto" and hooks.needs_explicit()):
            z = self._explicit(q, k, v, mask, hooks)
        elif self._can_use_flash(q, mask, backend):
            z = flash_attn_func(q, k, v, causal=True)  # [batch pos head d_head]
        else:
            z = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                k.transpose(1, 2),
                v.transpose(1, 2),
                attn_mask=mask,
                is_causal=mask is None,
            ).transpose(1, 2)  # [batch pos head d_head]
        z = hooks.hook_z(z)
        out = einops.einsum(z, self.W_O, "b p h e, h e d -> b p d") + self.b_O
        return out, KVEntry(k=k, v=v)

    def _explicit(self, q, k, v, mask, hooks: AttentionHooks) -> Float[Tensor, "batch pos head d_head"]:
        scores = einops.einsum(q, k, "b q h e, b k h e -> b h q k") / math.sqrt(self.cfg.d_head)
        if mask is None:
            n = q.shape[1]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()[None, None]
        scores = hooks.hook_attn_scores(scores.masked_fill(~mask, float("-inf")))
        pattern = hooks.hook_pattern(torch.softmax(scores, dim=-1))
        return einops.einsum(pattern, v, "b h q k, b k h e -> b q h e")

    def _can_use_flash(self, q: Tensor, mask, backend: str) -> bool:
        usable = (
            flash_attn_func is not None
            and q.is_cuda
            and q.dtype in (torch.float16, torch.bfloat16)
            and mask is None  # the kernel's causal flag covers unpadded full sequences only
        )
        if backend == "flash" and not usable:
            raise RuntimeError(
                "attention_backend='flash' needs flash-attn installed (pip install '.[flash]'), "
                "a CUDA device, fp16/bf16 activations and unpadded inputs; use 'auto' to fall back"
            )
        return usable and backend in ("auto", "flash")
