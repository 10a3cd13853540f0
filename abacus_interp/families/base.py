"""What every non-looped family shares with `LoopedTransformer`: the embedding, the
unembedding, the text helpers, generation and the `forward` signature.

These are the looped model's own function objects, not copies, so the families cannot drift
apart from it: a fix to `LoopedTransformer.embed` is a fix for every family. What differs is
the body between embedding and unembedding, which a family supplies as `apply_layers`.

The training loop, scoring and decoding call a model as
    inputs = model.embed(tokens, valid, abacus_offset)         [batch pos d_model]
    index  = model.attention_index(tokens, abacus_offset)       [batch pos] or None
    state  = model.run_loops(inputs, range(0, n), state, key_valid, cache, index)
    logits = model.unembed(state)                               [batch pos d_vocab]
A family without a loop runs its layers once, so the only range it accepts is range(0, 1)
(what those callers pass when cfg.n_loops is 1, which ModelConfig requires of it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from jaxtyping import Bool, Float
from torch import Tensor
from transformer_lens import ActivationCache, HookedRootModule

from ..config import ModelConfig
from ..errors import UserError
from ..model import LoopedTransformer, build_embeddings, build_readout

# One cache entry per layer; what an entry holds is the family's business (LSTM: the last
# hidden and cell state; ReTran: keys and values too).
LayerCache = list[Any]


class SinglePassModel(HookedRootModule):
    """Base of the families that run their layers once. A subclass builds `self.blocks` in
    `build_layers` and implements `apply_layers`."""

    family: ClassVar[str]

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.family != self.family:
            raise ValueError(f"{type(self).__name__} builds family {self.family!r}, the config says {cfg.family!r}")
        self.cfg = cfg
        # the same parameter names, shapes and initialisation as LoopedTransformer
        build_embeddings(self, cfg)
        self.build_layers(cfg)
        build_readout(self, cfg)
        self.setup()
        cfg.attach_device(self.W_E.device)
        self.compile_backend: str | None = None  # never set: see compile_loops

    def build_layers(self, cfg: ModelConfig) -> None:
        """Set `self.blocks`: layers called as block(x, valid, key_valid, state, first_position)
        -> (x, state), where state is the layer's carry-over between decoding calls."""
        raise NotImplementedError

    def apply_layers(
        self,
        x: Float[Tensor, "batch pos d_model"],
        valid: Bool[Tensor, "batch pos"] | None,
        key_valid: Bool[Tensor, "batch key_pos"] | None,
        cache: LayerCache | None,
        first_position: int,
    ) -> Float[Tensor, "batch pos d_model"]:
        """The layers over `x`, the positions first_position.. of the sequence. `valid` marks
        the real tokens among them (None: all real), `key_valid` every position so far.
        `cache[l]`: layer l's state after the positions before first_position (None at the
        start), replaced by its state after these positions."""
        for layer, block in enumerate(self.blocks):
            x, state = block(x, valid, key_valid, cache[layer] if cache is not None else None, first_position)
            if cache is not None:
                cache[layer] = state
        return x

    # ------------------------------------------------- shared with the looped model
    embed = LoopedTransformer.embed
    attention_index = LoopedTransformer.attention_index
    read_tokens = LoopedTransformer.read_tokens
    _check_position_range = LoopedTransformer._check_position_range
    unembed = LoopedTransformer.unembed
    W_U_effective = LoopedTransformer.W_U_effective
    device = LoopedTransformer.device
    forward = LoopedTransformer.forward
    to_tokens = LoopedTransformer.to_tokens
    to_string = LoopedTransformer.to_string
    to_str_tokens = LoopedTransformer.to_str_tokens
    generate = LoopedTransformer.generate
    param_summary = LoopedTransformer.param_summary

    def _apply(self, fn, *args, **kwargs):
        # as LoopedTransformer._apply (which cannot be shared: its zero-argument super() is
        # bound to that class): keep cfg.device in step with .to()/.cuda()/.half()
        out = super()._apply(fn, *args, **kwargs)
        self.cfg.attach_device(self.W_E.device)
        return out

    # ------------------------------------------------------- the single pass
    def run_loops(
        self,
        inputs: Float[Tensor, "batch pos d_model"],
        loops: range,
        state: Float[Tensor, "batch pos d_model"] | None = None,
        key_valid: Bool[Tensor, "batch key_pos"] | None = None,
        cache: list[LayerCache] | None = None,
        index: None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """`LoopedTransformer.run_loops` for a model without a loop: `loops` must be
        range(0, 1) (one pass of the layers) or empty (returns `state`). With `cache`
        (from `new_cache(1)`), `inputs` are the newest positions of a sequence whose earlier
        positions the cache has seen, as in cached decoding."""
        if len(loops) == 0:
            return state
        if loops != range(0, 1):
            raise ValueError(
                f"family {self.family!r} has no loop: it runs its layers once, so it takes "
                f"loops=range(0, 1), not {loops}; n_loops must be 1"
            )
        if index is not None:
            raise ValueError(f"family {self.family!r} attends by sequence position only; pass index=None")
        if state is not None:
            raise ValueError(
                f"family {self.family!r} has no loop state to start from; "
                "train.init_state_noise and a given start state apply to the looped family only"
            )
        n_new = inputs.shape[1]
        first_position = 0 if key_valid is None else key_valid.shape[1] - n_new
        valid = None if key_valid is None else key_valid[:, -n_new:]
        return self.apply_layers(inputs, valid, key_valid, cache[0] if cache is not None else None, first_position)

    def run_with_cache(self, *model_args, remove_batch_dim: bool = False, return_cache_object: bool = True, **kwargs):
        """TransformerLens' run_with_cache (names_filter, device, incl_bwd, ...); the cache is a
        plain `ActivationCache` (the loop-aware one assumes the looped model's layout), or
        the dict with return_cache_object=False."""
        out, cache_dict = super().run_with_cache(*model_args, remove_batch_dim=remove_batch_dim, **kwargs)
        if not return_cache_object:
            return out, cache_dict
        return out, ActivationCache(cache_dict, self, has_batch_dim=not remove_batch_dim)

    def check_loops(self, n_loops: int) -> None:
        if n_loops != 1:
            raise UserError(
                f"family {self.family!r} runs its layers once (it has no loop); "
                f"n_loops must be 1, got {n_loops}"
            )

    def new_cache(self, n_loops: int) -> list[LayerCache]:
        self.check_loops(n_loops)
        return [[None] * self.cfg.n_layers]

    def compile_loops(self, backend: str | None = None):
        raise UserError(
            f"compile_loops compiles the looped block; family {self.family!r} has none. "
            "Leave train.compile off (and load_model(..., compile=False)) for this family"
        )
