"""The sizes of the checkpoint comparison, shared by its `run` and its report plugin."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointCompareConfig:
    """The sizes the checkpoint comparison runs with: the defaults are the report's, `quick()` the tests'.
    Pass one to `checkpoint_compare.run(..., config=...)`; a keyword naming a field overrides it."""

    n_problems: int = 24
    max_samples: int = 512
    max_checkpoints: int = 16

    @classmethod
    def quick(cls) -> CheckpointCompareConfig:
        return cls(n_problems=8, max_samples=128, max_checkpoints=5)
