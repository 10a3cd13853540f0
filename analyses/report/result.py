"""The report's own sections (model card, evaluation) as trees of frozen dataclasses: what
their JSON holds (through `jsonsafe.to_json`) and what their findings read, attribute by
attribute.

The model card is gathered from the run (config.json, metrics.jsonl, the model) and the
evaluation comes from `abacus_interp.evaluation.evaluate` as dicts; the section builders
type them once with `jsonsafe.from_json`, which refuses a key that is no field here and a
missing field, so a renamed key fails the section instead of silently dropping a sentence.
A part the task does not support is None (the evaluation says why in `skipped`). The run's
own config stays a dict (`config`, `settings`, `task`, `model`): it is config.json, whose
keys are the training code's, not this report's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go


# --------------------------------------------------------------------------- the report's own sections


@dataclass(frozen=True)
class Built:
    """What the report's own analyses (model card, evaluation, ablation, architectures) return:
    a `Result` (`to_dict`, `figures`, `findings`) whose HTML tables the report shows too."""

    data: dict[str, Any]  # JSON-safe
    sentences: list[str]
    plots: dict[str, go.Figure] = field(default_factory=dict)
    tables: str = ""  # extra HTML, already escaped

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def figures(self) -> dict[str, go.Figure]:
        return dict(self.plots)

    def findings(self) -> list[str]:
        return list(self.sentences)


@dataclass(frozen=True)
class NoSizes:
    """The config of a section that runs at no size (the model card, the driver grids)."""

    @classmethod
    def quick(cls) -> NoSizes:
        return cls()


# --------------------------------------------------------------------------- model card


@dataclass(frozen=True)
class RunConfigView:
    """The parts of config.json the card shows (the model without its vocabulary)."""

    task: dict[str, Any] | None
    model: dict[str, Any]
    vocab: dict[str, Any] | None
    train: dict[str, Any] | None


@dataclass(frozen=True)
class Parameters:
    """`abacus_interp.core.summary.parameter_summary`: what the parameters are and what looping buys."""

    parameters: dict[str, int]  # by component
    total_parameters: int
    looped_block_parameters: int
    effective_depth: int
    unrolled_equivalent_parameters: int
    forward_flops_per_token: float
    loop_compute_multiplier: int
    flops_seq_len: int


@dataclass(frozen=True)
class Curve:
    step: tuple[int, ...]
    value: tuple[float | None, ...]  # None: not logged at that step, or not finite


@dataclass(frozen=True)
class Grokking:
    """When train accuracy (memorisation) and test accuracy (generalisation) passed `threshold`."""

    threshold: float
    train_metric: str
    test_metric: str
    train_step: int | None  # None: never passed
    test_step: int | None


@dataclass(frozen=True)
class CompareInfo:
    run_dir: str
    config_differences: dict[str, tuple[Any, Any]]  # flattened config key -> (this run, the other)


@dataclass(frozen=True)
class ModelCard:
    run_dir: str
    preset: str | None
    config: RunConfigView
    parameters: Parameters
    checkpoint_steps: tuple[int, ...]
    checkpoint: str | None
    # "step" and the logged training columns (loss, train_exact_match, lr, grad_norm), each a
    # list over the logged steps; a column the run never logged is absent
    training_curves: dict[str, tuple[float | None, ...]]
    eval_curves: dict[str, Curve]  # exact match / accuracy columns of metrics.jsonl
    eval_loss_curves: dict[str, Curve]
    grokking: Grokking | None = None  # modular runs with a held-out accuracy column
    compare: CompareInfo | None = None  # with a comparison run


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Grid:
    """Exact match per (digits of a, digits of b); None for a cell that does not fit."""

    digits_a: tuple[int, ...]
    digits_b: tuple[int, ...]
    exact_match: tuple[tuple[float | None, ...], ...]  # [a][b]
    loss: tuple[tuple[float | None, ...], ...]
    skipped_cells: tuple[tuple[int, int], ...]
    trained_digits: tuple[int, int]
    n_per_cell: int
    n_loops: int  # the teacher-forced depth of the loss (and of exact match without adaptive loops)
    in_distribution_exact_match: float | None
    out_of_distribution_exact_match: float | None  # None: no cell beyond the trained digits
    decoding: str | None = None  # how exact match was read, e.g. "6 loops" (None: a report from before it was recorded)


@dataclass(frozen=True)
class LoopSet:
    exact_match: tuple[float | None, ...]  # per loop count of `Loops.loops`
    loss: tuple[float | None, ...]
    n: int


@dataclass(frozen=True)
class AdaptiveSet:
    """One set's exact match with adaptive loops, and the loops its problems used."""

    exact_match: float
    median_loops: int
    max_loops_used: int
    n: int


@dataclass(frozen=True)
class AdaptiveLoops:
    label: str  # e.g. "adaptive loops, at most 128, halting at relative step < 0.001"
    cap: int
    sets: dict[str, AdaptiveSet]


@dataclass(frozen=True)
class Loops:
    loops: tuple[int, ...]
    trained_loops: int
    sets: dict[str, LoopSet]  # in_distribution / out_of_distribution, or train / test
    adaptive: AdaptiveLoops | None = None  # the run's own adaptive loops, beside the fixed counts


@dataclass(frozen=True)
class FromGrid:
    max_operand_digits: tuple[int, ...]
    exact_match: tuple[float | None, ...]


@dataclass(frozen=True)
class Lengths:
    """Exact match with equal-length operands, past the trained length."""

    lengths: tuple[int, ...]
    exact_match: tuple[float | None, ...]
    loss: tuple[float | None, ...]
    n_per_length: int
    trained_max: int | None
    from_grid: FromGrid
    decoding: str | None = None


@dataclass(frozen=True)
class EdgeCase:
    group: str
    name: str
    kind: str
    in_distribution: bool
    passed: bool
    expected: tuple[str, ...]  # human order, one per problem
    answers: tuple[str, ...]  # the model's, human order
    correct: tuple[bool, ...]
    loops_used: tuple[int, ...] = ()  # per problem: the loop count its answer was read at


@dataclass(frozen=True)
class GroupCount:
    passed: int
    total: int


@dataclass(frozen=True)
class EdgeCases:
    cases: tuple[EdgeCase, ...]
    by_group: dict[str, GroupCount]
    pass_rate: float | None
    lengths: tuple[int, ...]
    in_distribution_pass_rate: float | None = None
    out_of_distribution_pass_rate: float | None = None  # None: no case past the trained lengths
    decoding: str | None = None


@dataclass(frozen=True)
class Bucket:
    bucket: str  # longest carry cascade: "0".."4", "5+"
    n: int
    exact_match: float | None  # None: no problem in the bucket
    loss: float | None
    natural_fraction: float | None
    reason: str | None = None  # why a bucket has no problems (too few digits, too long)


@dataclass(frozen=True)
class Carry:
    buckets: tuple[Bucket, ...]
    n_per_bucket: int
    n_loops: int
    decoding: str | None = None


@dataclass(frozen=True)
class Scores:
    """Held-out scores of one set (perplexity) or split (splits)."""

    perplexity: float | None
    loss: float | None
    mean_answer_logprob: float | None
    exact_match: float | None
    token_accuracy: float | None
    n: int


@dataclass(frozen=True)
class Evaluation:
    """`abacus_interp.evaluation.EvalReport.to_dict()`, typed."""

    task: dict[str, Any]  # the task's config
    model: dict[str, Any]
    settings: dict[str, Any]  # the evaluation's arguments as run
    grid: Grid | None
    loops: Loops | None
    lengths: Lengths | None
    edge_cases: EdgeCases | None
    carry: Carry | None
    perplexity: dict[str, Scores] | None
    splits: dict[str, Scores] | None
    generate_agreement: float | None
    agreement: dict[str, Any] | None  # the greedy re-check: n, n_correct, sample, disagreements
    skipped: dict[str, str]  # section -> why it does not apply
    notes: tuple[str, ...]
