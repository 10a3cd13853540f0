"""The looped transformer: a block of `n_layers` layers applied `n_loops` times with shared
weights, the embedded input re-injected at the start of every loop.

Weights live once (`blocks.{l}`); hook points live once per loop (`loops.{t}.blocks.{l}`),
because TransformerLens keeps only the last call of a reused HookPoint. So
`run_with_cache` returns, e.g., `loops.3.blocks.0.attn.hook_pattern` for loop 3 alone.

    state_pre[0] = input
    state_pre[t] = state_post[t-1] + input      (input_injection="add")
    state_pre[t] = ln_state(state_post[t-1]) + input   ("norm_add": the state stays bounded)
    state_post[t] = block(block(... state_pre[t]))
    logits = unembed(ln_final(state_post[R-1]))
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from .attention import Attention, AttentionContext, AttentionHooks, KVEntry, bias_or_zero
from .config import ModelConfig
from .errors import UserError
from .positions import abacus_indices, digit_table, learned_indices
from .scoring import next_token_loss
from .tokens import PAD_ID

logger = logging.getLogger(__name__)

KVCache = list[list[KVEntry | None]]  # [loop][layer]

# torch.compile's code generator: C++ on CPU, Triton on CUDA. "aot_eager" traces the same
# graphs without generating code (a quick check that a model compiles).
DEFAULT_COMPILE_BACKEND = "inductor"


class LayerNorm(nn.Module):
    """Pre-LN normalisation, or the identity when `cfg.norm == "none"`."""

    def __init__(self, cfg: ModelConfig, with_hook: bool = False):
        super().__init__()
        self.enabled = cfg.norm != "none"
        self.eps = cfg.ln_eps
        if self.enabled:
            self.w = nn.Parameter(torch.ones(cfg.d_model))
            self.b = nn.Parameter(torch.zeros(cfg.d_model))
        if with_hook:
            self.hook_normalized = HookPoint()  # [batch pos d_model]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        if self.enabled:
            x = F.layer_norm(x, (x.shape[-1],), self.w, self.b, self.eps)
        return self.hook_normalized(x) if hasattr(self, "hook_normalized") else x


class MLPHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_pre = HookPoint()  # [batch pos d_mlp]
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
        self.act = F.gelu if cfg.activation == "gelu" else F.relu

    def forward(self, x: Float[Tensor, "batch pos d_model"], hooks: MLPHooks) -> Float[Tensor, "batch pos d_model"]:
        pre = hooks.hook_pre(x @ self.W_in + self.b_in)  # [batch pos d_mlp]
        post = hooks.hook_post(self.act(pre))  # [batch pos d_mlp]
        return post @ self.W_out + self.b_out


class BlockHooks(nn.Module):
    """Per-loop hook points of one layer of the looped block."""

    def __init__(self):
        super().__init__()
        self.hook_resid_pre = HookPoint()  # [batch pos d_model]
        self.hook_attn_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_mid = HookPoint()  # [batch pos d_model]
        self.hook_mlp_out = HookPoint()  # [batch pos d_model]
        self.hook_resid_post = HookPoint()  # [batch pos d_model]
        self.attn = AttentionHooks()
        self.mlp = MLPHooks()


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
    def __init__(self, n_layers: int):
        super().__init__()
        self.hook_state_pre = HookPoint()  # [batch pos d_model]
        self.blocks = nn.ModuleList([BlockHooks() for _ in range(n_layers)])
        self.hook_state_post = HookPoint()  # [batch pos d_model]


def build_embeddings(model: nn.Module, cfg: ModelConfig) -> None:
    """The input side every family shares: W_E, W_pos (Abacus or learned positions), the
    input hook points and the digit-id buffers `embed` reads. Called before the layers are
    built, so a seeded initialisation draws the same numbers in every family."""
    model.W_E = nn.Parameter(torch.randn(cfg.d_vocab, cfg.d_model) * cfg.init_std)
    if cfg.positional == "abacus":
        model.W_pos = nn.Parameter(torch.randn(cfg.n_abacus_positions, cfg.d_model) * cfg.init_std)
    elif cfg.positional == "learned":
        model.W_pos = nn.Parameter(torch.randn(cfg.max_seq_len, cfg.d_model) * cfg.init_std)
    model.hook_embed = HookPoint()  # [batch pos d_model]
    model.hook_pos_embed = HookPoint()  # [batch pos d_model]
    model.hook_input = HookPoint()  # [batch pos d_model]
    model.register_buffer("digit_ids", torch.tensor(cfg.vocab.digit_ids, dtype=torch.long), persistent=False)
    # the same ids as a lookup table by token id: Abacus indices without a host read
    model.register_buffer("digit_table", digit_table(cfg.vocab.digit_ids), persistent=False)
    if cfg.answer_slots:
        model.equals_id, model.slot_id = cfg.vocab.encode("=_")


def build_readout(model: nn.Module, cfg: ModelConfig) -> None:
    """The output side every family shares: ln_final, W_U (unless tied to W_E) and b_U (a
    zero buffer without `cfg.unembed_bias`)."""
    model.ln_final = LayerNorm(cfg, with_hook=True)
    if not cfg.tie_unembed:
        std = cfg.init_std if cfg.unembed_init_std is None else cfg.unembed_init_std
        model.W_U = nn.Parameter(torch.randn(cfg.d_model, cfg.d_vocab) * std)
    bias_or_zero(model, "b_U", torch.zeros(cfg.d_vocab), cfg.unembed_bias)


class LoopedTransformer(HookedRootModule):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        build_embeddings(self, cfg)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        if cfg.input_injection == "norm_add":
            self.ln_state = LayerNorm(cfg)
        build_readout(self, cfg)
        self.loops = nn.ModuleList([LoopHooks(cfg.n_layers) for _ in range(cfg.max_loops)])
        self.setup()
        cfg.attach_device(self.W_E.device)
        # every HookPoint of each loop, so run_loops can tell cheaply whether one is hooked
        self._hook_points_of_loop = tuple(
            tuple(m for m in loop.modules() if isinstance(m, HookPoint)) for loop in self.loops
        )
        self.compile_backend: str | None = None  # set by compile_loops

    # ----------------------------------------------------------------- pieces
    def embed(
        self,
        tokens: Int[Tensor, "batch pos"],
        valid: Bool[Tensor, "batch pos"] | None = None,
        abacus_offset: Int[Tensor, " batch"] | int = 0,
        last: int | None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """Token + position embedding: the input injected at every loop.

        `last=n` embeds only the final n tokens (cached decoding); their positions are still
        computed over the whole sequence, because an Abacus index depends on the digits before it."""
        keep = slice(None) if last is None else slice(-last, None)
        embed = self.hook_embed(self.W_E[self.read_tokens(tokens)[:, keep]])  # [batch pos d_model]
        if self.cfg.positional == "none":
            return self.hook_input(embed)
        if self.cfg.positional == "abacus":
            index = abacus_indices(tokens, self.digit_table, abacus_offset)
            limit = self.W_pos.shape[0]
            # a digit's index is at most its 1-based position plus the offset
            largest_offset = _largest_offset(abacus_offset)
            largest_possible = None if largest_offset is None else tokens.shape[1] + largest_offset
        else:
            index = learned_indices(valid if valid is not None else tokens != PAD_ID)
            limit = self.cfg.max_seq_len
            largest_possible = tokens.shape[1] - 1
        # Reading index.max() waits for the device and breaks a compiled graph, so it is
        # read only when the bound from shapes and offsets alone does not rule an overflow out.
        if largest_possible is None or largest_possible >= limit:
            self._check_position_range(index, limit)
        pos_embed = self.hook_pos_embed(self.W_pos[index[:, keep]])  # [batch pos d_model]
        return self.hook_input(embed + pos_embed)

    def attention_index(
        self, tokens: Int[Tensor, "batch pos"], abacus_offset: Int[Tensor, " batch"] | int = 0
    ) -> Int[Tensor, "batch pos"] | None:
        """The Abacus index attention reads (rotary positions, the window), or None when this
        model's attention reads no index. Pass it to `run_loops(..., index=...)`."""
        if not self.cfg.attends_by_index:
            return None
        return abacus_indices(tokens, self.digit_table, abacus_offset)

    def _check_position_range(self, index: Int[Tensor, "batch pos"], limit: int) -> None:
        if int(index.max()) >= limit:
            raise UserError(
                f"position index {int(index.max())} exceeds the {limit} trained positions "
                f"(max_seq_len={self.cfg.max_seq_len}, abacus_max_offset={self.cfg.abacus_max_offset}); "
                "use shorter inputs or train a model with a larger max_seq_len"
            )

    def read_tokens(self, tokens: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
        """The token ids the embedding reads. With `cfg.answer_slots`, every real token after
        the first "=" becomes the placeholder "_", so no answer digit can be read back; Abacus
        indices still come from `tokens`, so slot i shares the index of operand digit i."""
        if not self.cfg.answer_slots:
            return tokens
        is_equals = (tokens == self.equals_id).long()
        after_equals = (is_equals.cumsum(dim=1) - is_equals) > 0  # [batch pos]
        return torch.where(after_equals & (tokens != PAD_ID), torch.full_like(tokens, self.slot_id), tokens)

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

        After `compile_loops()`, a loop with no hook attached runs its layers through the
        compiled graph; hooked loops and cached decoding run eagerly."""
        self.check_loops(loops.stop)
        if len(loops) == 0:
            return state
        n_query = inputs.shape[1]
        first = cache[loops.start][0] if cache is not None else None
        n_key = n_query + (first.k.shape[1] if first is not None else 0)
        # built once: every layer of every loop shares the mask and the rotation
        context = AttentionContext.build(self.cfg, n_query, n_key, inputs.device, key_valid, index)
        compiled = _compiled_layers(self.compile_backend) if self.compile_backend and cache is None else None
        for t in loops:
            hooks = self.loops[t]
            x = self.inject(inputs, state)
            if compiled is not None and not self._loop_is_hooked(t):
                state = compiled(self, hooks, x, context)
            else:
                state = self.apply_layers(hooks, x, context, cache[t] if cache is not None else None)
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
    ) -> Float[Tensor, "batch pos d_model"]:
        """One application of the looped block's layers, from hook_state_pre to
        hook_state_post of the loop whose `hooks` are given. `context`: the attention mask and
        rotation of this pass (`run_loops` builds it). `cache_row`: that loop's keys and values
        per layer, updated in place (cached decoding)."""
        x = hooks.hook_state_pre(x)
        for layer, (block, block_hooks) in enumerate(zip(self.blocks, hooks.blocks, strict=True)):
            x, kv = block(x, block_hooks, context, cache_row[layer] if cache_row is not None else None)
            if cache_row is not None:
                cache_row[layer] = kv
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
        ...); the cache is a loop-aware `LoopActivationCache` (see abacus_interp/cache/), or the plain
        dict with return_cache_object=False."""
        out, cache_dict = super().run_with_cache(*model_args, remove_batch_dim=remove_batch_dim, **kwargs)
        if not return_cache_object:
            return out, cache_dict
        from .cache import LoopActivationCache

        n_loops = model_args[1] if len(model_args) > 1 else kwargs.get("n_loops")
        n_loops = self.cfg.n_loops if n_loops is None else n_loops
        return out, LoopActivationCache(cache_dict, self, has_batch_dim=not remove_batch_dim, n_loops=n_loops)

    @property
    def device(self) -> torch.device:
        return self.W_E.device

    def _apply(self, fn, *args, **kwargs):
        # keep cfg.device (read by transformer_lens.patching) in step with .to()/.cuda()/.half()
        out = super()._apply(fn, *args, **kwargs)
        self.cfg.attach_device(self.W_E.device)
        return out

    @property
    def W_U_effective(self) -> Float[Tensor, "d_model d_vocab"]:
        return self.W_E.T if self.cfg.tie_unembed else self.W_U

    def unembed(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_vocab"]:
        """Final norm and unembedding; applied to any loop's state this is the logit lens."""
        return self.ln_final(state) @ self.W_U_effective + self.b_U

    def forward(
        self,
        tokens: Int[Tensor, "batch pos"],
        n_loops: int | None = None,
        *,
        valid: Bool[Tensor, "batch pos"] | None = None,
        abacus_offset: Int[Tensor, " batch"] | int = 0,
        return_type: str | None = "logits",
        loss_mask: Bool[Tensor, "batch pos"] | None = None,
    ) -> Float[Tensor, "batch pos d_vocab"] | Float[Tensor, "batch pos d_model"] | Float[Tensor, ""]:
        """Logits after `n_loops` loops (default: the trained depth).

        `valid` marks real tokens when a batch is left-padded (decoding); right-padded batches
        need no mask under causal attention. `return_type="state"` returns the final state;
        `"loss"` the mean next-token cross-entropy over `loss_mask` (default: every position
        followed by a real token), which is what `run_with_cache(incl_bwd=True)` backpropagates."""
        n_loops = self.cfg.n_loops if n_loops is None else n_loops
        if n_loops < 1:
            raise UserError(f"n_loops must be >= 1, got {n_loops}")
        self.check_loops(n_loops)
        key_valid = None if valid is None or bool(valid.all()) else valid
        inputs = self.embed(tokens, valid, abacus_offset)
        index = self.attention_index(tokens, abacus_offset)
        state = self.run_loops(inputs, range(n_loops), key_valid=key_valid, index=index)
        if return_type == "state":
            return state
        if return_type in ("logits", None):
            return self.unembed(state)
        if return_type == "loss":
            if loss_mask is None:
                real = tokens != PAD_ID
                loss_mask = torch.cat([real[:, 1:], torch.zeros_like(real[:, :1])], dim=1)
            return next_token_loss(self.unembed(state), tokens, loss_mask)
        raise ValueError(f"return_type must be 'logits', 'state' or 'loss', got {return_type!r}")

    def check_loops(self, n_loops: int) -> None:
        """Raise a UserError that says how to rebuild when `n_loops` exceeds the hook sets."""
        if n_loops > self.cfg.max_loops:
            raise UserError(
                f"n_loops={n_loops} exceeds max_loops={self.cfg.max_loops}, the number of hook "
                f"sets this model was built with; rebuild with more, e.g. "
                f"load_model(path, max_loops={n_loops}) or LoopedTransformer(cfg.replace(max_loops={n_loops})) "
                "and load the same weights (hook sets hold no parameters)"
            )

    # ------------------------------------------------------------ text helpers
    def to_tokens(self, strings: str | Sequence[str]) -> Int[Tensor, "batch pos"]:
        """Encode text in model order (e.g. "321+654=") into a right-padded token batch."""
        if isinstance(strings, str):
            strings = [strings]
        rows = [self.cfg.vocab.encode(s) for s in strings]
        length = max(len(r) for r in rows)
        out = torch.full((len(rows), length), PAD_ID, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out.to(self.W_E.device)

    def to_string(self, tokens: Int[Tensor, "... pos"]) -> str | list[str]:
        """Decode tokens back to text (padding dropped, stopping at EOS)."""
        if tokens.dim() == 1:
            return self.cfg.vocab.decode(tokens.tolist())
        return [self.cfg.vocab.decode(row.tolist()) for row in tokens]

    def to_str_tokens(self, text: str) -> list[str]:
        return self.cfg.vocab.split(text)

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[str],
        n_loops: int | None = None,
        max_new_tokens: int | None = None,
        batch_size: int = 512,
        use_cache: bool = True,
    ) -> list[str]:
        """Greedy completions of model-order prompts, EOS stripped (see decoding.py).

        `n_loops=None` runs the model's default: with `cfg.halt_tol` set, each problem's loop
        until its answer converges (adaptive loops, see halting.py; `generate_adaptive` also
        returns the loops each problem used), else the trained depth."""
        if n_loops is None and self.cfg.halt_tol is not None:
            from .halting import generate_adaptive

            return generate_adaptive(self, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size).completions
        from .decoding import generate

        return generate(self, prompts, n_loops, max_new_tokens, batch_size, use_cache)

    def param_summary(self) -> dict:
        from .summary import parameter_summary

        return parameter_summary(self)

    def new_cache(self, n_loops: int) -> KVCache:
        return [[None] * self.cfg.n_layers for _ in range(n_loops)]


@functools.cache
def _compiled_layers(backend: str):
    """`LoopedTransformer.apply_layers` compiled once per backend. Dynamo keeps one graph per
    variant it meets (grad or no_grad, autocast, static or dynamic shapes) and checks the
    model's shapes and flags on every call, so any number of models can share it."""
    return torch.compile(LoopedTransformer.apply_layers, backend=backend)


def _largest_offset(offset: Int[Tensor, " batch"] | int) -> int | None:
    """The largest Abacus offset, when known without waiting for a device: a Python int, or
    a tensor in host memory (the training loop draws its offsets there). None otherwise."""
    if not isinstance(offset, Tensor):
        return offset
    if offset.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    return int(offset.max()) if offset.numel() else 0


def act_name(name: str, layer: int | None = None, loop: int | None = None) -> str:
    """Full hook name from a short one, like TransformerLens' `get_act_name`.

    act_name("pattern", 0, loop=3) -> "loops.3.blocks.0.attn.hook_pattern"
    act_name("resid_post", 1, 2)   -> "loops.2.blocks.1.hook_resid_post"
    act_name("state_post", loop=2) -> "loops.2.hook_state_post"
    act_name("embed")              -> "hook_embed"
    """
    short = name.removeprefix("hook_")
    aliases = {"attn": "pattern", "scores": "attn_scores", "pre_mlp": "mlp_pre", "post_mlp": "mlp_post",
               "normalized": "ln_final", "ln_final.hook_normalized": "ln_final"}
    short = aliases.get(short, short)
    if short in ("embed", "pos_embed", "input"):
        return f"hook_{short}"
    if short == "ln_final":
        return "ln_final.hook_normalized"
    if loop is None:
        raise ValueError(f"act_name({name!r}) needs loop=...: every loop has its own hook set")
    if short in ("state_pre", "state_post"):
        return f"loops.{loop}.hook_{short}"
    if layer is None:
        raise ValueError(f"act_name({name!r}) needs layer=... (the layer inside the looped block)")
    prefix = f"loops.{loop}.blocks.{layer}"
    if short in ("q", "k", "v", "z", "attn_scores", "pattern"):
        return f"{prefix}.attn.hook_{short}"
    if short in ("mlp_pre", "mlp_post"):
        return f"{prefix}.mlp.hook_{short.removeprefix('mlp_')}"
    if short in ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"):
        return f"{prefix}.hook_{short}"
    raise ValueError(f"unknown activation name {name!r}")

