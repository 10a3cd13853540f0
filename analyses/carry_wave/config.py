"""Every setting of the carry-wave analysis: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError


@dataclass(frozen=True)
class CarryWaveConfig:
    """The settings `carry_wave.run` uses: the defaults are what the report runs, so `run(model)`
    in a notebook computes the report's numbers; `quick()` the tests'. `run(model, config=c,
    n_problems=8)` overrides one field of `c`. Lengths are multiples of the trained operand
    length N (the task's max_digits)."""

    # problems per (sample, length) group of the lock-in fit and per row of the accuracy table
    n_problems: int = 48
    # operand lengths of the accuracy table, in multiples of N
    length_multiples: tuple[float, ...] = (1, 2, 4, 10, 20)
    # the lock-in fit is measured in distribution (N digits) and at this multiple of N
    far_multiple: int = 4
    # loops run for the lock-in curves (a digit that is right at this loop and after is locked)
    horizon: int = 64
    # the cap for the convergence check of Anil et al.: below what the longest chains need,
    # so some problems stop unconverged and their accuracy can be compared
    stress_cap: int = 24
    # the delayed-carry patch: loops run on the carry-killing input before the carry-generating
    # one replaces it (0: the clean run), on a chain of 4N - 2 columns in 4N digits
    switch_loops: tuple[int, ...] = (0, 2, 4, 8, 12, 16)
    # loops over which each head's attention is split by column (it settles after a few)
    head_loops: int = 12
    # path independence on uniform problems at these multiples of N, from three other starts
    # (the 20x row costs more than the rest together and says the same on the shipped run)
    path_multiples: tuple[float, ...] = (1, 2, 4, 10)
    # the problem samples and the delayed-carry pair
    seed: int = 0

    def __post_init__(self):
        if self.n_problems < 2 or self.horizon < 2 or self.stress_cap < 2 or self.head_loops < 1:
            raise UserError("CarryWaveConfig: n_problems, horizon and stress_cap must be >= 2, head_loops >= 1")
        if not self.switch_loops or min(self.switch_loops) < 0 or max(self.switch_loops) >= self.horizon:
            raise UserError(f"CarryWaveConfig.switch_loops={self.switch_loops}: loop counts in [0, horizon)")

    @classmethod
    def quick(cls) -> CarryWaveConfig:
        return cls(n_problems=6, length_multiples=(1, 2), far_multiple=2, horizon=12, stress_cap=6,
                   switch_loops=(0, 2, 4), head_loops=3, path_multiples=(1,))
