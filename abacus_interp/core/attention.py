"""Causal multi-head attention with a fast path and an explicit, fully hooked path.

The weights live in `Attention` (shared by every loop); the HookPoints live in
`AttentionHooks`, one instance per loop, so "the pattern in loop 3" has its own name.

Fast path: torch SDPA, or flash-attn's kernel on CUDA in fp16/bf16 when it is installed.
Explicit path: scores and pattern are materialised and pass through `hook_attn_scores`
and `hook_pattern`. `attention_backend="auto"` takes the explicit path only when a hook
is attached to one of those two points, so caching patterns never silently misses them.

Positions inside attention (optional, `ModelConfig.rotary` / `abacus_window`): queries and
keys rotated by each token's Abacus index (RoPE on the digit's index inside its number, not
on its sequence position), and a local window on that index (a query sees only keys whose
index is within +-w of its own). Both are worked out once per forward pass into an
`AttentionContext` that every layer of every loop shares. So is the log of how many keys each
query may see: the scalable softmax (`softmax_length_scale`) multiplies each head's scores by it.
With `attention_sink` each head's softmax also counts a key of zeros at a learned logit (`attend`
on the fast path, an extra column on the explicit one), so its pattern's rows sum to less than 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from .config import ModelConfig
from .masks import (
    HeadKinds,
    attention_mask,
    hide_deep_digits,
    hide_earlier_answer,
    hide_far_digits,
    keep_list_items_apart,
    symbol_heads_read_only_answer,
)
from .positions import Rotary, closer_indices

try:  # optional CUDA kernel
    from flash_attn import flash_attn_func
except ImportError:  # pragma: no cover - depends on the machine
    flash_attn_func = None


class AttentionHooks(nn.Module):
    """Per-loop hook points of one attention layer."""

    def __init__(self):
        super().__init__()
        self.hook_q = HookPoint()  # [batch pos head d_head]: rotated, and scaled by s_h * ln(keys seen) if the model scales
        self.hook_k = HookPoint()  # [batch pos head d_head]
        self.hook_v = HookPoint()  # [batch pos head d_head]
        self.hook_attn_scores = HookPoint()  # [batch head query_pos key_pos]
        self.hook_pattern = HookPoint()  # [batch head query_pos key_pos]: rows sum to 1 less a sink's share
        self.hook_z = HookPoint()  # [batch pos head d_head]

    def needs_explicit(self) -> bool:
        return self.hook_attn_scores.has_hooks() or self.hook_pattern.has_hooks()


@dataclass
class KVEntry:
    """Keys and values of every position processed so far, for one loop and layer."""

    k: Float[Tensor, "batch pos head d_head"]
    v: Float[Tensor, "batch pos head d_head"]


@dataclass(frozen=True)
class AttentionContext:
    """What every layer of every loop shares in one forward pass: which keys each query may
    see (`mask`, None for plain causal attention), how queries and keys are rotated
    (`rotary`, None without rotary positions) and the log of how many keys each query sees
    (`log_keys`, None without the scalable softmax)."""

    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None = None
    rotary: Rotary | None = None
    # the last this many heads are multiplier heads: their queries are not rotated
    unrotated_query_heads: int = 0
    # ln of the keys each query may see (`softmax_length_scale`), None for the plain softmax
    log_keys: Float[Tensor, "batch_or_1 query_pos head_or_1 1"] | None = None

    @classmethod
    def build(
        cls,
        cfg: ModelConfig,
        n_query: int,
        n_key: int,
        device,
        key_valid: Bool[Tensor, "batch key_pos"] | None = None,
        index: Int[Tensor, "batch key_pos"] | None = None,
    ) -> AttentionContext:
        """The context of `n_query` new positions after `n_key - n_query` earlier ones.
        `index`: the Abacus index of every position (needed when `cfg` rotates or windows)."""
        if cfg.attends_by_index and (index is None or index.shape[1] != n_key):
            got = None if index is None else tuple(index.shape)
            raise ValueError(
                f"this model attends by Abacus index (rotary={cfg.rotary!r}, abacus_window={cfg.abacus_window}, "
                f"digit_window={cfg.digit_window}): "
                f"pass index=model.attention_index(tokens) for all {n_key} positions (got {got})"
            )
        heads = HeadKinds.of(cfg)
        mask = attention_mask(key_valid, n_query, n_key, device, index, cfg.abacus_window, heads)
        if cfg.answer_hides_earlier_answer:
            spared = heads.symbol_head_range if cfg.answer_blind_spares_symbol_heads else range(0)
            mask = hide_earlier_answer(mask, index, n_query, n_key, device, spared)
        if cfg.answer_symbol_heads_read_only_answer:
            mask = symbol_heads_read_only_answer(mask, index, n_query, device, heads.symbol_head_range)
        if cfg.list_items_read_alone:
            mask = keep_list_items_apart(mask, index, n_query, n_key, device, cfg.list_digits_read_across_items,
                                         cfg.list_digits_read_items_back)
        if cfg.digit_window is not None:
            mask = hide_far_digits(mask, index, n_query, n_key, device, cfg.digit_window)
        if cfg.leading_digits is not None:
            mask = hide_deep_digits(mask, index, n_query, n_key, device, cfg.leading_digits)
        rotary = None
        if cfg.rotary != "none":
            turned = closer_indices(index) if cfg.rotary == "abacus_closers" else index  # [batch key_pos]
            rotary = Rotary.of(turned[:, -n_query:], cfg.d_head, cfg.rotary_base)
        log_keys = None if cfg.softmax_length_scale is None else log_visible_keys(mask, n_query, n_key, device)
        return cls(mask=mask, rotary=rotary, unrotated_query_heads=cfg.multiplier_heads, log_keys=log_keys)


def log_visible_keys(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None, n_query: int, n_key: int, device
) -> Float[Tensor, "batch_or_1 query_pos head_or_1 1"]:
    """ln of how many keys each query of each head may see: the mask's count, or without a mask
    the causal count (n_key - n_query + 1 for the first query). Padding is hidden by the mask
    where there is any, so a left-padded prompt counts its real keys only, cached or not."""
    if mask is None:
        counts = torch.arange(n_key - n_query + 1, n_key + 1, device=device, dtype=torch.float32)[None, :, None]
    else:
        counts = mask.sum(-1).transpose(1, 2).float()  # [batch query head_or_1]
    return counts.clamp(min=1).log()[..., None]


def bias_or_zero(module: nn.Module, name: str, zeros: Tensor, trainable: bool) -> None:
    """Give `module` the bias `name`: a parameter, or (`trainable=False`, a model without that
    bias) a zero buffer that is neither saved nor trained, so code that adds or reads the
    bias needs no second path and a bias-free checkpoint has no such key."""
    if trainable:
        setattr(module, name, nn.Parameter(zeros))
    else:
        module.register_buffer(name, zeros, persistent=False)


def attend(
    q: Float[Tensor, "batch query head d_head"],
    k: Float[Tensor, "batch key head d_head"],
    v: Float[Tensor, "batch key head d_head"],
    mask: Bool[Tensor, "batch_or_1 head_or_1 query key"] | None,
    sink: Float[Tensor, " head"] | None = None,
) -> Float[Tensor, "batch query head d_head"]:
    """SDPA over the keys `mask` lets each query see (None: causal, the queries being the last
    of the keys). With `sink`, every query also sees one more key, whose score is sink_h and whose
    value is zero: it takes its share of the softmax and adds nothing, as the explicit path's
    extra column does. The sink rides in the keys, not in a float mask: queries get one more
    channel of ones, real keys a zero there and the sink key sink_h * sqrt(d_head) (values a zero
    channel too, so that q, k and v keep one width, as the fused CPU kernel needs), so the mask
    stays boolean and the sink's gradient flows through a key, not through the mask."""
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [batch head pos d_head]
    if sink is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None).transpose(1, 2)
    batch, n_heads, n_query, d_head = q.shape
    n_key = k.shape[2]
    if mask is None:  # causal, aligned to the last key: a cached query sees every key before it
        mask = torch.ones(n_query, n_key, dtype=torch.bool, device=q.device).tril(n_key - n_query)[None, None]
    sees_sink = torch.ones(*mask.shape[:-1], 1, dtype=torch.bool, device=q.device)
    mask = torch.cat([sees_sink, mask], dim=-1)  # [batch_or_1 head_or_1 query 1+key]
    q = F.pad(q, (0, 1), value=1.0)  # [batch head query d_head+1]
    sink_score = (sink.to(k.dtype) * math.sqrt(d_head))[None, :, None, None].expand(batch, n_heads, 1, 1)
    k = torch.cat([F.pad(sink_score, (d_head, 0)), F.pad(k, (0, 1))], dim=2)  # [batch head 1+key d_head+1]
    v = F.pad(v, (0, 1, 1, 0))  # [batch head 1+key d_head+1]: the sink's value row and channel are zeros
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / math.sqrt(d_head))
    return z[..., :d_head].transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, d, e))
        self.W_K = nn.Parameter(torch.empty(h, d, e))
        self.W_V = nn.Parameter(torch.empty(h, d, e))
        self.W_O = nn.Parameter(torch.empty(h, e, d))
        for name, shape in (("b_Q", (h, e)), ("b_K", (h, e)), ("b_V", (h, e)), ("b_O", (d,))):
            bias_or_zero(self, name, torch.zeros(shape), cfg.attn_bias)
        for w in (self.W_Q, self.W_K, self.W_V, self.W_O):
            nn.init.normal_(w, std=cfg.init_std)
        if cfg.softmax_length_scale is not None:  # s_h of the scalable softmax, one per head
            self.length_scale = nn.Parameter(torch.full((h, 1), float(cfg.softmax_length_scale)))  # [head 1]
        sink = None if cfg.attention_sink is None else nn.Parameter(torch.full((h,), float(cfg.attention_sink)))
        self.register_parameter("sink", sink)  # [head]: each head's logit for a key that holds nothing

    def forward(
        self,
        x: Float[Tensor, "batch pos d_model"],
        hooks: AttentionHooks,
        context: AttentionContext,
        cache: KVEntry | None = None,
    ) -> tuple[Float[Tensor, "batch pos d_model"], KVEntry]:
        q, k, v = self._project_qkv(x)  # [batch pos head d_head] each
        q, k = self.place(q, k, context)
        q, k, v = hooks.hook_q(q), hooks.hook_k(k), hooks.hook_v(v)  # q and k rotated, q scaled (`place`)
        if cache is not None:  # decoding: attend over everything seen so far
            k = torch.cat([cache.k, k], dim=1)
            v = torch.cat([cache.v, v], dim=1)
        mask = context.mask

        backend = self.cfg.attention_backend
        if backend == "explicit" or (backend == "auto" and hooks.needs_explicit()):
            z = self._explicit(q, k, v, mask, hooks)
        elif self._can_use_flash(q, mask, backend):
            z = flash_attn_func(q, k, v, causal=True)  # [batch pos head d_head]
        else:
            z = attend(q, k, v, mask, self.sink)  # [batch pos head d_head]
        z = hooks.hook_z(z)
        # the heads' outputs summed by one matmul over (head, d_head): W_O viewed as [head*d_head d_model]
        out = torch.addmm(self.b_O, z.flatten(-2).flatten(0, -2), self.W_O.flatten(0, 1))  # [batch*pos d_model]
        return out.view(*z.shape[:-2], -1), KVEntry(k=k, v=v)

    def place(
        self, q: Float[Tensor, "batch pos head d_head"], k: Float[Tensor, "batch pos head d_head"],
        context: AttentionContext,
    ) -> tuple[Float[Tensor, "batch pos head d_head"], Float[Tensor, "batch pos head d_head"]]:
        """Queries and keys as the scores read them: rotated by their Abacus index (rotary), and
        the queries times s_h * ln(keys seen) (the scalable softmax), which scales the scores.
        Every path that recomputes attention from the weights goes through here."""
        if context.rotary is not None:
            q, k = context.rotary.apply(q, context.unrotated_query_heads), context.rotary.apply(k)
        if context.log_keys is not None:
            q = q * (self.length_scale * context.log_keys).to(q.dtype)  # [batch pos head d_head]
        return q, k

    def _project_qkv(self, x: Float[Tensor, "batch pos d_model"]) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values from one matmul: with d_model 64 a projection is too small
        to keep a CPU core busy, and three einsums (batched over heads) cost 1.3x one fused
        matmul in a training step (benchmarks/README.md)."""
        n_heads, d_head = self.cfg.n_heads, self.cfg.d_head
        weight = torch.cat([self.W_Q, self.W_K, self.W_V]).permute(1, 0, 2).flatten(1)  # [d_model 3*head*d_head]
        bias = torch.cat([self.b_Q, self.b_K, self.b_V]).flatten()  # [3*head*d_head]
        qkv = torch.addmm(bias, x.flatten(0, -2), weight)  # [batch*pos 3*head*d_head]
        return qkv.view(*x.shape[:-1], 3, n_heads, d_head).unbind(-3)

    def _explicit(self, q, k, v, mask, hooks: AttentionHooks) -> Float[Tensor, "batch pos head d_head"]:
        scores = einops.einsum(q, k, "b q h e, b k h e -> b h q k") / math.sqrt(self.cfg.d_head)
        if mask is None:
            n = q.shape[1]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()[None, None]
        scores = hooks.hook_attn_scores(scores.masked_fill(~mask, float("-inf")))
        if self.sink is None:
            pattern = torch.softmax(scores, dim=-1)
        else:  # the sink's column joins the softmax and is dropped: a row sums to 1 less the sink's share
            sink = self.sink.to(scores.dtype)[None, :, None, None].expand(*scores.shape[:-1], 1)
            pattern = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
        pattern = hooks.hook_pattern(pattern)
        return einops.einsum(pattern, v, "b h q k, b k h e -> b q h e")

    def _can_use_flash(self, q: Tensor, mask, backend: str) -> bool:
        usable = (
            flash_attn_func is not None
            and q.is_cuda
            and q.dtype in (torch.float16, torch.bfloat16)
            and mask is None  # the kernel's causal flag covers unpadded full sequences only
            and self.sink is None  # the kernel has no sink
        )
        if backend == "flash" and not usable:
            raise RuntimeError(
                "attention_backend='flash' needs flash-attn installed (pip install '.[flash]'), "
                "a CUDA device, fp16/bf16 activations, unpadded inputs and no attention_sink; use 'auto' to fall back"
            )
        return usable and backend in ("auto", "flash")
