"""What every model family shares: the input side (token and position embedding), the
output side (final norm and unembedding; the auxiliary readouts are `readouts.py`'s), the
`forward` signature, the text helpers and generation. `LoopedTransformer` (model.py) and the
single-pass families (families/) derive from `ArithmeticModel` and supply only the body
between embedding and unembedding.

The training loop, scoring, decoding and the analyses call any model as

    inputs = model.embed(tokens, valid, abacus_offset)            # [batch pos d_model]
    index  = model.attention_index(tokens, abacus_offset)          # [batch pos] or None
    state  = model.run_loops(inputs, range(0, n), state, key_valid, cache, index)
    logits = model.unembed(state)                                  # [batch pos d_vocab]

and ask `model.is_looped` (not the concrete class) whether there is a loop to look into.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from ..errors import UserError
from .attention import bias_or_zero
from .comparator import ItemComparator
from .config import ModelConfig
from .positions import abacus_indices, digit_table, learned_indices
from .readouts import AuxiliaryReadouts
from .scoring import next_token_loss
from .tokens import PAD_ID


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


class ArithmeticModel(AuxiliaryReadouts, HookedRootModule, abc.ABC):
    """A hooked language model over a task's tokens. A subclass's `__init__` calls
    `super().__init__(cfg)` (the input side), builds its layers, then `build_readout()` and
    `finish_setup()`, in that order: the parameters are then registered, and a seeded
    initialisation draws its numbers, in the same order in every family."""

    # What makes a family (core/family_registry.py; registered with @register_family):
    # its name in ModelConfig.family, how tables and figures name it, and the (parameter-name
    # fragment, component) pairs of its own kinds of parameters (core/summary.py).
    family: ClassVar[str]
    label: ClassVar[str]
    components: ClassVar[tuple[tuple[str, str], ...]] = ()
    # True when a shared block runs over loops, with one hook set per loop (hooks.hook_name);
    # False for a family that runs its layers once.
    is_looped: ClassVar[bool]
    # True for a family that builds one hook set per time step (a recurrence over positions,
    # the LSTM's), max_seq_len of them: its sequences are bounded whatever its positions.
    hooks_per_position: ClassVar[bool] = False

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        # The weights file `load_model` read this model from; None for a model built in memory.
        # Results and reports cite it, and `analyses.common.resolve` finds the run from it.
        self.checkpoint_path: str | None = None
        self.W_E = nn.Parameter(torch.randn(cfg.d_vocab, cfg.d_model) * cfg.init_std)
        if cfg.positional == "abacus":
            self.W_pos = nn.Parameter(torch.randn(cfg.n_abacus_positions, cfg.d_model) * cfg.init_std)
        elif cfg.positional == "learned":
            self.W_pos = nn.Parameter(torch.randn(cfg.max_seq_len, cfg.d_model) * cfg.init_std)
        self.hook_embed = HookPoint()  # [batch pos d_model]
        self.hook_pos_embed = HookPoint()  # [batch pos d_model]
        self.hook_input = HookPoint()  # [batch pos d_model]
        self.register_buffer("digit_ids", torch.tensor(cfg.vocab.digit_ids, dtype=torch.long), persistent=False)
        # the same ids as a lookup table by token id: Abacus indices without a host read
        self.register_buffer("digit_table", digit_table(cfg.vocab.digit_ids), persistent=False)
        if cfg.answer_slots:
            self.equals_id, self.slot_id = cfg.vocab.encode("=_")

    def build_readout(self) -> None:
        """The output side: ln_final, W_U (unless tied to W_E) and b_U (a zero buffer without
        `cfg.unembed_bias`)."""
        cfg = self.cfg
        self.ln_final = LayerNorm(cfg, with_hook=True)
        if not cfg.tie_unembed:
            std = cfg.init_std if cfg.unembed_init_std is None else cfg.unembed_init_std
            self.W_U = nn.Parameter(torch.randn(cfg.d_model, cfg.d_vocab) * std)
        bias_or_zero(self, "b_U", torch.zeros(cfg.d_vocab), cfg.unembed_bias)
        self.build_auxiliary_readouts()
        if cfg.item_comparator is not None:  # sorting's pairwise answer, added to the unembedding's logits
            self.comparator = ItemComparator(cfg.d_model, cfg.item_comparator, cfg.init_std, cfg.vocab.label_ids,
                                             cfg.vocab.encode("=")[0], cfg.d_vocab, cfg.item_comparator_alone)

    def finish_setup(self) -> None:
        """Index the hook points (TransformerLens' setup) once every module exists."""
        self.setup()
        self.cfg.attach_device(self.W_E.device)

    # ------------------------------------------------------- what a family supplies
    @staticmethod
    @abc.abstractmethod
    def layer_flops_per_token(cfg: ModelConfig, n_keys: float) -> float:
        """Forward FLOPs per token of one application of one of its layers, each query
        attending to `n_keys` keys; built from core/flops.py's shared terms."""

    @abc.abstractmethod
    def run_loops(
        self,
        inputs: Float[Tensor, "batch pos d_model"],
        loops: range,
        state: Float[Tensor, "batch pos d_model"] | None = None,
        key_valid: Bool[Tensor, "batch key_pos"] | None = None,
        cache: list | None = None,
        index: Int[Tensor, "batch key_pos"] | None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """The state after the loops `loops`, starting from `state` (None at the start)."""

    @abc.abstractmethod
    def check_loops(self, n_loops: int) -> None:
        """Raise a UserError that says what to do when this model cannot run `n_loops` loops."""

    @abc.abstractmethod
    def new_cache(self, n_loops: int) -> list:
        """An empty key/value (or recurrent state) cache for cached decoding over `n_loops`."""

    @abc.abstractmethod
    def compile_loops(self, backend: str | None = None) -> ArithmeticModel:
        """Run the model's layers through torch.compile from now on (returns self)."""

    # ---------------------------------------------------------------- input side
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
        # F.embedding, not W_E[ids]: indexing's backward adds rows with atomic float adds
        # across threads, in a different order each run, and training stops being reproducible
        embed = self.hook_embed(F.embedding(self.read_tokens(tokens)[:, keep], self.W_E))  # [batch pos d_model]
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
        pos_embed = self.hook_pos_embed(F.embedding(index[:, keep], self.W_pos))  # [batch pos d_model]
        return self.hook_input(embed + pos_embed)

    def attention_index(
        self, tokens: Int[Tensor, "batch pos"], abacus_offset: Int[Tensor, " batch"] | int = 0
    ) -> Int[Tensor, "batch pos"] | None:
        """The Abacus index attention reads (rotary positions, the window), or None when this
        model's attention reads no index. Pass it to `run_loops(..., index=...)`."""
        if not self.cfg.attends_by_index:
            return None
        return abacus_indices(tokens, self.digit_table, abacus_offset)

    # ------------------------------------------------------------ how long an input may be
    @property
    def longest_sequence(self) -> int | None:
        """The most tokens one sequence may have: max_seq_len under learned positions (a table
        row per absolute position) or in a family with a hook set per position; None when
        nothing but time and memory bounds it. Abacus positions bound each number's digits
        instead, not the sequence (`why_too_long`)."""
        if self.cfg.positional == "learned" or self.hooks_per_position:
            return self.cfg.max_seq_len
        return None

    def why_too_long(self, ids: Sequence[int]) -> str | None:
        """Why the token sequence `ids` (prompt, answer, EOS) needs a position this model has
        no row or hook set for, or None when it fits: the one length rule that `solve` and
        `eval --lengths` apply, and what `embed` would otherwise refuse mid-run.

        Learned positions hold a row per position, so the sequence must fit max_seq_len.
        Abacus positions hold a row per digit index inside a number (offset 0, as evaluated),
        so every number must fit the table; the sequence may be longer. A model without a
        position table (positional "none"; rotary positions and the Abacus window read index
        differences, which no table bounds) has no limit from positions at all."""
        limit = self.longest_sequence
        if limit is not None and len(ids) > limit:
            table = "its learned position table has rows" if self.cfg.positional == "learned" else \
                "it has per-position hook sets"
            return f"needs {len(ids)} positions, more than {table} for (max_seq_len={self.cfg.max_seq_len})"
        if self.cfg.positional == "abacus":
            digits = set(self.cfg.vocab.digit_ids)
            longest_number = run = 0
            for token in ids:
                run = run + 1 if token in digits else 0
                longest_number = max(longest_number, run)
            rows = self.cfg.n_abacus_positions - 1  # row 0 is "not a digit"
            if longest_number > rows:
                return (f"has a {longest_number}-digit number, longer than the model's Abacus position table "
                        f"indexes (digits 1..{rows}: max_seq_len={self.cfg.max_seq_len} + "
                        f"abacus_max_offset={self.cfg.abacus_max_offset})")
        return None

    def attention_bytes(self, n_tokens: int) -> int:
        """About the most memory attention holds for one sequence of `n_tokens`: a float32
        score and a mask byte per (query, key) pair and head (SDPA's CPU path materialises
        both; measured on extrap-add, 17 bytes per pair with 4 heads). Quadratic in the
        length: a problem of thousands of digits needs gigabytes."""
        return 5 * self.cfg.n_heads * n_tokens**2

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

    # --------------------------------------------------------------- output side
    @property
    def W_U_effective(self) -> Float[Tensor, "d_model d_vocab"]:
        return self.W_E.T if self.cfg.tie_unembed else self.W_U

    def unembed(self, state: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_vocab"]:
        """Final norm and unembedding; applied to any loop's state this is the logit lens."""
        return self.ln_final(state) @ self.W_U_effective + self.b_U

    def answer_logits(
        self, state: Float[Tensor, "batch pos d_model"], tokens: Int[Tensor, "batch pos_or_more"]
    ) -> Float[Tensor, "batch pos d_vocab"]:
        """The logits the model answers with: the unembedding, plus, with `cfg.item_comparator`,
        sorting's pairwise answer (core/comparator.py), which reads the list's tokens. `tokens`
        are those the state was computed from (any past the state's positions are dropped).
        `unembed` alone is the logit lens of any loop's state."""
        logits = self.unembed(state)
        if self.cfg.item_comparator is None:
            return logits
        tokens = tokens[:, : state.shape[1]]
        index = abacus_indices(tokens, self.digit_table)
        return self.comparator(logits, self.ln_final(state), tokens, index)

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
            return self.answer_logits(state, tokens)
        if return_type == "loss":
            if loss_mask is None:
                real = tokens != PAD_ID
                loss_mask = torch.cat([real[:, 1:], torch.zeros_like(real[:, :1])], dim=1)
            return next_token_loss(self.answer_logits(state, tokens), tokens, loss_mask)
        raise ValueError(f"return_type must be 'logits', 'state' or 'loss', got {return_type!r}")

    # --------------------------------------------------------- device and copies
    @property
    def device(self) -> torch.device:
        return self.W_E.device

    def _apply(self, fn, *args, **kwargs):
        # keep cfg.device (read by transformer_lens.patching) in step with .to()/.cuda()/.half()
        out = super()._apply(fn, *args, **kwargs)
        self.cfg.attach_device(self.W_E.device)
        return out

    def with_max_loops(self, max_loops: int) -> ArithmeticModel:
        """The same weights, device, dtype and `checkpoint_path` in a model built with
        `max_loops` hook sets, to run (and cache) deeper than this one can. Hook sets hold no
        parameters, so the weights load unchanged. The copy is in training mode, as any new
        module; call `.eval()` on it for analysis."""
        rebuilt = type(self)(self.cfg.replace(max_loops=max_loops)).to(self.device, self.W_E.dtype)
        rebuilt.load_state_dict(self.state_dict())
        rebuilt.checkpoint_path = self.checkpoint_path
        return rebuilt

    # ------------------------------------------------------------- text helpers
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


def _largest_offset(offset: Int[Tensor, " batch"] | int) -> int | None:
    """The largest Abacus offset, when known without waiting for a device: a Python int, or
    a tensor in host memory (the training loop draws its offsets there). None otherwise."""
    if not isinstance(offset, Tensor):
        return offset
    if offset.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    return int(offset.max()) if offset.numel() else 0
