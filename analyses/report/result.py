"""The report's own sections (model card, evaluation) as trees of frozen dataclasses: what
their JSON holds (through `jsonsafe.to_json`) and what their findings read, attribute by
attribute.

The model card is gathered from the run (config.json, metrics.jsonl, the model) and typed
once with `jsonsafe.from_json`, which refuses a key that is no field here and a missing
field, so a renamed key fails the section instead of silently dropping a sentence. The run's
own config stays a dict (`config`, `task`, `model`): it is config.json, whose keys are the
training code's, not this report's.

The evaluation is the library's own typed tree (`abacus_interp.evaluation.EvalReport`, its
sections in `abacus_interp.evaluation.result`), imported here, not declared again: a part the
task does not support is None, and the evaluation says why in `skipped`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# the evaluation's types, for the report's modules to import from here beside their own
from abacus_interp.evaluation.report import EvalReport
from abacus_interp.evaluation.result import (
    AdaptiveLoops,
    AdaptiveSet,
    Agreement,
    Bucket,
    Carry,
    EdgeCaseResult,
    EdgeCases,
    FromGrid,
    Grid,
    GroupCount,
    Lengths,
    Loops,
    LoopSet,
    SetScores,
)

__all__ = [
    "AdaptiveLoops", "AdaptiveSet", "Agreement", "Bucket", "Built", "Carry", "CompareInfo", "Curve",
    "EdgeCaseResult", "EdgeCases", "EvalReport", "FromGrid", "Grid", "Grokking", "GroupCount", "Lengths",
    "LoopSet", "Loops", "ModelCard", "NoSizes", "Parameters", "RunConfigView", "SetScores",
]

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
    # the checkpoint the run started at (train.init_from); None: a fresh initialisation
    warm_start: str | None = None
    # the step from which the checkpoints hold the mean of the weights (train.average_from); None: the live weights
    averaged_from: int | None = None
