"""Every setting of the multiplication analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError


@dataclass(frozen=True)
class MultiplicationConfig:
    """The settings `multiplication.run` uses: the defaults are what the report runs, so
    `run(model)` in a notebook computes the report's numbers; `quick()` the tests'. Lengths
    are multiples of the trained multiplicand length N (the task's max_digits)."""

    # problems per row of the accuracy table and per group of the lock-in fits
    n_problems: int = 48
    # multiplicand lengths of the accuracy table, in multiples of N (each times every k)
    length_multiples: tuple[float, ...] = (1, 4, 10)
    # the lock-in fits and head readings are measured at N and at this multiple of N
    far_multiple: int = 4
    # loops run for the lock-in curves (a digit right at this loop and after is locked in)
    horizon: int = 48
    # loops over which each head's attention is split by key group (it settles after a few)
    head_loops: int = 12
    # the delayed-carry patch: loops run on the input whose product has no long carry before
    # the input whose carry crosses every column replaces it (0: the clean run)
    switch_loops: tuple[int, ...] = (0, 4, 8, 16)
    seed: int = 0

    def __post_init__(self):
        if self.n_problems < 2 or self.horizon < 2 or self.head_loops < 1 or self.far_multiple < 1:
            raise UserError("MultiplicationConfig: n_problems and horizon must be >= 2, head_loops and far_multiple >= 1")
        if not self.switch_loops or min(self.switch_loops) < 0 or max(self.switch_loops) >= self.horizon:
            raise UserError(f"MultiplicationConfig.switch_loops={self.switch_loops}: loop counts in [0, horizon)")

    @classmethod
    def quick(cls) -> MultiplicationConfig:
        return cls(n_problems=6, length_multiples=(1, 2), far_multiple=2, horizon=10, head_loops=3,
                   switch_loops=(0, 2))
