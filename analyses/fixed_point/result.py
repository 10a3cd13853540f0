"""The fixed-point result as a tree of frozen dataclasses: what `to_dict` writes (through
`jsonsafe.to_json`) and what the findings and figures read, attribute by attribute.

The summary builders in `summary.py` and `path_independence.py` still write dicts; `run`
types them once with `jsonsafe.from_json`, which refuses a key that is no field here and a
missing field, so a renamed key fails at the source instead of emptying a sentence.
Numbers that are NaN (a class without examples, a digit that never locks in) are None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Quantiles:
    """Median, quartiles and mean over problems, one value per loop."""

    median: tuple[float | None, ...]
    q25: tuple[float | None, ...]
    q75: tuple[float | None, ...]
    mean: tuple[float | None, ...]


@dataclass(frozen=True)
class Spread:
    """Median, quartiles and mean over problems of one number per problem."""

    median: float | None
    q25: float | None
    q75: float | None
    mean: float | None


@dataclass(frozen=True)
class ModelShape:
    d_model: int
    n_layers: int
    n_heads: int
    n_loops: int
    max_loops: int
    max_seq_len: int


@dataclass(frozen=True)
class Settings:
    """The settings that shaped the numbers (the rest of the config is in the report's sizes)."""

    tolerances: tuple[float, ...]
    halt_tol: float
    halting_tolerances: tuple[float, ...]
    halt_on: str
    seed: int
    batch_size: int  # the batch actually used: the state budget may have lowered it
    state_budget_mb: float
    jacobian_iters: int
    jacobian_tol: float


@dataclass(frozen=True)
class Steps:
    classes: tuple[str, ...]
    relative_step: dict[str, Quantiles]  # by position class
    distance_to_last: dict[str, Quantiles]
    # position class -> str(tolerance) -> first loop whose median relative step is below it
    first_loop_below: dict[str, dict[str, int | None]]


@dataclass(frozen=True)
class DigitAccuracy:
    digit: tuple[int, ...]
    accuracy: tuple[tuple[float | None, ...], ...]  # [loop][digit]


@dataclass(frozen=True)
class ChainAccuracy:
    chain: tuple[int, ...]
    accuracy: tuple[tuple[float | None, ...], ...]  # [loop][chain]


@dataclass(frozen=True)
class LogitLens:
    exact_match: tuple[float, ...]  # per loop
    token_accuracy: tuple[float, ...]
    digit_accuracy: DigitAccuracy
    eos_accuracy: tuple[float | None, ...]
    kl: Quantiles
    accuracy_by_chain: ChainAccuracy | None = None  # None: the task has no carry chains


@dataclass(frozen=True)
class LockRow:
    """Lock-in loops of one group of answer tokens: one digit index, one carry-chain length,
    or the end token (then neither `digit` nor `chain`)."""

    n: int
    locked_fraction: float | None
    correct_at_trained_depth: float | None
    after_trained_depth_fraction: float | None
    median: float | None  # over the tokens that lock in
    q25: float | None
    q75: float | None
    mean: float | None
    digit: int | None = None
    chain: int | None = None


@dataclass(frozen=True)
class LockInPart:
    """Lock-in through one last loop (the horizon, or the trained depth)."""

    by_digit: tuple[LockRow, ...]
    eos: LockRow
    by_chain: tuple[LockRow, ...] | None  # None: the task has no carry chains
    slope_loops_per_link: float | None = None  # least squares, lock-in loop on chain length
    slope_pvalue: float | None = None  # of a zero slope: the slope is an effect only below prose.SIGNIFICANCE
    spearman: float | None = None


@dataclass(frozen=True)
class LockIn:
    """The definition (through the horizon) at the top level, as notebooks and the report JSON
    read it, and both parts under their names (the figure draws them side by side)."""

    by_digit: tuple[LockRow, ...]
    eos: LockRow
    by_chain: tuple[LockRow, ...] | None
    horizon: LockInPart
    trained_depth: LockInPart
    headline: str | None  # None without carry chains
    slope_loops_per_link: float | None = None
    slope_pvalue: float | None = None
    spearman: float | None = None


@dataclass(frozen=True)
class Behaviour:
    """What the state does past the trained depth; classified only with >= 3 loops past it."""

    tail_loops: tuple[int, int]
    exact_match: tuple[float, ...]
    exact_match_at_trained: float
    exact_match_at_horizon: float
    best_loops: int
    best_exact_match: float
    labels: tuple[str, ...] | None  # per problem; None (with `note`) when not classified
    fractions: dict[str, float] | None
    overall: str | None
    note: str | None = None  # why it was not classified
    absolute_step_decay_rate: Spread | None = None
    relative_step_decay_rate: Spread | None = None
    median_curve_decay_rate: float | None = None
    norm_growth: Spread | None = None


@dataclass(frozen=True)
class HaltingRow:
    tol: float
    mean_loops: float
    median_loops: float
    exact_match: float
    halted_fraction: float
    fixed_depth_exact_match: float  # at the same mean depth without halting


@dataclass(frozen=True)
class FixedDepth:
    loops: tuple[int, ...]
    exact_match: tuple[float, ...]


@dataclass(frozen=True)
class Halting:
    on: str
    table: tuple[HaltingRow, ...]
    default: HaltingRow
    fixed_depth: FixedDepth


@dataclass(frozen=True)
class Trajectory:
    example: int
    prompt: str
    target: str
    position: int
    longest_chain: int | None
    coords: tuple[tuple[float, ...], ...]  # [loop][principal component]


@dataclass(frozen=True)
class Trajectories:
    explained_variance_ratio: tuple[float, ...]
    examples: tuple[Trajectory, ...]


@dataclass(frozen=True)
class SpectrumAt:
    """The loop map's Jacobian at one loop, per sampled problem."""

    spectral_radius: tuple[float | None, ...]
    rayleigh: tuple[float | None, ...]
    sigma_max: tuple[float | None, ...]
    radius_iterations: int
    sigma_iterations: int
    converged: bool
    radius_quantiles: Spread
    sigma_quantiles: Spread
    contracting_fraction: float
    residual: tuple[float | None, ...] | None  # None at the horizon: no next step was run


@dataclass(frozen=True)
class Contraction:
    examples: tuple[int, ...]
    at: dict[str, SpectrumAt]  # str(loop) -> spectrum there


@dataclass(frozen=True)
class StartAgreement:
    same_state_fraction: float
    same_answer_fraction: float
    exact_match: float
    end_cosine_median: float
    cosine_median_by_loop: tuple[float, ...]
    cosine_q25_by_loop: tuple[float, ...]
    # among the problems the model's own start gets wrong: the share this start answers the same
    # (wrongly) again; None when the reference got none wrong (and in reports written before it)
    same_wrong_answer_fraction: float | None = None


@dataclass(frozen=True)
class PathIndependence:
    horizon: int
    threshold: float
    n_problems: int
    reference_exact_match: float
    starts: dict[str, StartAgreement]  # start name -> agreement with the model's own start
    headline: str
    reference_wrong: int | None = None  # problems the model's own start answers wrong (None: reports before it)


@dataclass(frozen=True)
class Resources:
    seconds: float
    peak_rss_mb: float
    peak_rss_increase_mb: float
    cuda_peak_mb: float | None


@dataclass(frozen=True)
class FixedPointSummary:
    """Everything `to_dict(per_example=False)` holds."""

    analysis: str
    run_dir: str | None
    checkpoint: str | None
    task: dict[str, Any]  # the task's own config, open-ended by task
    model: ModelShape
    trained_loops: int
    model_n_loops: int
    horizon: int
    loops: tuple[int, ...]
    n_problems: int
    settings: Settings
    steps: Steps
    logit_lens: LogitLens
    lock_in: LockIn
    behaviour: Behaviour
    halting: Halting
    trajectories: Trajectories | None  # None: n_trajectories=0
    contraction: Contraction | None  # None: n_jacobian=0
    path_independence: PathIndependence | None  # None: n_path=0
    resources: Resources
