"""The carry-attention result as a tree of frozen dataclasses: what `to_dict` writes (through
`jsonsafe.to_json`) and what the findings and figures read, attribute by attribute.

The section builders (`attention_stats`, `ablation`, `patching`, `probes`, `labels`) still
return dicts, which their own tests read; `run` types them once with `jsonsafe.from_json`,
which refuses a key that is no field here and a missing field, so a renamed key fails at the
source instead of emptying a sentence. Arrays stay numpy until written; NaN (a group without
rows, a probe without test rows) becomes null in the JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from abacus_interp.jsonsafe import json_safe, to_json


@dataclass(frozen=True)
class ModelInfo:
    n_loops: int  # analysed
    trained_loops: int
    n_layers: int
    n_heads: int
    d_model: int
    checkpoint: str | None


@dataclass(frozen=True)
class Settings:
    """The settings that shaped the numbers (max_digits as resolved for the model)."""

    n_problems: int
    n_pairs: int
    n_probe_problems: int
    max_digits: int
    sections: tuple[str, ...]
    ablation_kinds: tuple[str, ...]
    patch_positions: tuple[str, ...]
    patch_heads: bool
    probe_threshold: float
    seed: int
    subtasks: tuple[str, ...]


@dataclass(frozen=True)
class Labels:
    """The balanced problem set (labels.ProblemSet.summary)."""

    n_problems: int
    n_digits: int
    max_digits: int
    complexity_counts: dict[str, int]  # longest cascade bucket -> problems
    subtask_counts: dict[str, int]  # sub-task -> answer digits
    carry_in_fraction: float | None  # None without answer digits
    chain_length_counts: dict[int, int]


# ------------------------------------------------------------------------------ attention
@dataclass(frozen=True)
class HeadScore:
    """One (loop, layer, head) of the top heads, by lift over chance."""

    loop: int
    layer: int
    head: int
    score: float
    chance: float
    lift: float


@dataclass(frozen=True)
class TopHeads:
    alignment: tuple[HeadScore, ...]  # empty when no row has an aligned digit
    carry_source: tuple[HeadScore, ...]


@dataclass(frozen=True)
class TargetScore:
    """Attention mass on a target (aligned digits or carry source) over one group's rows."""

    score: np.ndarray  # [loop layer head]
    chance: float  # mass a uniform head would put there
    lift: np.ndarray  # (score - chance) / (1 - chance)
    n: int  # rows


@dataclass(frozen=True)
class AttentionStats:
    categories: tuple[str, ...]
    groups: tuple[str, ...]
    mass: dict[str, np.ndarray | None]  # group -> [loop layer head category]; None: no rows
    n_rows: dict[str, int]
    alignment: dict[str, TargetScore | None]  # group -> score; None: no row of the group has the target
    carry_source: dict[str, TargetScore | None]
    staircase: np.ndarray  # [loop layer head answer_digit slot]
    staircase_rows: tuple[str, ...]
    staircase_cols: tuple[str, ...]
    top_heads: TopHeads


@dataclass(frozen=True)
class ExamplePattern:
    """One problem's full attention pattern, in the model's token order."""

    problem: str
    tokens: tuple[str, ...]
    pattern: np.ndarray  # [loop layer head query key]


# ------------------------------------------------------------------------------- ablation
@dataclass(frozen=True)
class Scores:
    exact_match: float
    loss: float
    digit_accuracy: float
    loss_by_subtask: dict[str, float | None]  # None: no answer digit of that sub-task
    digit_accuracy_by_subtask: dict[str, float | None]


@dataclass(frozen=True)
class AblationRow:
    """One head ablated in one loop: its scores and their change from the baseline."""

    kind: str
    loop: int
    layer: int
    head: int
    exact_match: float
    loss: float
    digit_accuracy: float
    loss_by_subtask: dict[str, float | None]
    digit_accuracy_by_subtask: dict[str, float | None]
    delta_exact_match: float
    delta_loss: float
    delta_loss_by_subtask: dict[str, float | None]


@dataclass(frozen=True)
class Harmful:
    loop: int
    layer: int
    head: int
    delta_exact_match: float
    delta_loss: float
    delta_loss_by_subtask: dict[str, float | None]


@dataclass(frozen=True)
class AblationArrays:
    exact_match: np.ndarray  # [loop layer head]
    loss: np.ndarray
    loss_by_subtask: dict[str, np.ndarray]


@dataclass(frozen=True)
class Ablation:
    baseline: Scores
    kinds: tuple[str, ...]
    table: tuple[AblationRow, ...]  # one row per kind x loop x layer x head
    arrays: dict[str, AblationArrays]  # by kind
    most_harmful: dict[str, tuple[Harmful, ...]]  # by kind, most exact match lost first


# ------------------------------------------------------------------------------- patching
@dataclass(frozen=True)
class Site:
    loop: int
    layer: int


@dataclass(frozen=True)
class PatchGroup:
    """Fraction of the clean-corrupt logit difference restored, per site and position."""

    n_pairs: int
    input: np.ndarray  # [position]
    resid: np.ndarray  # [loop layer position]
    heads: np.ndarray  # [loop layer head position]; NaN without per-head patching
    carry_present: Site | None  # first resid site at "pred" over the threshold; None: none or not patched
    mean_ld_clean: float
    mean_ld_corrupt: float


@dataclass(frozen=True)
class Patching:
    positions: tuple[str, ...]
    threshold: float
    groups: dict[str, PatchGroup]  # all, direct, cascade (kinds without pairs left out)
    first_loop_carry_present: Site | None
    both_correct_fraction: float
    examples: tuple[tuple[str, str], ...]  # (clean, corrupt) in model order


# --------------------------------------------------------------------------------- probes
@dataclass(frozen=True)
class ProbeBaseline:
    """The probe on the input embedding; None where a split had one class only."""

    accuracy: float | None
    shuffled_accuracy: float | None
    majority: float | None
    cascade_accuracy: float | None


@dataclass(frozen=True)
class Decodable:
    loop: int
    layer: int
    accuracy: float


@dataclass(frozen=True)
class Probes:
    input: ProbeBaseline
    n_train: int
    n_test: int
    accuracy: np.ndarray  # [loop layer], held-out
    shuffled_accuracy: np.ndarray
    cascade_accuracy: np.ndarray  # on answer digits at the end of a cascade (chain >= 2)
    threshold: float
    first_decodable: Decodable | None  # None: no site reaches the threshold
    chance: float
    carry_in_fraction: float


# --------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class CarryAttentionResult:
    """Every number of one carry-attention analysis; a section not run (not in the config's
    `sections`) is None."""

    model: ModelInfo
    settings: Settings
    labels: Labels
    attention: AttentionStats | None
    example: ExamplePattern | None  # run with the attention section
    ablation: Ablation | None
    patching: Patching | None
    probes: Probes | None
    timings: dict[str, float]  # seconds per part, and "total"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: plain lists/dicts, NaN as None."""
        return to_json(self)

    def findings(self) -> list[str]:
        from .findings import findings  # the findings read this class: imported on use

        return findings(self)

    def figures(self) -> dict[str, Any]:
        """Plotly figures keyed by name (never shown)."""
        from .figures import figures

        return figures(self)

    def summary(self) -> dict[str, Any]:
        """The headline numbers as JSON-safe dicts: best aligned / carry-source heads, most
        harmful ablations, first loop with the carry present (patching) and linearly decodable
        (probes)."""
        out: dict[str, Any] = {}
        if self.attention is not None:
            out["top_heads"] = dataclasses.asdict(self.attention.top_heads)
        if self.ablation is not None:
            out["baseline"] = dataclasses.asdict(self.ablation.baseline)
            out["most_harmful"] = {k: [dataclasses.asdict(h) for h in v] for k, v in self.ablation.most_harmful.items()}
        if self.patching is not None:
            out["carry_present"] = {g: None if v.carry_present is None else dataclasses.asdict(v.carry_present)
                                    for g, v in self.patching.groups.items()}
        if self.probes is not None:
            fd = self.probes.first_decodable
            out["first_decodable"] = None if fd is None else dataclasses.asdict(fd)
        return json_safe(out)
