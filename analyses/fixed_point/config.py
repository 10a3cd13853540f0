"""The sizes of the fixed-point analysis, shared by its `run` and its report plugin."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FixedPointConfig:
    """The sizes the fixed-point analysis runs with: the defaults are the report's, `quick()` the tests'.
    Pass one to `fixed_point.run(..., config=...)`; a keyword naming a field overrides it."""

    n_problems: int = 96
    n_jacobian: int = 4
    jacobian_iters: int = 40
    n_trajectories: int = 4

    @classmethod
    def quick(cls) -> FixedPointConfig:
        return cls(n_problems=16, n_jacobian=1, jacobian_iters=5, n_trajectories=2)
