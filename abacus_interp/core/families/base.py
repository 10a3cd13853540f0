"""The base of the families that run their layers once (no loop over depth).

The embedding, unembedding, `forward`, the text helpers and generation come from
`ArithmeticModel` (model_base.py), the base `LoopedTransformer` derives from too, so the
families cannot drift apart from it: a fix to `embed` is a fix for every family. What differs
is the body between embedding and unembedding, which a family supplies as `apply_layers`.

A family without a loop runs its layers once, so the only range `run_loops` accepts is
range(0, 1) (what the training loop, scoring and decoding pass when cfg.n_loops is 1, which
ModelConfig requires of it).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from jaxtyping import Bool, Float
from torch import Tensor
from transformer_lens import ActivationCache

from ...errors import UserError
from ..config import ModelConfig
from ..model_base import ArithmeticModel

# One cache entry per layer; what an entry holds is the family's business (LSTM: the last
# hidden and cell state; ReTran: keys and values too).
LayerCache = list[Any]


class SinglePassModel(ArithmeticModel):
    """Base of the families that run their layers once. A subclass builds `self.blocks` in
    `build_layers` and may override `apply_layers`."""

    family: ClassVar[str]
    is_looped: ClassVar[bool] = False

    def __init__(self, cfg: ModelConfig):
        if cfg.family != self.family:
            raise ValueError(f"{type(self).__name__} builds family {self.family!r}, the config says {cfg.family!r}")
        # the same parameter names, shapes and initialisation order as LoopedTransformer
        super().__init__(cfg)
        self.build_layers(cfg)
        self.build_readout()
        self.finish_setup()

    @abc.abstractmethod
    def build_layers(self, cfg: ModelConfig) -> None:
        """Set `self.blocks`: layers called as block(x, valid, key_valid, state, first_position)
        -> (x, state), where state is the layer's carry-over between decoding calls."""

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

    def compile_loops(self, backend: str | None = None) -> SinglePassModel:
        raise UserError(
            f"compile_loops compiles the looped block; family {self.family!r} has none. "
            "Leave train.compile off (and load_model(..., compile=False)) for this family"
        )
