"""The looped transformer: a block of `n_layers` layers applied `n_loops` times with shared
weights, the embedded input re-injected at the start of every loop.

Weights live once (`blocks.{l}`); hook points live once per loop (`loops.{t}.blocks.{l}`),
because TransformerLens keeps only the last call of a reused HookPoint. So
`run_with_cache` returns, e.g., `loops.3.blocks.0.attn.hook_pattern` for loop 3 alone
(`hooks.hook_name` builds these names). The embedding, unembedding, `forward`, the text
helpers and generation are shared with the other families (model_base.py).

    state_pre[0] = input
    state_pre[t] = state_post[t-1] + input      (input_injection="add")
    state_pre[t] = ln_state(state_post[t-1]) + input   ("norm_add": the state stays bounded)
    state_post[t] = block(block(... state_pre[t]))
    logits = unembed(ln_final(state_post[R-1]))
"""

from __future__ import annotations

import functools
import logging
from typing import ClassVar

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from ..errors import UserError
from .attention import Attention, AttentionContext, AttentionHooks, KVEntry
from .config import ModelConfig
from .family_registry import register_family
from .flops import attention_flops_per_token, mlp_flops_per_token
from .hooks import (
    act_name as act_name,  # re-exported: `from abacus_interp.core.model import act_name`
)
from .masks import list_positions
from .model_base import ArithmeticModel, LayerNorm

logger = logging.getLogger(__name__)

KVCache = list[list[KVEntry | None]]  # [loop][layer]

# torch.compile's code generator: C++ on CPU, Triton on CUDA. "aot_eager" traces the same
# graphs without generating code (a quick check that a model compiles).
DEFAULT_COMPILE_BACKEND = "inductor"


class MLPHooks(nn.Module):
    def __init__(self, gated: bool = False):
        super().__init__()
        self.hook_pre = HookPoint()  # [batch pos d_mlp]: before the activation (a gated MLP: the gate's)
        if gated:  # named as TransformerLens names a gated MLP's hooks
            self.hook_pre_linear = HookPoint()  # [batch pos d_mlp]: x W_in + b_in, which the gate scales
        self.hook_post = HookPoint()  # [batch pos d_mlp]


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model))
        nn.init.normal_(self.W_in, std=cfg.init_std)
        nn.init.normal_(self.W_out, std=cfg.init_std)
        self.gated = cfg.gated_mlp
        if self.gated:
            self.W_gate = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
            self.b_gate = nn.Parameter(torch.zeros(cfg.d_mlp))
            nn.init.normal_(self.W_gate, std=cfg.init_std)
        self.act = {"gelu": F.gelu, "relu": F.relu, "swiglu": F.silu}[cfg.activation]

    def forward(self, x: Float[Tensor, "batch pos d_model"], hooks: MLPHooks) -> Float[Tensor, "batch pos d_model"]:
        if self.gated:
            gate = hooks.hook_pre(x @ self.W_gate + self.b_gate)  # [batch pos d_mlp]
            linear = hooks.hook_pre_linear(x @ self.W_in + self.b_in)  # [batch pos d_mlp]
            post = hooks.hook_post(self.act(gate) * linear)  # [batch pos d_mlp]
        else:
            pre = hooks.hook_pre(x @ self.W_in + self.b_in)  # [batch pos d_mlp]
            post = hooks.hook_post(self.act(pre))  # [batch pos d_mlp]
        return post @ self.W_out + self.b_out


class BlockHooks(nn.Module):
    """Per-loop hook points of one layer of the looped block."""

    def __init__(self, gated_mlp: bool = False):
        super().__init__()
        self.hook_resid_pre = HookPoint()  # [batch pos d_model]
        self.hook_attn_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_mid = HookPoint()  # [batch pos d_model]
        self.hook_mlp_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_post = HookPoint()  # [batch pos d_model]
        self.attn = AttentionHooks()
        self.mlp = MLPHooks(gated_mlp)


class Block(nn.Module):
    """One pre-LN transformer layer; its weights are shared by every loop."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = LayerNorm(cfg)
        self.attn = Attention(cfg)
        self.ln2 = LayerNorm(cfg)
        self.mlp = MLP(cfg)

    def forward(
        self,
        x: Float[Tensor, "batch pos d_model"],
        hooks: BlockHooks,
        context: AttentionContext,
        cache: KVEntry | None = None,
    ) -> tuple[Float[Tensor, "batch pos d_model"], KVEntry]:
        x = hooks.hook_resid_pre(x)
        attn_out, kv = self.attn(self.ln1(x), hooks.attn, context, cache)
        x = hooks.hook_resid_mid(x + hooks.hook_attn_out(attn_out))
        x = hooks.hook_resid_post(x + hooks.hook_mlp_out(self.mlp(self.ln2(x), hooks.mlp)))
        return x, kv


class LoopHooks(nn.Module):
    def __init__(self, n_layers: int, gated_mlp: bool = False):
        super().__init__()
        self.hook_state_pre = HookPoint()  # [batch pos d_model]
        self.blocks = nn.ModuleList([BlockHooks(gated_mlp) for _ in range(n_layers)])
        self.hook_state_post = HookPoint()  # [batch pos d_model]


@register_family
class LoopedTransformer(ArithmeticModel):
    family: ClassVar[str] = "looped"
    label: ClassVar[str] = "Looped"
    is_looped: ClassVar[bool] = True

    @staticmethod
    def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
        return attention_flops_per_token(cfg, n_keys) + mlp_flops_per_token(cfg)

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)  # W_E, W_pos and the input hook points
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        if cfg.input_injection == "norm_add":
            self.ln_state = LayerNorm(cfg)
        self.build_readout()
        self.loops = nn.ModuleList([LoopHooks(cfg.n_layers, cfg.gated_mlp) for _ in range(cfg.max_loops)])
        self.finish_setup()
        # every HookPoint of each loop, so run_loops can tell cheaply whether one is hooked
        self._hook_points_of_loop = tuple(
            tuple(m for m in loop.modules() if isinstance(m, HookPoint)) for loop in self.loops
        )
        self.compile_backend: str | None = None  # set by compile_loops

    def run_loops(
        self,
        inputs: Float[Tensor, "batch pos d_model"],
        loops: range,
        state: Float[Tensor, "batch pos d_model"] | None = None,
        key_valid: Bool[Tensor, "batch pos"] | None = None,
        cache: KVCache | None = None,
        index: Int[Tensor, "batch key_pos"] | None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """Apply the block for loop indices `loops` (e.g. range(2, 5)) starting from `state`
        (the state leaving loop loops.start - 1; None at the start). With `cache`, keys and
        values are read from and appended to cache[t][l]. `index`: the Abacus index of every
        position (`attention_index(tokens)`), which a model with rotary positions or a window
        needs; None for the others.

        With `cfg.list_items_settle_after = L`, the list's tokens leave every loop from the
        (L+1)-th on with the state they left the L-th with (before the input is injected
        again): each of those loops reads the list as it stood after L loops (its keys and
        values are those of loop L+1, so L >= n_loops - 1 changes no answer).

        After `compile_loops()`, a loop with no hook attached runs its layers through the
        compiled graph; hooked loops and cached decoding run eagerly."""
        self.check_loops(loops.stop)
        if len(loops) == 0:
            return state
        settle = self.cfg.list_items_settle_after
        if settle is not None and state is None and loops.start > 0:
            raise ValueError(f"run_loops from loop index {loops.start} needs `state`, the state leaving the loop "
                             "before: the list's hold (list_items_settle_after) puts it back")
        n_query = inputs.shape[1]
        first = cache[loops.start][0] if cache is not None else None
        n_key = n_query + (first.k.shape[1] if first is not None else 0)
        # built once: every layer of every loop shares the mask and the rotation
        context = AttentionContext.build(self.cfg, n_query, n_key, inputs.device, key_valid, index)
        compiled = _compiled_layers(self.compile_backend) if self.compile_backend and cache is None else None
        settled = list_positions(index)[:, -n_query:, None] if settle is not None else None  # [batch pos 1]
        for t in loops:
            hooks = self.loops[t]
            x = self.inject(inputs, state)
            held = (settled, state) if settled is not None and t >= settle else None
            if compiled is not None and not self._loop_is_hooked(t):
                state = compiled(self, hooks, x, context, None, held)
            else:
                state = self.apply_layers(hooks, x, context, cache[t] if cache is not None else None, held)
        return state

    def inject(
        self, inputs: Float[Tensor, "batch pos d_model"], state: Float[Tensor, "batch pos d_model"] | None
    ) -> Float[Tensor, "batch pos d_model"]:
        """The state entering a loop: the input alone in loop 0, then the previous loop's
        state with the input injected as `cfg.input_injection` says."""
        if state is None:
            return inputs
        if self.cfg.input_injection == "none":
            return state
        if self.cfg.input_injection == "norm_add":
            return self.ln_state(state) + inputs
        return state + inputs

    def apply_layers(
        self,
        hooks: LoopHooks,
        x: Float[Tensor, "batch pos d_model"],
        context: AttentionContext,
        cache_row: list[KVEntry | None] | None = None,
        held: tuple[Bool[Tensor, "batch pos 1"], Float[Tensor, "batch pos d_model"]] | None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """One application of the looped block's layers, from hook_state_pre to
        hook_state_post of the loop whose `hooks` are given. `context`: the attention mask and
        rotation of this pass (`run_loops` builds it). `cache_row`: that loop's keys and values
        per layer, updated in place (cached decoding). `held`: (positions, state) where the
        loop leaves those positions with that state (`list_items_settle_after`), as
        hook_state_post sees it."""
        x = hooks.hook_state_pre(x)
        for layer, (block, block_hooks) in enumerate(zip(self.blocks, hooks.blocks, strict=True)):
            x, kv = block(x, block_hooks, context, cache_row[layer] if cache_row is not None else None)
            if cache_row is not None:
                cache_row[layer] = kv
        if held is not None:
            positions, state = held
            x = torch.where(positions, state, x)
        return hooks.hook_state_post(x)

    def compile_loops(self, backend: str | None = None) -> LoopedTransformer:
        """Run the looped block's layers through `torch.compile` from now on (returns self).

        One graph serves every loop index and depth: the layers are compiled with the loop's
        hook set as an argument, so neither `n_loops` nor the random depths of a progressive
        loss trigger recompilation. A loop with any hook attached (run_with_cache,
        run_with_hooks) and cached decoding run eagerly, so hooks see exactly what they see
        without compilation. Weights, buffers and `state_dict` are unchanged.
        `backend`: a torch.compile backend, default "inductor"; `model.compile_backend = None`
        turns compilation off again."""
        self.compile_backend = backend or DEFAULT_COMPILE_BACKEND
        return self

    def _loop_is_hooked(self, t: int) -> bool:
        return any(
            point._forward_hooks or point._forward_pre_hooks or point._backward_hooks or point._backward_pre_hooks
            for point in self._hook_points_of_loop[t]
        )

    def run_with_cache(self, *model_args, remove_batch_dim: bool = False, return_cache_object: bool = True, **kwargs):
        """TransformerLens' run_with_cache (names_filter, device, remove_batch_dim, incl_bwd,
        ...); the cache is a loop-aware `LoopActivationCache` (see abacus_interp/core/cache/), or the plain
        dict with return_cache_object=False."""
        out, cache_dict = super().run_with_cache(*model_args, remove_batch_dim=remove_batch_dim, **kwargs)
        if not return_cache_object:
            return out, cache_dict
        from .cache import LoopActivationCache

        n_loops = model_args[1] if len(model_args) > 1 else kwargs.get("n_loops")
        n_loops = self.cfg.n_loops if n_loops is None else n_loops
        return out, LoopActivationCache(cache_dict, self, has_batch_dim=not remove_batch_dim, n_loops=n_loops)

    def check_loops(self, n_loops: int) -> None:
        """Raise a UserError that says how to rebuild when `n_loops` exceeds the hook sets."""
        if n_loops > self.cfg.max_loops:
            raise UserError(
                f"n_loops={n_loops} exceeds max_loops={self.cfg.max_loops}, the number of hook "
                f"sets this model was built with; rebuild with more, e.g. "
                f"load_model(path, max_loops={n_loops}) or model.with_max_loops({n_loops}) "
                "(hook sets hold no parameters, so the weights load unchanged)"
            )

    def new_cache(self, n_loops: int) -> KVCache:
        return [[None] * self.cfg.n_layers for _ in range(n_loops)]


@functools.cache
def _compiled_layers(backend: str):
    """`LoopedTransformer.apply_layers` compiled once per backend. Dynamo keeps one graph per
    variant it meets (grad or no_grad, autocast, static or dynamic shapes) and checks the
    model's shapes and flags on every call, so any number of models can share it."""
    return torch.compile(LoopedTransformer.apply_layers, backend=backend)
