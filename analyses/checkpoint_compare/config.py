"""Every setting of the checkpoint comparison: one config, whose defaults are the report's."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_interp.errors import UserError

SIGNALS = ("representation", "parameters", "loss")
RANK_BY = ("rms_change", "relative_change", "abs_change")


@dataclass(frozen=True)
class CheckpointCompareConfig:
    """The settings `checkpoint_compare.run` uses: the defaults (`report()`) are what the report
    runs, so `run(run_dir)` in a notebook computes the report's numbers; `quick()` the tests'.
    `run(run_dir, config=c, n_problems=8)` overrides one field of `c`."""

    # problems drawn from the run's task (with `seed`), the same for every checkpoint and both runs
    n_problems: int = 24
    # token positions used for CKA (a fixed seeded subset when there are more)
    max_samples: int = 512
    # checkpoints compared, spread evenly over the run (None: all of them)
    max_checkpoints: int | None = 16
    # the two checkpoint steps of "which parameters moved most" (None: the first and the last)
    steps: tuple[int, int] | None = None
    # "all" real tokens, or "answer" (the positions that predict answer tokens)
    positions: str = "all"
    # the change-point signal marked on the figures (one of SIGNALS), and how many peaks
    signal: str = "representation"
    n_change_points: int = 3
    # speeds per "step", or per "log_step" (change per unit of ln(1 + step)): per step favours
    # the first steps of a run, per log step the phases seen on a log axis
    per: str = "step"
    # parameters and heads listed as moved most, ranked by one of RANK_BY
    top_k: int = 20
    rank_by: str = "rms_change"
    seed: int = 0
    batch_size: int = 256

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise UserError(f"signal must be one of {SIGNALS}, got {self.signal!r}")
        if self.rank_by not in RANK_BY:
            raise UserError(f"rank_by must be one of {RANK_BY}, got {self.rank_by!r}")
        if self.per not in ("step", "log_step"):
            raise UserError(f"per must be 'step' or 'log_step', got {self.per!r}")
        if self.positions not in ("all", "answer"):
            raise UserError(f"positions must be 'all' or 'answer', got {self.positions!r}")

    @classmethod
    def report(cls) -> CheckpointCompareConfig:
        """The report's settings (the defaults), named where a caller wants to say so."""
        return cls()

    @classmethod
    def quick(cls) -> CheckpointCompareConfig:
        return cls(n_problems=8, max_samples=128, max_checkpoints=5)
