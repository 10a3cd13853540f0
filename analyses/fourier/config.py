"""The sizes of the Fourier analysis, shared by its `run` and its report plugin."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FourierConfig:
    """The sizes the Fourier analysis runs with: the defaults are the report's, `quick()` the tests'.
    Pass one to `fourier.run(..., config=...)`; a keyword naming a field overrides it."""

    max_checkpoints: int = 24

    @classmethod
    def quick(cls) -> FourierConfig:
        return cls(max_checkpoints=6)
