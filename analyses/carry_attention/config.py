"""The sizes of the carry analysis, shared by its `run` and its report plugin."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CarryAttentionConfig:
    """The sizes the carry analysis runs with: the defaults are the report's, `quick()` the tests'.
    Pass one to `carry_attention.run(..., config=...)`; a keyword naming a field overrides it."""

    n_problems: int = 64
    n_pairs: int = 16
    n_probe_problems: int = 128
    patch_heads: bool = False  # per-head patching multiplies the cost by the number of heads

    @classmethod
    def quick(cls) -> CarryAttentionConfig:
        return cls(n_problems=12, n_pairs=4, n_probe_problems=24)
