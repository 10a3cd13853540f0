"""Every setting of the fixed-point analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError

from .path_independence import STARTS
from .problems import CLASSES


@dataclass(frozen=True)
class FixedPointConfig:
    """The settings `fixed_point.run` uses: the defaults (`report()`) are what the report runs,
    so `run(model)` in a notebook computes the report's numbers; `quick()` the tests' sizes.
    `run(model, config=c, n_problems=8)` overrides one field of `c`."""

    # problems from `balanced_problems` (longest carry chains 0..max_chain equally represented)
    n_problems: int = 96
    # problems and power iterations of the Jacobian spectrum (0 problems skips it)
    n_jacobian: int = 4
    jacobian_iters: int = 40
    # problems whose readout-state trajectory is kept for the orbit figure (0 keeps none)
    n_trajectories: int = 4
    # problems of the path-independence test (0 skips it), and the states they start from
    n_path: int = 128
    path_starts: tuple[str, ...] = STARTS
    # loops to run; None: min(4 x trained loops, max_loops). More rebuilds the model with more hook sets
    horizon: int | None = None
    max_chain: int = 5
    seed: int = 0
    batch_size: int = 256
    # bound on the per-batch states kept for distances to the last state (it lowers the batch)
    state_budget_mb: float = 256.0
    # relative-step levels whose first crossing is reported per position class
    tolerances: tuple[float, ...] = (0.1, 0.03, 0.01, 0.003, 0.001)
    # Huginn's exit rule: stop once the relative step over `halt_on` positions is below the
    # tolerance; `halt_tol` is the one the findings quote, the sweep is compared with fixed depth
    halt_tol: float = 0.03
    halting_tolerances: tuple[float, ...] = (0.3, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.001)
    halt_on: str = "readout"
    jacobian_tol: float = 1e-5

    def __post_init__(self) -> None:
        if self.horizon is not None and self.horizon < 1:
            raise UserError(f"horizon must be >= 1, got {self.horizon}")
        if self.halt_on not in CLASSES:
            raise UserError(f"halt_on={self.halt_on!r}; choose one of {CLASSES}")
        if self.n_problems < 1:
            raise UserError(f"n_problems must be >= 1, got {self.n_problems}")

    @classmethod
    def report(cls) -> FixedPointConfig:
        """The report's settings (the defaults), named where a caller wants to say so."""
        return cls()

    @classmethod
    def quick(cls) -> FixedPointConfig:
        return cls(n_problems=16, n_jacobian=1, jacobian_iters=5, n_trajectories=2)
