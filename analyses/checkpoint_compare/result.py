"""The checkpoint comparison as a tree of frozen dataclasses: `to_dict` is `jsonsafe.to_json`
of it, and the findings and figures read its attributes (arrays stay numpy until written)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from abacus_interp.jsonsafe import to_json


@dataclass(frozen=True)
class ChangePoint:
    """An interval where a speed peaks: from `from_step` to the checkpoint `step`."""

    step: int
    from_step: int
    speed: float


@dataclass(frozen=True)
class ParameterMove:
    """How far one parameter tensor (or one attention head's slice of it) moved."""

    name: str
    group: str
    abs_change: float
    rms_change: float
    relative_change: float
    norm_a: float
    norm_b: float
    numel: int


@dataclass(frozen=True)
class GroupMove:
    group: str
    abs_change: float
    relative_change: float


@dataclass(frozen=True)
class Moved:
    """What moved most between the two checkpoints `steps`, ranked by `rank_by`."""

    rank_by: str
    parameters: tuple[ParameterMove, ...]
    heads: tuple[ParameterMove, ...]
    groups: tuple[GroupMove, ...]  # by relative change
    steps: tuple[int, int]


@dataclass(frozen=True)
class ProblemSet:
    n_problems: int
    n_samples: int  # token positions used for CKA
    positions: str
    examples: tuple[tuple[str, str], ...]  # the first few (prompt, target), model order


@dataclass(frozen=True)
class RunScan:
    """Everything measured on one run's checkpoints (C of them, L loops)."""

    run_dir: str
    steps: list[int]  # lists, as callers compare them with lists of steps
    n_loops: int
    metrics: tuple[dict[str, float], ...]  # rows of metrics.jsonl: step, losses, exact-match / accuracy columns
    problem_loss: np.ndarray  # [C]
    problem_exact_match: np.ndarray  # [C]
    group_norms: dict[str, np.ndarray]  # group (and "total") -> [C]
    group_speed: dict[str, np.ndarray]  # group (and "total") -> [C-1], per step
    distance_from_first: np.ndarray  # [C]  ||theta_k - theta_0||
    cka: np.ndarray  # [L, C, C]
    speeds: dict[str, np.ndarray]  # signal -> [C-1], per step (or per log step)
    change_points: dict[str, tuple[ChangePoint, ...]]  # every signal -> its top peaks (none with one checkpoint)
    # views of `cka` written beside it, so readers of the JSON need not slice the cube
    cka_vs_final: np.ndarray = field(init=False)  # [L, C]
    cka_to_previous: np.ndarray = field(init=False)  # [L, C-1]

    def __post_init__(self) -> None:
        object.__setattr__(self, "cka_vs_final", self.cka[:, :, -1])
        object.__setattr__(self, "cka_to_previous", np.stack([np.diagonal(c, 1) for c in self.cka]))

    def to_dict(self) -> dict:
        return to_json(self)


@dataclass(frozen=True)
class CheckpointComparison:
    signal: str
    per: str
    a: RunScan
    b: RunScan | None
    cross_cka: np.ndarray | None  # [L, C_a, C_b] loop t of run a vs loop t of run b
    matched_cka: np.ndarray | None  # [L, C_a] vs run b's checkpoint nearest in step
    matched_steps_b: list[int] | None
    moved: Moved
    problems: ProblemSet
    notes: tuple[str, ...] = ()
    compare_skipped: str | None = None  # why a second run given was not compared
    # run a's change points under the chosen signal, and their steps (what the figures mark)
    change_points: dict[str, tuple[ChangePoint, ...]] = field(init=False)
    change_steps: list[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "change_points", self.a.change_points)
        object.__setattr__(self, "change_steps", [c.step for c in self.a.change_points[self.signal]])

    def to_dict(self) -> dict:
        return to_json(self)

    def figures(self) -> dict:
        from .figures import figures  # the figures read this class: imported on use

        return figures(self)

    def findings(self) -> list[str]:
        from .findings import findings

        return findings(self)
