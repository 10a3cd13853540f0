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
from .positions import Rotary

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
        self.hook_pattern = HookPoint()  # [batch head query_pos key_pos]
        self.hook_z = HookPoint()  # [batch pos head d_head]

    def needs_explicit(self) -> bool:
        return self.hook_attn_scores.has_hooks() or self.hook_pattern.has_hooks()


@dataclass
class KVEntry:
    """Keys and values of every position processed so far, for one loop and layer."""

    k: Float[Tensor, "batch pos head d_head"]
    v: Float[Tensor, "batch pos head d_head"]


@dataclass(frozen=True)
class HeadKinds:
    """Which keys each head of a layer may see, where heads differ (`ModelConfig.offset_heads`,
    `multiplier_heads`, `symbol_heads`, `number_heads`). Heads are ordered by kind: first the
    offset heads (head h sees only the digits exactly `offsets[h]` below its query on the Abacus
    index), then the windowed heads (the window, as every head of a one-kind model), then the
    symbol heads (only the tokens that are not digits), then the number heads (only the query's
    own number and what is written just before it, `number_group`), then the multiplier heads (only the
    multiplier of `a*b`; with `fixed_multiplier`, multiplier head j only its digit j)."""

    n_heads: int
    offsets: tuple[int, ...] = ()
    multiplier_heads: int = 0
    fixed_multiplier: bool = True
    symbol_heads: int = 0
    number_heads: int = 0
    offset_numbers: tuple[int, ...] = ()  # the number each offset head reads, () any (`number_ordinal`)
    offset_exclusive: bool = False  # an offset head sees itself only where its column is absent

    @classmethod
    def of(cls, cfg: ModelConfig) -> HeadKinds | None:
        """The kinds of `cfg`'s heads, or None when every head is of the one kind."""
        if not cfg.offset_heads and not cfg.multiplier_heads and not cfg.symbol_heads and not cfg.number_heads:
            return None
        return cls(cfg.n_heads, tuple(cfg.offset_heads), cfg.multiplier_heads, cfg.multiplier_select == "fixed",
                   cfg.symbol_heads, cfg.number_heads, tuple(cfg.offset_head_numbers), cfg.offset_heads_exclusive)

    @property
    def windowed_heads(self) -> int:
        return self.n_heads - len(self.offsets) - self.symbol_heads - self.number_heads - self.multiplier_heads

    def kind_of(self, head: int) -> str:
        """Head `head`'s kind in words: "offset +1" (reads the digits one index below its
        query; "offset -1": one above; "offset +1 of number 3": only the third number's digit
        there), "windowed", "symbol", "number" or "multiplier"."""
        if head < len(self.offsets):
            of_number = f" of number {self.offset_numbers[head]}" if self.offset_numbers else ""
            return f"offset {self.offsets[head]:+d}{of_number}"
        from_the_end = self.n_heads - head  # 1 for the last head
        for kind, count in (("multiplier", self.multiplier_heads), ("number", self.number_heads),
                            ("symbol", self.symbol_heads)):
            if from_the_end <= count:
                return kind
            from_the_end -= count
        return "windowed"


def attention_mask(
    key_valid: Bool[Tensor, "batch key_pos"] | None,
    n_query: int,
    n_key: int,
    device,
    index: Int[Tensor, "batch key_pos"] | None = None,
    window: int | None = None,
    heads: HeadKinds | None = None,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None:
    """Causal mask for queries that are the last `n_query` of `n_key` positions, also hiding
    padding keys and, with `window`, every key whose Abacus `index` differs from the query's
    by more than `window`. A query always sees itself, so no softmax row is empty (no NaN).
    None means "plain causal with no padding", which SDPA handles without a mask.

    With `heads` (heads of several kinds, `HeadKinds`) the mask is per head: the windowed
    heads see what is described above (minus the multiplier's digits where there are
    multiplier heads), offset, symbol and multiplier heads see only their own keys."""
    if heads is None and key_valid is None and window is None and n_query == n_key:
        return None
    key_pos = torch.arange(n_key, device=device)
    query_pos = torch.arange(n_key - n_query, n_key, device=device)
    itself = key_pos[None, :] == query_pos[:, None]  # [query key]
    causal = key_pos[None, :] <= query_pos[:, None]  # [query key]
    visible = causal[None]  # [1 or batch, query key]
    if key_valid is not None:
        visible = visible & key_valid[:, None, :]
    near = None
    if window is not None:
        if index is None:
            raise ValueError("a window on the Abacus index needs the index of every position")
        query_index = index[:, -n_query:, None]  # [batch query 1]
        near = (query_index - index[:, None, :]).abs() <= window  # [batch query key]
    if heads is not None:
        return _per_head_mask(visible, near, itself[None], index, heads)
    if key_valid is None and window is None:
        return causal[None, None]
    if near is not None:
        visible = visible & near
    return (visible | itself[None])[:, None]  # [batch 1 query key]


def number_ordinal(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """Which number of the sequence each digit belongs to (1 for the first, 2 for the second,
    ...), 0 for every other token. The Abacus index returns to 0 between numbers, so a number
    is a run of nonzero indices: in `rev(a)*rev(b)=answer`, a is 1, the multiplier b is 2."""
    started = _numbers_started(index)
    return torch.where(index > 0, started, torch.zeros_like(index))


def number_group(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """The number each token is read with by a number head: a digit's own number (as
    `number_ordinal`); a token right after a digit the number it closes; every other token the
    number written after it. So each item of a list is one group, its label, its digits and the
    separator that ends it ("a:05898," of `a:05898,b:1=`), and the closing separator sees the
    whole item; the tokens after the last number's closing "=" (a sorting answer's labels) are
    one group more; answer digits, being digits, are numbers of their own."""
    started = _numbers_started(index)
    is_digit = index > 0
    closes = torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)  # [batch pos]: a digit just before
    return torch.where(is_digit | closes, started, started + 1)


def answer_positions(index: Int[Tensor, "batch pos"]) -> Bool[Tensor, "batch pos"]:
    """The tokens after the closing separator of the sequence's last number: a sorting answer's
    labels (and anything after them), the group `number_group` puts after the last item."""
    group = number_group(index)
    return group > _numbers_started(index)[:, -1:]


def hide_earlier_answer(
    mask: Bool[Tensor, "batch head_or_1 query_pos key_pos"] | None,
    index: Int[Tensor, "batch key_pos"],
    n_query: int,
    n_key: int,
    device,
) -> Bool[Tensor, "batch head_or_1 query_pos key_pos"]:
    """`mask` (None: plain causal) with every answer query's earlier answer tokens hidden from
    every head (`ModelConfig.answer_hides_earlier_answer`); the query still sees itself."""
    if mask is None:
        key_pos = torch.arange(n_key, device=device)
        mask = (key_pos[None, :] <= key_pos[n_key - n_query :, None])[None, None]  # [1 1 query key]
    answer = answer_positions(index)  # [batch key]
    itself = torch.arange(n_key, device=device)[None, :] == torch.arange(n_key - n_query, n_key, device=device)[:, None]
    earlier = answer[:, -n_query:, None] & answer[:, None, :] & ~itself[None]  # [batch query key]
    return mask & ~earlier[:, None]


def _numbers_started(index: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    """How many numbers (runs of nonzero Abacus index) have begun at or before each position."""
    is_digit = index > 0
    starts = is_digit & ~torch.nn.functional.pad(is_digit[:, :-1], (1, 0), value=False)
    return starts.long().cumsum(dim=1)


def _per_head_mask(visible, near, itself, index, heads: HeadKinds):
    """The per-head mask of `attention_mask(..., heads=...)`, from its causal-and-valid keys
    `visible` [1 or batch, query key], the window `near` (None: no window) and `itself`."""
    if index is None:
        raise ValueError("heads of several kinds need the Abacus index of every position")
    batch, n_query = index.shape[0], itself.shape[-2]
    multiplier = (number_ordinal(index) == 2)[:, None, :] if heads.multiplier_heads else None  # [batch 1 key]
    readable = visible & ~multiplier if multiplier is not None else visible.expand(batch, -1, -1)
    windowed = readable if near is None else readable & near
    kinds = []
    if heads.offsets:
        # offset head h: the digits (and answer slots) whose index is exactly offsets[h] below
        # the query's, so it hands the MLP one column (a_(i-d), say) at any number length
        distance = index[:, -n_query:, None] - index[:, None, :]  # [batch query key]
        digit = (index > 0)[:, None, :]  # [batch 1 key]
        columns = [readable & digit & (distance == d) for d in heads.offsets]  # [batch query key] each
        if heads.offset_numbers:  # head h: only number offset_numbers[h]'s digit at that distance
            ordinal = number_ordinal(index)[:, None, :]  # [batch 1 key]
            columns = [column & (ordinal == n) for column, n in zip(columns, heads.offset_numbers, strict=True)]
        for column in columns:
            sees_itself = _itself_where_nothing_else(column, itself) if heads.offset_exclusive else itself
            kinds.append((column | sees_itself)[:, None])
    kinds.append((windowed | itself)[:, None].expand(-1, heads.windowed_heads, -1, -1))
    if heads.symbol_heads:  # the tokens that are not digits (index 0), at any distance
        symbols = (readable & (index == 0)[:, None, :]) | itself  # [batch query key]
        kinds.append(symbols[:, None].expand(-1, heads.symbol_heads, -1, -1))
    if heads.number_heads:  # the query's own number, at any distance and any count of numbers
        group = number_group(index)  # [batch key]
        own = (readable & (group[:, -n_query:, None] == group[:, None, :])) | itself  # [batch query key]
        kinds.append(own[:, None].expand(-1, heads.number_heads, -1, -1))
    if heads.multiplier_heads:
        kinds.append(_multiplier_mask(visible, multiplier, itself, index, heads))
    return torch.cat(kinds, dim=1)  # [batch head query key]


def _itself_where_nothing_else(reads: Tensor, itself: Tensor) -> Tensor:
    """The query itself only where `reads` leaves its softmax row empty: a head that copies one
    key whole where that key exists, and still has a key to read where it does not."""
    return itself & ~reads.any(-1, keepdim=True)


def _multiplier_mask(visible, multiplier, itself, index, heads: HeadKinds):
    """The multiplier heads' part of the per-head mask: [batch multiplier_heads query key]."""
    reads_multiplier = (visible & multiplier)[:, None]  # [batch 1 query key]
    if heads.fixed_multiplier:  # multiplier head j: the multiplier's digit j (units = 0) only
        # every number of a sequence starts at the same index (offset + 1): subtract it
        first = index.masked_fill(index == 0, torch.iinfo(index.dtype).max).amin(dim=1, keepdim=True)  # [batch 1]
        digit = (index - first)[:, None, None, :]  # [batch 1 1 key]: 0 for b_0
        head_digit = torch.arange(heads.multiplier_heads, device=index.device)[None, :, None, None]  # [1 head 1 1]
        reads_multiplier = reads_multiplier & (digit == head_digit)  # [batch head query key]
        # the query itself only where the head's digit is absent (a shorter multiplier): where
        # it is present the head copies it whole, instead of learning to ignore its own query
        # (measured: a head that could see itself still put 68% there after 1,500 steps)
        fallback = _itself_where_nothing_else(reads_multiplier, itself[:, None])  # [batch head query key]
    else:
        fallback = itself[:, None]
    return (reads_multiplier | fallback).expand(index.shape[0], heads.multiplier_heads, -1, -1)


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
                f"this model attends by Abacus index (rotary={cfg.rotary!r}, abacus_window={cfg.abacus_window}): "
                f"pass index=model.attention_index(tokens) for all {n_key} positions (got {got})"
            )
        mask = attention_mask(key_valid, n_query, n_key, device, index, cfg.abacus_window, HeadKinds.of(cfg))
        if cfg.answer_hides_earlier_answer:
            mask = hide_earlier_answer(mask, index, n_query, n_key, device)
        rotary = None
        if cfg.rotary == "abacus":
            rotary = Rotary.of(index[:, -n_query:], cfg.d_head, cfg.rotary_base)
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
            z = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                k.transpose(1, 2),
                v.transpose(1, 2),
                attn_mask=mask,
                is_causal=mask is None,
            ).transpose(1, 2)  # [batch pos head d_head]
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
